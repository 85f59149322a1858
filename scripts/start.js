#!/usr/bin/env node
// `npm start`: the desktop app when the Electron binary is there; otherwise one line saying so,
// and the same dashboard in browser mode (`baton serve`), which prints its URL.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findElectron } from '../electron/binary.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { path: electron, reason } = findElectron();
// `npm start -- --port 0` passes its options on; a bare `--` from a direct call is dropped.
const args = process.argv.slice(2).filter((a, i) => !(i === 0 && a === '--'));

let child;
if (electron) {
  // Chromium refuses to start as root without --no-sandbox (CI containers run as root). The
  // renderer keeps Electron's own sandbox setting either way.
  const rootUser = typeof process.getuid === 'function' && process.getuid() === 0;
  child = spawn(electron, [...(rootUser ? ['--no-sandbox'] : []), root, ...args], { stdio: 'inherit' });
} else {
  console.log(`baton: the Electron binary is missing (${reason}); serving the dashboard in browser mode instead`);
  child = spawn(process.execPath, [join(root, 'bin/baton.js'), 'serve', ...args], { stdio: 'inherit' });
}

// The child owns the router and the simulated workers: pass signals on and leave with its code.
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
