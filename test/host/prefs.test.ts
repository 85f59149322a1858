// Dashboard preferences kept by the host (host/prefs.ts): a page on another port, or of another
// `baton serve`, reads what the first saved; bad input is refused with a clear error.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { startApp, type AppHandle } from '../../host/app.ts';

const dir = mkdtempSync(join(tmpdir(), 'baton-prefs-'));
const apps: AppHandle[] = [];
afterAll(async () => {
  await Promise.all(apps.map((a) => a.close()));
  rmSync(dir, { recursive: true, force: true });
});

it('keeps the dashboard\'s preferences across ports and refuses what is not an object', async () => {
  const prefsFile = join(dir, 'nested', 'prefs.json');
  const one = await startApp({ port: 0, sim: 0, traffic: false, staticRoot: null, prefsFile });
  apps.push(one);
  expect(await (await fetch(`${one.router.url}/api/prefs`)).json()).toEqual({});
  const put = await fetch(`${one.router.url}/api/prefs`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ chartWindow: 1, theme: 'dark', junk: 'x' }) });
  expect(put.status).toBe(200);
  expect(await put.json()).toEqual({ chartWindow: 1, theme: 'dark' });
  const two = await startApp({ port: 0, sim: 0, traffic: false, staticRoot: null, prefsFile });
  apps.push(two);
  expect(two.router.url).not.toBe(one.router.url);
  expect(await (await fetch(`${two.router.url}/api/prefs`)).json()).toEqual({ chartWindow: 1, theme: 'dark' });
  const bad = await fetch(`${two.router.url}/api/prefs`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '[1]' });
  expect(bad.status).toBe(400);
  expect(JSON.stringify(await bad.json())).toContain('preferences must be a JSON object');
  const noJson = await fetch(`${two.router.url}/api/prefs`, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: '{}' });
  expect(noJson.status).toBeGreaterThanOrEqual(400);
}, 60_000);
