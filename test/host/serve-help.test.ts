// `baton serve --help` fits an 80-column terminal: a longer line wraps mid-word.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { expect, it } from 'vitest';

it('baton serve --help: every line fits 80 columns and every flag is named', () => {
  const out = execFileSync(process.execPath, [join(import.meta.dirname, '../../bin/baton.js'), 'serve', '--help'], { encoding: 'utf8' });
  const long = out.split('\n').filter((l) => l.length > 80);
  expect(long).toEqual([]);
  for (const flag of ['--port', '--host', '--worker', '--sim ', '--traffic', '--no-traffic', '--migration-limit', '--policy', '--token-interval-ms', '--sim-format', '--config', '--replicas N']) expect(out).toContain(flag);
  // mixed is explained on its own line, not after openai's text.
  expect(out).toMatch(/mixed\s+half each/);
}, 30_000);
