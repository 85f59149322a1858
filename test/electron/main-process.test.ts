import { mkdtempSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { findElectron } from '../../electron/binary.js';
import { ipcHandlers } from '../../electron/ipc-handlers.ts';
import { INVOKE_CHANNELS } from '../../electron/policy.ts';
import { appOptions, hostChoice, hubRouters } from '../../electron/app.ts';
import type { HostActions, RequestOutput } from '../../host/contract.ts';

const root = join(import.meta.dirname, '../..');

describe('Electron main process under Node', () => {
  it('has a handler for every allowlisted channel and no other', () => {
    const calls: string[] = [];
    const actions = new Proxy({}, { get: (_t, name) => (...args: unknown[]) => calls.push(`${String(name)}(${args.join(',')})`) }) as HostActions;
    const handlers = ipcHandlers(actions, async () => ({ saved: null, bytes: 0 }), () => undefined);
    expect(Object.keys(handlers).sort()).toEqual([...INVOKE_CHANNELS].sort());
    handlers['baton:sim-action'](2, 'kill');
    handlers['baton:drain-worker']('w1', true);
    expect(calls).toEqual(['simAction(2,kill)', 'drainWorker(w1,true)']);
  });

  it('answers baton:request-output from the router\'s recent outputs, null when it no longer has one', () => {
    const kept: RequestOutput = { request_id: 'r1', output_ids: [5, 6, 7], attempts: [{ attempt: 0, worker: 'http://127.0.0.1:1', from_token: 0, tokens: 3 }] };
    const asked: string[] = [];
    const read = (id: string) => (asked.push(id), id === 'r1' ? kept : undefined);
    const handlers = ipcHandlers({} as HostActions, async () => ({ saved: null, bytes: 0 }), read);
    expect(handlers['baton:request-output']('r1')).toBe(kept);
    expect(handlers['baton:request-output']('gone')).toBeNull();
    expect(asked).toEqual(['r1', 'gone']);
  });

  it('imports Electron only at the entry point, through a guarded dynamic import', () => {
    for (const file of ['app.ts', 'policy.ts', 'event-batcher.ts', 'ipc-handlers.ts']) {
      expect(readFileSync(join(root, 'electron', file), 'utf8')).not.toMatch(/from ['"]electron['"]|require\(['"]electron['"]\)/);
    }
    expect(readFileSync(join(root, 'electron/main.js'), 'utf8')).toContain("await import('electron')");
  });

  it('says so and exits when main.js is started by plain Node', () => {
    const r = spawnSync(process.execPath, [join(root, 'electron/main.js')], { encoding: 'utf8', timeout: 30_000 });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/runs inside Electron/);
  });

  it('reads its options from the command line and the environment, ignoring Chromium switches', () => {
    expect(appOptions([], { BATON_PORT: '0', BATON_WORKERS: 'http://a:1, http://b:2', BATON_SIM: '2' })).toEqual({
      port: 0, workers: ['http://a:1', 'http://b:2'], sim: 2, staticRoot: null,
    });
    expect(appOptions(['--no-sandbox', '/opt/baton', '--worker', 'http://gpu-a:30000', '--port=9000', '--enable-logging'], {})).toEqual({
      port: 9000, workers: ['http://gpu-a:30000'], staticRoot: null,
    });
    expect(appOptions([], {})).toEqual({ workers: [], staticRoot: null });
  });

  it('takes --sim-pd (a switch) and --sim-format pd for the simulated P/D cluster', () => {
    expect(appOptions(['/opt/baton', '--sim-pd'], {})).toMatchObject({ simFormat: 'pd' });
    expect(appOptions(['/opt/baton', '--sim-format', 'pd'], {})).toMatchObject({ simFormat: 'pd' });
  });

  it('reads the routers of a hub from --router and BATON_ROUTERS (none: the embedded router)', () => {
    expect(hubRouters(['--no-sandbox', '--router', 'http://r0:30080', '--router=http://r1:30080'], { BATON_ROUTERS: 'http://r2:30080, ' })).toEqual(['http://r0:30080', 'http://r1:30080', 'http://r2:30080']);
    expect(hubRouters(['--worker', 'http://w:1'], {})).toEqual([]);
  });

  it('takes --replicas and BATON_REPLICAS (the same host as baton serve --replicas), refusing a bad count and replicas beside --router', () => {
    expect(appOptions(['--no-sandbox', '--replicas', '3'], {})).toMatchObject({ replicas: 3 });
    expect(appOptions([], { BATON_REPLICAS: '2' })).toMatchObject({ replicas: 2 });
    expect(appOptions(['--replicas=4'], { BATON_REPLICAS: '2' })).toMatchObject({ replicas: 4 });
    expect(() => appOptions(['--replicas', '0'], {})).toThrow("--replicas must be an integer from 1 to 64, got '0'");
    expect(() => appOptions([], { BATON_REPLICAS: 'x' })).toThrow("BATON_REPLICAS must be an integer from 1 to 64, got 'x'");
    expect(hostChoice(['--replicas', '2', '--sim', '2'], {})).toMatchObject({ kind: 'replicas', opts: { replicas: 2, sim: 2 } });
    expect(hostChoice(['--replicas', '1'], {})).toMatchObject({ kind: 'embedded' });
    expect(hostChoice([], {})).toMatchObject({ kind: 'embedded' });
    expect(hostChoice(['--router', 'http://r0:30080'], {})).toEqual({ kind: 'hub', routers: ['http://r0:30080'] });
    expect(() => hostChoice(['--router', 'http://r0:30080'], { BATON_REPLICAS: '2' })).toThrow(/--replicas does not go with --router/);
  });

  it('finds the Electron binary through ELECTRON_OVERRIDE_DIST_PATH, or says why not', () => {
    const dist = mkdtempSync(join(tmpdir(), 'electron-dist-'));
    expect(findElectron({ ELECTRON_OVERRIDE_DIST_PATH: dist })).toMatchObject({ path: null, reason: expect.stringContaining('does not exist') });
    if (process.platform === 'linux') {
      mkdirSync(dist, { recursive: true });
      writeFileSync(join(dist, 'electron'), '');
      expect(findElectron({ ELECTRON_OVERRIDE_DIST_PATH: dist }).path).toBe(join(dist, 'electron'));
    }
    expect(typeof findElectron({}).reason).toBe('string');
  });
});
