// Where the Electron binary is, or null. The `electron` npm package is an optional dependency
// whose binary is downloaded at install time; offline installs end up without it. Used by
// `npm start` (scripts/start.js) and the Electron end-to-end test.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const EXECUTABLE = {
  linux: 'electron',
  win32: 'electron.exe',
  darwin: 'Electron.app/Contents/MacOS/Electron',
};

/** @returns {{ path: string | null, reason: string }} */
export function findElectron(env = process.env) {
  const override = env.ELECTRON_OVERRIDE_DIST_PATH;
  if (override) {
    const path = join(override, EXECUTABLE[process.platform] ?? 'electron');
    return existsSync(path)
      ? { path, reason: `ELECTRON_OVERRIDE_DIST_PATH (${path})` }
      : { path: null, reason: `ELECTRON_OVERRIDE_DIST_PATH is set but ${path} does not exist` };
  }
  let path;
  try {
    // The package's main module returns the binary's path; it throws when the download failed.
    path = createRequire(import.meta.url)('electron');
  } catch (err) {
    return { path: null, reason: `the electron package or its binary is not installed (${String(err?.message ?? err).split('\n')[0]})` };
  }
  if (typeof path === 'string' && existsSync(path)) return { path, reason: `electron package (${path})` };
  return { path: null, reason: `the electron package points at ${String(path)}, which does not exist` };
}
