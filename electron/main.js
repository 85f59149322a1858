// Electron's entry point (package.json "main"). The code base is TypeScript run through tsx,
// so register its loader, then hand over to app.ts. Run as `npm start` (or `electron .`).
import { register } from 'tsx/esm/api';

register();

let electron;
try {
  electron = await import('electron');
} catch {
  electron = null;
}
// Under plain Node, `electron` is either missing or the npm package, whose export is the path of
// the binary (a string): either way this file was not started by Electron.
const api = electron && typeof electron.default !== 'string' ? (electron.default ?? electron) : null;
if (!api || !api.app) {
  console.error('baton: electron/main.js runs inside Electron; use `npm start` (or `npx baton serve` for browser mode)');
  process.exit(1);
}
const { runElectronApp } = await import('./app.ts');
try {
  await runElectronApp(api);
} catch (err) {
  console.error(`baton: ${err?.stack ?? err}`);
  api.app.exit(1);
}
