import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { EVENT_CHANNEL, INVOKE_CHANNELS, RESYNC_CHANNEL } from '../../electron/policy.ts';

/** Runs preload.cjs as Electron would, against a fake `electron` module that records calls. */
function loadPreload() {
  const exposed: Record<string, unknown> = {};
  const invoked: { channel: string; args: unknown[] }[] = [];
  const listeners = new Map<string, ((event: unknown, payload: unknown) => void)[]>();
  const electron = {
    contextBridge: { exposeInMainWorld: (key: string, value: unknown) => { exposed[key] = value; } },
    ipcRenderer: {
      invoke: (channel: string, ...args: unknown[]) => { invoked.push({ channel, args }); return Promise.resolve(null); },
      on: (channel: string, l: (event: unknown, payload: unknown) => void) => listeners.set(channel, [...(listeners.get(channel) ?? []), l]),
      removeListener: (channel: string, l: (event: unknown, payload: unknown) => void) => listeners.set(channel, (listeners.get(channel) ?? []).filter((x) => x !== l)),
      send: () => { throw new Error('preload must not use ipcRenderer.send'); },
    },
  };
  const code = readFileSync(join(import.meta.dirname, '../../electron/preload.cjs'), 'utf8');
  const required: string[] = [];
  runInNewContext(code, {
    require: (name: string) => {
      required.push(name);
      if (name !== 'electron') throw new Error(`sandboxed preload cannot require ${name}`);
      return electron;
    },
  });
  return { exposed, invoked, listeners, required };
}

describe('preload bridge', () => {
  it('exposes one frozen object, `api`, built only from electron', () => {
    const { exposed, required } = loadPreload();
    expect(Object.keys(exposed)).toEqual(['api']);
    expect(Object.isFrozen(exposed.api)).toBe(true);
    expect(required).toEqual(['electron']);
    for (const value of Object.values(exposed.api as object)) expect(typeof value).toBe('function');
  });

  it('uses exactly the allowlisted invoke channels, one per method', async () => {
    const { exposed, invoked } = loadPreload();
    const api = exposed.api as Record<string, (...args: unknown[]) => unknown>;
    for (const [name, fn] of Object.entries(api)) if (!name.startsWith('on')) await fn('a', 1);
    expect(invoked.map((c) => c.channel).sort()).toEqual([...INVOKE_CHANNELS].sort());
  });

  it('asks for a request\'s output on baton:request-output with the id, nothing more', async () => {
    const { exposed, invoked } = loadPreload();
    await (exposed.api as { requestOutput(id: string): Promise<unknown> }).requestOutput('req-7');
    expect(invoked).toEqual([{ channel: 'baton:request-output', args: ['req-7'] }]);
  });

  it('hands listeners the payload only, never the IPC event, and unsubscribes', () => {
    const { exposed, listeners } = loadPreload();
    const api = exposed.api as { onEvents(l: (...a: unknown[]) => void): () => void; onResync(l: () => void): () => void };
    const got: unknown[][] = [];
    const off = api.onEvents((...args) => got.push(args));
    api.onResync(() => {});
    expect([...listeners.keys()].sort()).toEqual([EVENT_CHANNEL, RESYNC_CHANNEL].sort());
    listeners.get(EVENT_CHANNEL)![0]!({ sender: 'secret' }, [{ type: 'x' }]);
    expect(got).toEqual([[[{ type: 'x' }]]]);
    off();
    expect(listeners.get(EVENT_CHANNEL)).toEqual([]);
    expect(() => api.onEvents('nope' as never)).toThrow(/listener must be a function/);
  });
});
