// Chooses the host at start: inside Electron the preload script has put `api` on window;
// anywhere else the page was served by `baton serve` and talks HTTP to its own origin, or by
// `baton view` (the address names the file: /?file=NAME), which serves one trace file.
import type { BatonBridge } from '../../../electron/bridge-api.ts';
import { BrowserHost } from './browser.ts';
import { ElectronHost } from './electron.ts';
import type { DashboardHost } from './types.ts';

export function pickHost(w: Window & { api?: BatonBridge } = window): DashboardHost {
  return w.api ? new ElectronHost(w.api) : new BrowserHost();
}
