// The watched-file source (router/discovery/file-source.ts) against a recording sink, each re-read
// asked for explicitly (no timing): what it reports when workers are added, leave with and without
// a grace, come back, and when the file turns bad; and a bad file at the start refuses the start.
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileSource } from '../../router/discovery/file-source.ts';
import type { DiscoverySink } from '../../router/discovery/types.ts';
import { startRouter } from '../../router/index.ts';
import { ConfigError } from '../../router/config.ts';

const dirs: string[] = [];
const sources: FileSource[] = [];
afterEach(async () => {
  await Promise.all(sources.splice(0).map((s) => s.stop()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempFile(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'baton-wf-'));
  dirs.push(dir);
  const file = join(dir, 'workers.yaml');
  writeFileSync(file, text);
  return file;
}

/** Records every call, in order, in a short form. */
function recorder(): { sink: DiscoverySink; calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    sink: {
      upsert: (w) => calls.push(`upsert ${w.key}`),
      drain: (key, deadline) => calls.push(`drain ${key} +${Math.round((deadline - Date.now()) / 1000)}s`),
      remove: (key) => calls.push(`remove ${key}`),
      resync: (all) => calls.push(`resync ${all.map((w) => w.key).join(',')}`),
      state: (s) => calls.push(`state ${s.kind}${s.kind === 'stale' ? `: ${/workers\[1\]: url must be a string/.test(s.detail) ? 'names the entry' : s.detail}` : ''}`),
    },
  };
}

const A = 'http://10.0.0.1:8000';
const B = 'http://10.0.0.2:8000';
const C = 'http://10.0.0.3:8000';

describe('worker file source', () => {
  it('lists, drains a worker that leaves with a grace, removes one without, and keeps the last good listing when the file turns bad', async () => {
    const file = tempFile(`workers:\n  - ${A}\n  - {url: "${B}", drain_grace_ms: 20000}\n  - ${C}\n`);
    const { sink, calls } = recorder();
    // No change notifications: each read is the test's own (a notification would add one).
    const src = new FileSource(file, 0, false);
    sources.push(src);
    await src.start(sink);
    expect(calls.splice(0)).toEqual([`resync ${A},${B},${C}`, 'state synced']);

    writeFileSync(file, `workers:\n  - ${A}\n`);
    await src.read();
    // B leaves with its 20 s grace: drained; C has none: removed. The listing follows.
    expect(calls.splice(0)).toEqual([`drain ${B} +20s`, `remove ${C}`, `resync ${A}`, 'state synced']);

    writeFileSync(file, `workers:\n  - ${A}\n  - {url: 7}\n`);
    await src.read();
    expect(calls.splice(0)).toEqual(['state stale: names the entry']);

    // Back to good: B is still leaving (its drain is not asked again); C comes back.
    writeFileSync(file, `workers:\n  - ${A}\n  - ${C}\n`);
    await src.read();
    expect(calls.splice(0)).toEqual([`resync ${A},${C}`, 'state synced']);
  });

  it('a bad --worker-file refuses the start, in process and on the command line', async () => {
    const file = tempFile('- ftp://nope\n');
    await expect(startRouter({ port: 0, workerFile: file })).rejects.toThrow(ConfigError);
    await expect(startRouter({ port: 0, workerFile: file })).rejects.toThrow(/discovery \(file\): .*workers\[0\]: worker URL must be http/);
    const r = spawnSync(process.execPath, ['bin/baton.js', 'router', '--port', '0', '--worker-file', join(dirs[0]!, 'missing.yaml')], { encoding: 'utf8', timeout: 30_000 });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/discovery \(file\): ENOENT/);
  });
});
