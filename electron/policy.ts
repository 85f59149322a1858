// Electron's security settings and IPC allowlist as plain data and pure checks. This module
// imports no Electron, so the tests check it under Node; app.ts applies it.
import { pathToFileURL } from 'node:url';
import { DASHBOARD_CSP } from '../host/csp.ts';
import type { SimAction } from '../host/contract.ts';

export const CSP = DASHBOARD_CSP;

/** Main → renderer: event batches, and "your picture is stale, re-read the snapshot". */
export const EVENT_CHANNEL = 'baton:events';
export const RESYNC_CHANNEL = 'baton:resync';

/** Renderer → main (ipcRenderer.invoke). Nothing else is handled. */
export const INVOKE_CHANNELS = [
  'baton:snapshot',
  'baton:sim-workers',
  'baton:sim-action',
  'baton:add-worker',
  'baton:remove-worker',
  'baton:drain-worker',
  'baton:traffic',
  'baton:set-traffic',
  'baton:export-traces',
  'baton:request-output',
  'baton:live',
  'baton:trace-rows',
  'baton:request-body',
  'baton:ui-config',
] as const;

export type InvokeChannel = (typeof INVOKE_CHANNELS)[number];

export function isInvokeChannel(channel: string): channel is InvokeChannel {
  return (INVOKE_CHANNELS as readonly string[]).includes(channel);
}

/** BrowserWindow options: isolated, sandboxed, no Node in the page, no webviews. */
export function windowOptions(preload: string) {
  return {
    width: 1440,
    height: 900,
    minWidth: 900,
    minHeight: 560,
    title: 'Baton',
    show: false,
    autoHideMenuBar: true,
    webPreferences: {
      preload,
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      nodeIntegrationInSubFrames: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      webviewTag: false,
      experimentalFeatures: false,
      navigateOnDragDrop: false,
      spellcheck: false,
    },
  } as const;
}

/** The page may only ever be the dashboard's own index.html (reloads included). */
export function isAllowedNavigation(target: string, indexHtml: string): boolean {
  try {
    const url = new URL(target);
    const own = pathToFileURL(indexHtml);
    return url.protocol === 'file:' && url.pathname === own.pathname;
  } catch {
    return false;
  }
}

/** Only our own page may call the main process (not a frame that got navigated elsewhere). */
export function isTrustedSender(frameUrl: string | undefined, indexHtml: string): boolean {
  return frameUrl !== undefined && isAllowedNavigation(frameUrl, indexHtml);
}

export class IpcArgumentError extends Error {}

const SIM_ACTIONS: readonly SimAction[] = ['kill', 'hang', 'reset', 'reject', 'slow', 'clear', 'restart'];

function str(v: unknown, name: string, max = 2048): string {
  if (typeof v !== 'string' || v.length === 0 || v.length > max) throw new IpcArgumentError(`${name} must be a non-empty string`);
  return v;
}

function plainObject(v: unknown, name: string): Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new IpcArgumentError(`${name} must be an object`);
  return v as Record<string, unknown>;
}

/**
 * Checks the arguments of an invoke call before anything runs: the renderer is treated as
 * untrusted input, like a web page calling an HTTP API.
 */
export function checkInvokeArgs(channel: InvokeChannel, args: unknown[]): unknown[] {
  switch (channel) {
    case 'baton:snapshot':
    case 'baton:sim-workers':
    case 'baton:traffic':
    case 'baton:live':
    case 'baton:ui-config':
      return [];
    case 'baton:sim-action': {
      const [index, action] = args;
      if (!Number.isInteger(index) || (index as number) < 0) throw new IpcArgumentError('index must be a non-negative integer');
      if (!SIM_ACTIONS.includes(action as SimAction)) throw new IpcArgumentError(`unknown sim action '${String(action)}'`);
      return [index, action];
    }
    case 'baton:add-worker':
      return [str(args[0], 'url')];
    case 'baton:remove-worker':
      return [str(args[0], 'id', 128)];
    case 'baton:drain-worker':
      if (typeof args[1] !== 'boolean') throw new IpcArgumentError('draining must be a boolean');
      return [str(args[0], 'id', 128), args[1]];
    case 'baton:request-output':
    case 'baton:trace-rows':
    case 'baton:request-body':
      return [str(args[0], 'request id', 512)];
    case 'baton:set-traffic':
      return [plainObject(args[0], 'traffic settings')];
    case 'baton:export-traces': {
      const [format, filter] = args;
      if (format !== 'jsonl' && format !== 'csv') throw new IpcArgumentError('format must be jsonl or csv');
      const f = plainObject(filter ?? {}, 'filter');
      const clean: Record<string, string | number> = {};
      for (const key of ['request', 'worker', 'outcome', 'kind', 'requestPrefix'] as const) if (f[key] !== undefined) clean[key] = str(f[key], key, 512);
      for (const key of ['since', 'until'] as const) {
        if (f[key] === undefined) continue;
        if (typeof f[key] !== 'number' || !Number.isFinite(f[key])) throw new IpcArgumentError(`${key} must be a number`);
        clean[key] = f[key];
      }
      // The context record (workers, colours, fault markers) goes into the file as JSON: a plain
      // object of bounded size, with the kind it claims.
      if (args[2] === undefined) return [format, clean];
      const ctx = plainObject(args[2], 'context');
      if (ctx.kind !== 'baton_context') throw new IpcArgumentError('context.kind must be baton_context');
      if (JSON.stringify(ctx).length > 4 << 20) throw new IpcArgumentError('context is larger than 4 MiB');
      return [format, clean, ctx];
    }
  }
}
