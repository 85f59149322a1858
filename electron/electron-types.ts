// The few Electron APIs the main process uses, typed here because the `electron` package (and
// its type definitions) may be absent: it is an optional dependency whose binary download fails
// offline. The real module is structurally compatible with these shapes.
import type { windowOptions } from './policy.ts';

export interface IpcInvokeEvent {
  senderFrame: { url: string } | null;
}

export interface WebContentsLike {
  on(event: 'will-navigate' | 'will-redirect', listener: (event: { preventDefault(): void }, url: string) => void): void;
  on(event: 'will-attach-webview', listener: (event: { preventDefault(): void }) => void): void;
  on(event: 'render-process-gone', listener: (event: unknown, details: { reason: string }) => void): void;
  setWindowOpenHandler(handler: (details: { url: string }) => { action: 'deny' }): void;
  send(channel: string, payload: unknown): void;
  isDestroyed(): boolean;
}

export interface BrowserWindowLike {
  webContents: WebContentsLike;
  loadFile(path: string): Promise<void>;
  once(event: 'ready-to-show', listener: () => void): void;
  on(event: 'closed', listener: () => void): void;
  show(): void;
  isDestroyed(): boolean;
}

export interface ElectronLike {
  app: {
    whenReady(): Promise<void>;
    on(event: 'window-all-closed' | 'before-quit', listener: (event: { preventDefault(): void }) => void): void;
    on(event: 'web-contents-created', listener: (event: unknown, contents: WebContentsLike) => void): void;
    quit(): void;
    exit(code?: number): void;
    getPath(name: 'downloads'): string;
  };
  BrowserWindow: new (options: ReturnType<typeof windowOptions>) => BrowserWindowLike;
  ipcMain: {
    handle(channel: string, handler: (event: IpcInvokeEvent, ...args: unknown[]) => unknown): void;
  };
  dialog: {
    showSaveDialog(window: BrowserWindowLike, options: { defaultPath: string; filters: { name: string; extensions: string[] }[] }): Promise<{ canceled: boolean; filePath?: string }>;
  };
  session: {
    defaultSession: {
      setPermissionRequestHandler(handler: (webContents: unknown, permission: string, callback: (granted: boolean) => void) => void): void;
      webRequest: {
        onHeadersReceived(listener: (details: { responseHeaders?: Record<string, string[]> }, callback: (response: { responseHeaders: Record<string, string[]> }) => void) => void): void;
      };
    };
  };
}
