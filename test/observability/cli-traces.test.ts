// `npx baton traces`: streams the router's export to stdout as /traces serves it; a router that
// cannot be reached or refuses the query is one clear line on stderr and a non-zero exit.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorker, type SimWorker } from '../../sim/worker.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import { BATON, ROOT, fetchText, generate } from './harness.ts';
import { parseUpstreamRid } from '../../router/migration/rid.ts';

let worker: SimWorker;
let router: RouterHandle;
let guarded: RouterHandle;

beforeAll(async () => {
  worker = await startWorker({ tokenIntervalMs: 1 });
  router = await startRouter({ port: 0, workers: [worker.url], healthIntervalMs: 60_000 });
  guarded = await startRouter({ port: 0, workers: [worker.url], healthIntervalMs: 60_000, adminToken: 'sekret' });
  await Promise.all([0, 1, 2, 3].map((i) => generate(router.url, { id: `cli-${i}`, stream: i % 2 === 0, maxNewTokens: 8 })));
  await generate(guarded.url, { id: 'guarded', stream: false, maxNewTokens: 4 });
});
afterAll(async () => {
  await router?.close();
  await guarded?.close();
  await worker?.close();
});

function baton(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BATON, ...args], { cwd: ROOT, env: { ...process.env, BATON_ADMIN_TOKEN: '', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe('baton traces', () => {
  it('streams exactly what /traces serves, in both formats and with filters', async () => {
    const [csv, requests] = await Promise.all([
      baton(['traces', '--url', router.url, '--format', 'csv']),
      // JSON Lines by default; a trailing slash on the URL is fine.
      baton(['traces', '--url', router.url + '/', '--kind', 'attempt', '--request', 'cli-2', '--outcome', 'finished', '--since', '0']),
    ]);
    for (const r of [csv, requests]) {
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
    }
    const all = (await fetchText(`${router.url}/traces?format=csv`)).text;
    expect(csv.stdout).toBe(all);
    expect(all.trim().split('\n')).toHaveLength(1 + 8);
    expect(requests.stdout).toBe((await fetchText(`${router.url}/traces?kind=attempt&request=cli-2&outcome=finished&since=0`)).text);
    // Each attempt's upstream rid is Baton's own, and names its request and attempt.
    expect(requests.stdout.trim().split('\n').map((l) => parseUpstreamRid(JSON.parse(l).rid))).toEqual([{ id: 'cli-2', attempt: 0 }]);
  });

  it('says in one line why it failed, with a non-zero exit', async () => {
    const port = await closedPort();
    const [down, badQuery, noToken, withToken, noUrl] = await Promise.all([
      baton(['traces', '--url', `http://127.0.0.1:${port}`]),
      baton(['traces', '--url', router.url, '--outcome', 'exploded']),
      baton(['traces', '--url', guarded.url]),
      baton(['traces', '--url', guarded.url, '--kind', 'request', '--admin-token', 'sekret']),
      baton(['traces', '--format', 'csv']),
    ]);
    const oneLine = (s: string) => expect(s.trimEnd().split('\n'), s).toHaveLength(1);

    expect(down.code).toBe(1);
    expect(down.stdout).toBe('');
    oneLine(down.stderr);
    expect(down.stderr).toMatch(new RegExp(`^baton traces: cannot reach the router at http://127\\.0\\.0\\.1:${port}: ECONNREFUSED`));

    expect(badQuery.code).toBe(1);
    oneLine(badQuery.stderr);
    expect(badQuery.stderr).toMatch(/^baton traces: the router answered 400: outcome must be one of .*'exploded'/);

    expect(noToken.code).toBe(1);
    oneLine(noToken.stderr);
    expect(noToken.stderr).toMatch(/^baton traces: the router answered 401: .*admin token.*--admin-token/);

    expect(withToken.code).toBe(0);
    expect(JSON.parse(withToken.stdout.trim()).request_id).toBe('guarded');

    expect(noUrl.code).toBe(2);
    oneLine(noUrl.stderr);
    expect(noUrl.stderr).toMatch(/^baton traces: --url is required/);
  });
});
