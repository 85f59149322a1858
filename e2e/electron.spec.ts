// The desktop app end to end through Playwright's Electron driver. It runs where an Electron
// binary exists (ELECTRON_OVERRIDE_DIST_PATH or the electron package's download) and reports
// itself skipped, with the reason, where none does (offline installs).
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { _electron, expect, test, type ElectronApplication } from '@playwright/test';
import { findElectron } from '../electron/binary.js';

const ROOT = join(import.meta.dirname, '..');
const SHOTS = join(ROOT, 'test-results/e2e');
const electron = findElectron();

let app: ElectronApplication | null = null;
let xvfb: ChildProcess | null = null;

/** A display for Electron: the session's own, or a private Xvfb (CI installs xvfb). */
function display(): { env: Record<string, string>; reason: string | null } {
  if (process.platform !== 'linux' || process.env.DISPLAY) return { env: {}, reason: null };
  const bin = ['/usr/bin/Xvfb', '/usr/local/bin/Xvfb'].find((p) => existsSync(p));
  if (!bin) return { env: {}, reason: 'no X display and no Xvfb to provide one' };
  const number = 90 + (process.pid % 100);
  xvfb = spawn(bin, [`:${number}`, '-screen', '0', '1440x900x24', '-nolisten', 'tcp'], { stdio: 'ignore' });
  return { env: { DISPLAY: `:${number}` }, reason: null };
}

test.afterAll(async () => {
  await app?.close().catch(() => {});
  xvfb?.kill('SIGTERM');
});

test('the Electron app shows the dashboard through its locked-down bridge', async () => {
  test.skip(!electron.path, `no Electron binary: ${electron.reason}`);
  const screen = display();
  test.skip(screen.reason !== null, screen.reason ?? '');
  test.setTimeout(120_000);
  await new Promise((r) => setTimeout(r, xvfb ? 1000 : 0));

  const rootUser = typeof process.getuid === 'function' && process.getuid() === 0;
  app = await _electron.launch({
    executablePath: electron.path!,
    args: [...(rootUser ? ['--no-sandbox'] : []), ROOT],
    cwd: ROOT,
    env: { ...process.env, ...screen.env, BATON_PORT: '0' } as Record<string, string>,
  });
  const win = await app.firstWindow();
  await expect(win.getByTestId('worker-card')).toHaveCount(3, { timeout: 60_000 });
  await expect.poll(async () => Number(await win.getByTestId('strip-inflight').textContent()), { timeout: 30_000 }).toBeGreaterThan(0);

  // The page sees the bridge and nothing of Node.
  const globals = await win.evaluate(() => ({
    api: typeof (window as unknown as { api?: unknown }).api,
    require: typeof (window as unknown as { require?: unknown }).require,
    process: typeof (window as unknown as { process?: unknown }).process,
  }));
  expect(globals).toEqual({ api: 'object', require: 'undefined', process: 'undefined' });

  // The window really runs with the settings policy.ts asks for.
  const prefs = await app.evaluate(({ BrowserWindow }) => {
    const w = BrowserWindow.getAllWindows()[0]!;
    const p = w.webContents.getLastWebPreferences() as Record<string, unknown>;
    return { contextIsolation: p.contextIsolation, sandbox: p.sandbox, nodeIntegration: p.nodeIntegration };
  });
  expect(prefs).toEqual({ contextIsolation: true, sandbox: true, nodeIntegration: false });

  mkdirSync(SHOTS, { recursive: true });
  await win.screenshot({ path: join(SHOTS, 'electron-dashboard.png') });
});
