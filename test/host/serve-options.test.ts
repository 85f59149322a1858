// `baton serve`'s options for replicas: --replicas N, or replicas: in the --config file (the flag
// wins), refused when out of bounds or beside --router (a hub runs no router of its own).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../cli/args.ts';
import { appOptionsFromArgv, run } from '../../cli/serve.ts';
import { loadConfig } from '../../router/config.ts';

describe('baton serve --replicas', () => {
  it('takes the count from the flag, else the config file, else 1', () => {
    expect(appOptionsFromArgv([]).replicas).toBe(1);
    expect(appOptionsFromArgv(['--replicas', '3', '--sim', '2'])).toMatchObject({ replicas: 3, sim: 2 });
    const file = join(mkdtempSync(join(tmpdir(), 'baton-serve-')), 'baton.yaml');
    writeFileSync(file, 'replicas: 2\nmigration_limit: 5\n');
    const fromFile = appOptionsFromArgv(['--config', file]);
    expect(fromFile.replicas).toBe(2);
    // The count is the host's to act on, not a setting handed to each replica's router.
    expect(fromFile.router).not.toHaveProperty('replicas');
    expect(fromFile.router).toMatchObject({ migrationLimit: 5 });
    expect(appOptionsFromArgv(['--config', file, '--replicas', '1']).replicas).toBe(1);
    // auto: one per core the process may use, as baton router reads it.
    expect(appOptionsFromArgv(['--replicas', 'auto']).replicas).toBe(loadConfig({ flags: { replicas: 'auto' }, env: process.env }).replicas);
  });

  it('refuses a count out of bounds, and --replicas beside --router', async () => {
    for (const bad of ['0', '65', 'two', '1.5']) {
      expect(() => appOptionsFromArgv(['--replicas', bad])).toThrow(UsageError);
      expect(() => appOptionsFromArgv(['--replicas', bad])).toThrow(`--replicas must be an integer from 1 to 64, got '${bad}'`);
    }
    await expect(run(['--router', 'http://127.0.0.1:9', '--replicas', '2'])).rejects.toThrow(UsageError);
    await expect(run(['--router', 'http://127.0.0.1:9', '--replicas', '2'])).rejects.toThrow('--replicas does not go with --router: the hub follows routers, it runs none');
  });
});
