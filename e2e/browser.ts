import { existsSync } from 'node:fs';

// Which Chromium the end-to-end tests drive: BATON_CHROMIUM, else the system's (Debian's
// package), else Playwright's own (installed by `npx playwright install` where the network allows).
const SYSTEM_CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

export function systemChromium(): string | undefined {
  const fromEnv = process.env.BATON_CHROMIUM;
  if (fromEnv) return fromEnv;
  return SYSTEM_CANDIDATES.find((p) => existsSync(p));
}

export function chromiumLaunchOptions() {
  const executablePath = systemChromium();
  return {
    ...(executablePath ? { executablePath } : {}),
    // --no-sandbox: CI runs as root. The background-networking flags stop Chromium from dialling
    // out at start, which a machine without internet refuses many times over.
    args: [
      '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
  };
}
