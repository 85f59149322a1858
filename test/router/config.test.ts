// Configuration layers (flags > env > YAML file > defaults) and the CLI's handling of bad input.
import { describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { ConfigError, DEFAULTS, loadConfig } from '../../router/config.ts';

const dir = mkdtempSync(join(tmpdir(), 'baton-config-'));
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

describe('loadConfig', () => {
  it('layers flags over environment over file over defaults', () => {
    const f = file('a.yaml', 'migration_limit: 5\npolicy: round_robin\nworkers:\n  - http://a:1\ninter-token-timeout-ms: 700\n');
    const c = loadConfig({ file: f, env: { BATON_MIGRATION_LIMIT: '2', BATON_BENCH_MS: '10' }, flags: { migrationLimit: '1' } });
    expect(c.migrationLimit).toBe(1);
    expect(c.benchMs).toBe(10);
    expect(c.policy).toBe('round_robin');
    expect(c.workers).toEqual(['http://a:1']);
    expect(c.interTokenTimeoutMs).toBe(700);
    expect(c.connectTimeoutMs).toBe(DEFAULTS.connectTimeoutMs);
  });

  it.each([
    [{ flags: { migrationLimit: '-1' } }, /command line: migration-limit must be a non-negative integer/],
    [{ flags: { policy: 'fastest' } }, /policy must be one of least_inflight, round_robin, power_of_two/],
    [{ flags: { port: '70000' } }, /port must be a port number/],
    [{ flags: { gcScavenge: 'threads' } }, /gc-scavenge must be one of serial, parallel, got "threads"/],
    [{ env: { BATON_GC_SCAVENGE: '' } }, /environment BATON_GC_SCAVENGE: gc-scavenge must be a string/],
    [{ env: { BATON_MIGRATION_MAX_SEQ_LEN: '0' } }, /environment BATON_MIGRATION_MAX_SEQ_LEN: migration-max-seq-len must be a positive integer/],
    [{ file: 'unknown.yaml' }, /unknown setting 'migraton_limit'/],
    [{ file: 'list.yaml' }, /must be a mapping/],
    [{ file: 'broken.yaml' }, /config file/],
  ])('refuses %j with a message naming the source', (opts, msg) => {
    file('unknown.yaml', 'migraton_limit: 3\n');
    file('list.yaml', '- a\n- b\n');
    file('broken.yaml', 'a: [1,\n');
    const o = { ...opts } as { file?: string };
    if (o.file) o.file = join(dir, o.file);
    expect(() => loadConfig(o)).toThrow(ConfigError);
    expect(() => loadConfig(o)).toThrow(msg);
  });
});

describe('baton router command line', () => {
  const run = (...args: string[]) => spawnSync(process.execPath, ['bin/baton.js', 'router', ...args], { encoding: 'utf8', timeout: 30_000 });
  it.each([
    [['--port', 'abc'], /port must be a non-negative integer/],
    [['--bogus'], /Unknown option '--bogus'/],
    [['--worker', 'not a url', '--port', '0'], /invalid worker URL/],
    [['--host', '0.0.0.0', '--port', '0'], /--admin-token/],
    [['--gc-scavenge', 'none', '--port', '0'], /gc-scavenge must be one of serial, parallel/],
  ])('%j exits 2 with one clear line', (args, msg) => {
    const r = run(...args);
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n').filter((l) => l.startsWith('baton router:'))).toHaveLength(1);
    expect(r.stderr).toMatch(msg);
  });
  it('--help prints the options', () => {
    const r = run('--help');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/--migration-limit N/);
  });
});
