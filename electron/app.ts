// The Electron main process, kept thin: it starts the same host as `baton serve` (router or
// replicas, simulated cluster, traffic), opens one locked-down window on the Vite build, and
// bridges the router's events to it in batches. Everything worth testing lives in Electron-free modules.
import { createWriteStream } from 'node:fs';
import { appendFile, open, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { RENDERER_DIST, startApp, type AppHandle, type AppOptions } from '../host/app.ts';
import { parseReplicas, startReplicatedApp } from '../host/replicated-app.ts';
import type { EventListener } from '../router/api.ts';
import type { HostActions, RequestOutput } from '../host/contract.ts';
import { contextRecord, csvHeaderColumns, exportFileName, traceQuery } from '../host/export-query.ts';
import { ensureRendererBuilt } from '../host/renderer-build.ts';
import type { ExportResult } from '../host/contract.ts';
import type { BrowserWindowLike, ElectronLike } from './electron-types.ts';
import { EventBatcher } from './event-batcher.ts';
import { ipcHandlers, type Exporter } from './ipc-handlers.ts';
import {
  CSP, EVENT_CHANNEL, INVOKE_CHANNELS, RESYNC_CHANNEL, checkInvokeArgs, isAllowedNavigation, isTrustedSender, windowOptions,
} from './policy.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const INDEX_HTML = join(RENDERER_DIST, 'index.html');
const PRELOAD = join(HERE, 'preload.cjs');
const DEFAULT_PORT = 30080;

/**
 * Options from the command line (`npm start -- --worker URL --port P --sim N --replicas N`, the
 * same flags as `baton serve`) and the environment (BATON_PORT, BATON_WORKERS comma-separated,
 * BATON_SIM, BATON_REPLICAS). Electron and Chromium add switches of their own to argv: anything
 * unknown is ignored; a bad --replicas is refused (RangeError).
 */
export function appOptions(argv: readonly string[], env: NodeJS.ProcessEnv): AppOptions {
  const flag = (name: string): string[] => argv.flatMap((a, i) => {
    if (a === `--${name}`) return argv[i + 1] !== undefined ? [argv[i + 1]!] : [];
    return a.startsWith(`--${name}=`) ? [a.slice(name.length + 3)] : [];
  });
  const workers = [...flag('worker'), ...(env.BATON_WORKERS ?? '').split(',')].map((s) => s.trim()).filter(Boolean);
  const port = flag('port')[0] ?? env.BATON_PORT;
  const sim = flag('sim')[0] ?? env.BATON_SIM;
  const replicas = flag('replicas')[0] ?? env.BATON_REPLICAS;
  // `--sim-pd` is a switch: the P/D demo cluster (`--sim-format pd`).
  const simFormat = argv.includes('--sim-pd') ? 'pd' : flag('sim-format')[0] ?? env.BATON_SIM_FORMAT;
  return {
    ...(port !== undefined ? { port: Number(port) } : {}),
    workers,
    ...(sim !== undefined ? { sim: Number(sim) } : {}),
    ...(simFormat === 'sglang' || simFormat === 'vllm' || simFormat === 'mixed' || simFormat === 'openai' || simFormat === 'pd' ? { simFormat } : {}),
    ...(replicas !== undefined ? { replicas: parseReplicas(replicas, flag('replicas').length > 0 ? '--replicas' : 'BATON_REPLICAS') } : {}),
    staticRoot: null,
  };
}

/**
 * What the window is bridged to: the embedded router's host; with `--router URL` (repeatable, or
 * BATON_ROUTERS comma-separated) a dashboard hub over routers that already run (host/hub/); with
 * `--replicas N` the embedded default's hub over its replicas (host/replicated-app.ts).
 */
interface WindowHost {
  url: string;
  actions: HostActions;
  subscribe(listener: EventListener): () => void;
  requestOutput(id: string): RequestOutput | null | undefined | Promise<RequestOutput | null>;
  close(): Promise<void>;
}

/** The --router flags and BATON_ROUTERS: the routers a hub follows (none: the embedded router). */
export function hubRouters(argv: readonly string[], env: NodeJS.ProcessEnv): string[] {
  const flags = argv.flatMap((a, i) => (a === '--router' && argv[i + 1] !== undefined ? [argv[i + 1]!] : a.startsWith('--router=') ? [a.slice(9)] : []));
  return [...flags, ...(env.BATON_ROUTERS ?? '').split(',')].map((s) => s.trim()).filter(Boolean);
}

/**
 * What the window is bridged to, from the command line and the environment: a hub over routers
 * that run (--router), the embedded default with the router as replicas and a hub over them
 * (--replicas N > 1, host/replicated-app.ts), or the embedded default with one router.
 */
export function hostChoice(argv: readonly string[], env: NodeJS.ProcessEnv): { kind: 'hub'; routers: string[] } | { kind: 'replicas' | 'embedded'; opts: AppOptions } {
  const routers = hubRouters(argv, env);
  const opts = appOptions(argv, env);
  const replicas = opts.replicas ?? 1;
  if (routers.length > 0) {
    if (replicas > 1) throw new RangeError('--replicas does not go with --router (or BATON_ROUTERS): the hub follows routers, it runs none');
    return { kind: 'hub', routers };
  }
  return { kind: replicas > 1 ? 'replicas' : 'embedded', opts };
}

function embedded(app: AppHandle): WindowHost {
  return { url: app.router.url, actions: app.actions, subscribe: app.subscribe, requestOutput: (id) => app.router.requestOutput(id), close: app.close };
}

async function hubHost(routers: string[]): Promise<WindowHost> {
  const { startHub } = await import('../host/hub/server.ts');
  const hub = await startHub({ routers });
  return {
    url: hub.url,
    actions: hub.actions,
    subscribe: (listener) => hub.hub.bus.subscribe(listener),
    requestOutput: (id) => hub.requestOutput(id),
    close: () => hub.close(),
  };
}

/** The router's usual port when free, else any: a second window must not fail to start. */
async function onUsualPort<T>(opts: AppOptions, start: (opts: AppOptions) => Promise<T>): Promise<T> {
  if (opts.port !== undefined) return start(opts);
  try {
    return await start({ ...opts, port: DEFAULT_PORT });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    return start({ ...opts, port: 0 });
  }
}

async function startHost(choice: ReturnType<typeof hostChoice>): Promise<WindowHost> {
  if (choice.kind === 'hub') return hubHost(choice.routers);
  if (choice.kind === 'replicas') return onUsualPort(choice.opts, (o) => startReplicatedApp({ ...o, replicas: o.replicas! }));
  return embedded(await onUsualPort(choice.opts, startApp));
}

/** The first few KiB of a file: enough for a CSV header line. */
async function readHead(path: string): Promise<string> {
  const handle = await open(path, 'r');
  try {
    const buf = Buffer.alloc(8192);
    const { bytesRead } = await handle.read(buf, 0, buf.length, 0);
    return buf.subarray(0, bytesRead).toString('utf8');
  } finally {
    await handle.close();
  }
}

function exporter(electron: ElectronLike, host: WindowHost, window: () => BrowserWindowLike | null): Exporter {
  return async (format, filter, context): Promise<ExportResult> => {
    const win = window();
    if (!win) return { saved: null, bytes: 0 };
    const { canceled, filePath } = await electron.dialog.showSaveDialog(win, {
      defaultPath: join(electron.app.getPath('downloads'), exportFileName(format, new Date())),
      filters: [{ name: format === 'csv' ? 'CSV' : 'JSON Lines', extensions: [format] }],
    });
    if (canceled || !filePath) return { saved: null, bytes: 0 };
    const res = await fetch(`${host.url}/traces?${traceQuery(format, filter)}`);
    if (!res.ok || !res.body) throw new Error(`export failed: ${res.status} ${res.statusText}`);
    await pipeline(Readable.fromWeb(res.body as WebReadableStream), createWriteStream(filePath));
    if (context) {
      // The context record after the rows (host/export-query.ts), padded to the CSV header's width.
      const head = await readHead(filePath);
      await appendFile(filePath, contextRecord(context, format, csvHeaderColumns(head)));
    }
    return { saved: filePath, bytes: (await stat(filePath)).size };
  };
}

export async function runElectronApp(electron: ElectronLike): Promise<void> {
  const { app, BrowserWindow, ipcMain, session } = electron;

  // Every web contents, present and future: no navigation away, no new windows, no webviews.
  app.on('web-contents-created', (_event, contents) => {
    const guard = (event: { preventDefault(): void }, url: string) => {
      if (!isAllowedNavigation(url, INDEX_HTML)) event.preventDefault();
    };
    contents.on('will-navigate', guard);
    contents.on('will-redirect', guard);
    contents.on('will-attach-webview', (event) => event.preventDefault());
    contents.setWindowOpenHandler(() => ({ action: 'deny' }));
  });

  await app.whenReady();
  session.defaultSession.setPermissionRequestHandler((_contents, _permission, callback) => callback(false));
  session.defaultSession.webRequest.onHeadersReceived((details, callback) =>
    callback({ responseHeaders: { ...details.responseHeaders, 'Content-Security-Policy': [CSP] } }));

  await ensureRendererBuilt();
  const choice = hostChoice(process.argv.slice(1), process.env);
  const host = await startHost(choice);
  console.log(`baton: ${choice.kind === 'embedded' ? 'router' : 'hub'} listening on ${host.url}`);

  let win: BrowserWindowLike | null = new BrowserWindow(windowOptions(PRELOAD));
  const send = (channel: string, payload: unknown) => {
    if (win && !win.isDestroyed() && !win.webContents.isDestroyed()) win.webContents.send(channel, payload);
  };
  const batcher = new EventBatcher((events) => send(EVENT_CHANNEL, events), () => send(RESYNC_CHANNEL, null));
  const unsubscribe = host.subscribe((event) => batcher.push(event));
  batcher.start();

  const uiConfig = async () => {
    const res = await fetch(`${host.url}/config/ui`).catch(() => null);
    return res?.ok ? await res.json() : null;
  };
  const handlers = ipcHandlers(host.actions, exporter(electron, host, () => win), (id) => host.requestOutput(id), uiConfig);
  for (const channel of INVOKE_CHANNELS) {
    ipcMain.handle(channel, async (event, ...args) => {
      if (!isTrustedSender(event.senderFrame?.url, INDEX_HTML)) throw new Error('IPC refused: untrusted sender');
      return handlers[channel](...checkInvokeArgs(channel, args));
    });
  }

  win.once('ready-to-show', () => win?.show());
  win.on('closed', () => (win = null));
  await win.loadFile(INDEX_HTML);

  let stopped = false;
  app.on('window-all-closed', () => app.quit());
  app.on('before-quit', (event) => {
    if (stopped) return;
    // Stop the router, the traffic and the simulated workers before Electron exits.
    event.preventDefault();
    stopped = true;
    batcher.stop();
    unsubscribe();
    void host.close().finally(() => app.exit(0));
  });
}
