// `baton serve --router URL` (the hub, cli/serve.ts runHub) keeps the dashboard's preferences in
// the same file as every other `baton serve` page: the stored theme reaches a page on the hub,
// and a change made there is written back. A real child process, its prefs file in a temporary
// directory (BATON_PREFS_FILE).
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServe, type ServeProcess } from '../../e2e/serve-process.ts';

const file = join(mkdtempSync(join(tmpdir(), 'baton-hub-prefs-')), 'prefs.json');
let hub: ServeProcess;

beforeAll(async () => {
  writeFileSync(file, JSON.stringify({ theme: 'dark', chartWindow: 2 }));
  const before = process.env.BATON_PREFS_FILE;
  process.env.BATON_PREFS_FILE = file;
  try {
    // A router nobody runs: the hub starts all the same and keeps trying it.
    hub = await startServe(['--router', 'http://127.0.0.1:9', '--port', '0']);
  } finally {
    if (before === undefined) delete process.env.BATON_PREFS_FILE;
    else process.env.BATON_PREFS_FILE = before;
  }
}, 120_000);

afterAll(async () => {
  await hub?.stop();
});

describe('the hub and the prefs file', () => {
  it('serves the stored theme and windows, and writes a change back to the file', async () => {
    expect(hub.output()).toContain('hub over r0 http://127.0.0.1:9');
    expect(await (await fetch(new URL('/api/prefs', hub.url))).json()).toEqual({ theme: 'dark', chartWindow: 2 });
    const put = await fetch(new URL('/api/prefs', hub.url), { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ theme: 'light' }) });
    expect(put.status).toBe(200);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ theme: 'light', chartWindow: 2 });
  });
});
