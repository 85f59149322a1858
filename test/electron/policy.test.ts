import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  CSP, INVOKE_CHANNELS, IpcArgumentError, checkInvokeArgs, isAllowedNavigation, isInvokeChannel, isTrustedSender, windowOptions,
} from '../../electron/policy.ts';

const INDEX = '/opt/baton/dist/renderer/index.html';

describe('window security settings', () => {
  it('isolates and sandboxes the page, with no Node and no webviews', () => {
    const { webPreferences } = windowOptions('/opt/baton/electron/preload.cjs');
    expect(webPreferences).toMatchObject({
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      nodeIntegrationInSubFrames: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      webviewTag: false,
      preload: '/opt/baton/electron/preload.cjs',
    });
  });
});

describe('content security policy', () => {
  it('allows scripts from the bundle only: no inline scripts, no eval, no remote code', () => {
    const directives = Object.fromEntries(CSP.split(';').map((d) => d.trim().split(/\s+/)).map(([k, ...v]) => [k, v]));
    expect(directives['script-src']).toEqual(["'self'"]);
    expect(directives['default-src']).toEqual(["'self'"]);
    expect(directives['connect-src']).toEqual(["'self'"]);
    expect(directives['object-src']).toEqual(["'none'"]);
    expect(CSP).not.toMatch(/unsafe-eval|\*|https?:/);
  });

  it('is the policy index.html carries in its meta tag', () => {
    const html = readFileSync(join(import.meta.dirname, '../../renderer/index.html'), 'utf8');
    const meta = /http-equiv="Content-Security-Policy" content="([^"]+)"/.exec(html);
    expect(meta?.[1]).toBe(CSP);
  });
});

describe('navigation', () => {
  it('allows only the dashboard page itself', () => {
    expect(isAllowedNavigation('file:///opt/baton/dist/renderer/index.html', INDEX)).toBe(true);
    expect(isAllowedNavigation('file:///opt/baton/dist/renderer/index.html#x', INDEX)).toBe(true);
    expect(isAllowedNavigation('https://example.com/', INDEX)).toBe(false);
    expect(isAllowedNavigation('file:///etc/passwd', INDEX)).toBe(false);
    expect(isAllowedNavigation('http://127.0.0.1:30080/', INDEX)).toBe(false);
    expect(isAllowedNavigation('javascript:alert(1)', INDEX)).toBe(false);
    expect(isAllowedNavigation('not a url', INDEX)).toBe(false);
  });

  it('trusts IPC only from a frame showing the dashboard', () => {
    expect(isTrustedSender('file:///opt/baton/dist/renderer/index.html', INDEX)).toBe(true);
    expect(isTrustedSender('https://evil.example/', INDEX)).toBe(false);
    expect(isTrustedSender(undefined, INDEX)).toBe(false);
  });
});

describe('IPC allowlist', () => {
  it('names every channel under the baton: prefix and nothing else', () => {
    expect(INVOKE_CHANNELS.every((c) => c.startsWith('baton:'))).toBe(true);
    expect(isInvokeChannel('baton:snapshot')).toBe(true);
    expect(isInvokeChannel('baton:eval')).toBe(false);
    expect(isInvokeChannel('ELECTRON_BROWSER_REQUIRE')).toBe(false);
  });

  it('checks arguments before anything runs', () => {
    expect(checkInvokeArgs('baton:sim-action', [1, 'kill'])).toEqual([1, 'kill']);
    expect(() => checkInvokeArgs('baton:sim-action', [-1, 'kill'])).toThrow(IpcArgumentError);
    expect(() => checkInvokeArgs('baton:sim-action', [0, 'rm -rf'])).toThrow(/unknown sim action/);
    expect(() => checkInvokeArgs('baton:add-worker', [{ url: 'x' }])).toThrow(IpcArgumentError);
    expect(() => checkInvokeArgs('baton:drain-worker', ['w0', 'yes'])).toThrow(/boolean/);
    expect(() => checkInvokeArgs('baton:set-traffic', [[1]])).toThrow(/object/);
    expect(checkInvokeArgs('baton:snapshot', ['ignored'])).toEqual([]);
    expect(checkInvokeArgs('baton:export-traces', ['jsonl', { request: 'r1', bogus: 1 }])).toEqual(['jsonl', { request: 'r1' }]);
    expect(() => checkInvokeArgs('baton:export-traces', ['exe', {}])).toThrow(/format/);
  });

  it('takes no arguments for the live figures, and one bounded request id for a request\'s rows or body', () => {
    expect(checkInvokeArgs('baton:live', ['ignored'])).toEqual([]);
    expect(checkInvokeArgs('baton:ui-config', ['ignored'])).toEqual([]);
    for (const channel of ['baton:trace-rows', 'baton:request-body'] as const) {
      expect(checkInvokeArgs(channel, ['req-1', 'extra'])).toEqual(['req-1']);
      for (const bad of [undefined, '', 42, 'x'.repeat(513)]) expect(() => checkInvokeArgs(channel, [bad])).toThrow(IpcArgumentError);
    }
  });

  it('passes an export\'s id prefix and time range on, checked', () => {
    expect(checkInvokeArgs('baton:export-traces', ['csv', { requestPrefix: 'ab', since: 1, until: 2 }])).toEqual(['csv', { requestPrefix: 'ab', since: 1, until: 2 }]);
    expect(() => checkInvokeArgs('baton:export-traces', ['csv', { until: 'soon' }])).toThrow(/until/);
    expect(() => checkInvokeArgs('baton:export-traces', ['csv', { requestPrefix: 7 }])).toThrow(IpcArgumentError);
    // The context record (workers, colours, markers) rides along as a bounded plain object of its kind.
    const ctx = { kind: 'baton_context', version: 1, exported_at: 1, workers: [], faults: [], inflight: [] };
    expect(checkInvokeArgs('baton:export-traces', ['jsonl', {}, ctx])).toEqual(['jsonl', {}, ctx]);
    expect(() => checkInvokeArgs('baton:export-traces', ['jsonl', {}, { kind: 'other' }])).toThrow(/baton_context/);
    expect(() => checkInvokeArgs('baton:export-traces', ['jsonl', {}, { ...ctx, faults: 'x'.repeat(5 << 20) }])).toThrow(/4 MiB/);
  });

  it('takes one request id, a bounded non-empty string, for the output of a request', () => {
    expect(isInvokeChannel('baton:request-output')).toBe(true);
    expect(checkInvokeArgs('baton:request-output', ['req-1', 'extra'])).toEqual(['req-1']);
    for (const bad of [undefined, '', 42, { id: 'r' }, ['r'], 'x'.repeat(513)]) {
      expect(() => checkInvokeArgs('baton:request-output', [bad])).toThrow(IpcArgumentError);
    }
  });
});
