// `baton view`'s server (the page, the file, nothing else), the simulated cluster in a process
// group of its own (so a terminal's Ctrl-C reaches only the host, which stops the router first),
// and the /traces extras the dashboard's exports use (a time range, an id prefix, ISO times).
import { mkdtempSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startViewServer } from '../../host/view-server.ts';
import { PrefsFile } from '../../host/prefs.ts';
import { startDetachedCluster } from '../../host/sim-process.ts';
import { SimControl } from '../../host/sim-control.ts';
import { parseTraceQuery, traceChunks, streamTraces } from '../../router/http/traces-endpoint.ts';
import { traceQuery } from '../../host/export-query.ts';
import type { TraceRow } from '../../router/trace/row.ts';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pidAlive } from '../sim/helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'baton-view-'));
mkdirSync(join(dir, 'dist', 'assets'), { recursive: true });
writeFileSync(join(dir, 'dist', 'index.html'), '<!doctype html><title>Baton</title>');
writeFileSync(join(dir, 'dist', 'assets', 'app.js'), 'export {}');
const file = join(dir, 'night, 1.jsonl');
writeFileSync(file, '{"kind":"request","request_id":"r"}\n');

describe('baton view server', () => {
  it('sends / to the page for the file, serves the file and the build, and nothing else', async () => {
    const server = await startViewServer({ file, staticRoot: join(dir, 'dist') });
    try {
      const root = await fetch(server.url + '/', { redirect: 'manual' });
      expect(root.status).toBe(302);
      expect(root.headers.get('location')).toBe('/?file=night%2C%201.jsonl');
      expect(server.pageUrl).toBe(`${server.url}/?file=night%2C%201.jsonl`);
      const page = await fetch(server.pageUrl);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
      const data = await fetch(server.url + '/api/file');
      expect(data.headers.get('content-type')).toMatch(/ndjson/);
      expect(await data.text()).toBe(readFileSync(file, 'utf8'));
      expect((await fetch(server.url + '/assets/app.js')).status).toBe(200);
      expect((await fetch(server.url + '/assets/..%2F..%2Fnight%2C%201.jsonl')).status).toBe(404);
      expect((await fetch(server.url + '/events')).status).toBe(404);
      expect((await fetch(server.url + '/api/file', { method: 'POST' })).status).toBe(405);
    } finally {
      await server.close();
    }
  });

  it('keeps the dashboard\'s preferences as `baton serve` does: a view on a new port gets the stored theme', async () => {
    const prefsFile = join(dir, 'prefs.json');
    writeFileSync(prefsFile, JSON.stringify({ theme: 'dark' }));
    const server = await startViewServer({ file, staticRoot: join(dir, 'dist'), prefs: new PrefsFile(prefsFile) });
    try {
      expect(await (await fetch(server.url + '/api/prefs')).json()).toEqual({ theme: 'dark' });
      const put = await fetch(server.url + '/api/prefs', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ theme: 'light' }) });
      expect(put.status).toBe(200);
      expect(JSON.parse(readFileSync(prefsFile, 'utf8'))).toEqual({ theme: 'light' });
    } finally {
      await server.close();
    }
  });
});

function pgrp(pid: number): number {
  // /proc/<pid>/stat: "pid (comm) state ppid pgrp ..."; comm may hold spaces, so read after the ')'.
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
}

describe('the simulated cluster in its own process group', () => {
  const stops: (() => Promise<void> | void)[] = [];
  afterAll(async () => {
    for (const s of stops) await s();
  });

  it('runs workers a terminal\'s Ctrl-C does not reach, obeys kill / restart / fault, and stops them all', async () => {
    const cluster = await startDetachedCluster({ workers: 2, tokenIntervalMs: 1 });
    stops.push(() => cluster.stop());
    const workers = cluster.workers();
    expect(workers.map((w) => w.alive)).toEqual([true, true]);
    const pids = workers.map((w) => w.pid!);
    for (const pid of pids) expect(pgrp(pid)).not.toBe(pgrp(process.pid));
    let changes = 0;
    cluster.onChange(() => changes++);
    await cluster.kill(0);
    expect(cluster.workers()[0]!.alive).toBe(false);
    expect(pidAlive(pids[0]!)).toBe(false);
    await cluster.restart(0);
    expect(cluster.workers()[0]!.alive).toBe(true);
    expect(changes).toBeGreaterThanOrEqual(2);
    await cluster.fault(1, { kind: 'slow', intervalMs: 50 });
    await expect(cluster.fault(7, { kind: 'hang' })).rejects.toThrow();
    const all = cluster.workers().map((w) => w.pid!);
    await cluster.stop();
    for (const pid of all) await expect.poll(() => pidAlive(pid), { timeout: 10_000 }).toBe(false);
  });

  it('reports how a worker killed from outside ended (its signal) to the dashboard, and forgets it on restart', async () => {
    const cluster = await startDetachedCluster({ workers: 1, tokenIntervalMs: 1 });
    stops.push(() => cluster.stop());
    const control = new SimControl(cluster);
    expect(control.workers()[0]!.exit).toBeNull();
    process.kill(cluster.workers()[0]!.pid!, 'SIGKILL');
    await expect.poll(() => control.workers()[0]!.alive, { timeout: 10_000 }).toBe(false);
    expect(control.workers()[0]!.exit).toEqual({ code: null, signal: 'SIGKILL' });
    await cluster.restart(0);
    expect(control.workers()[0]!.exit).toBeNull();
  });
});

describe('/traces extras', () => {
  const row = (id: string, started: number, ended: number): TraceRow => ({
    kind: 'request', request_id: id, attempts: 1, migrations: 0, admitted: true, admission_reason: null, prompt_tokens: 1, completion_tokens: 1, cached_tokens: null,
    finish_reason: 'length', outcome: 'finished', duration_ms: ended - started, started_at: started, ended_at: ended, stream: true, max_new_tokens: 1, error: null, trace_id: null,
  } as TraceRow);
  const rows = [row('abc1', 1000, 2000), row('abd2', 3000, 4000), row('xyz3', 5000, 6000)];

  it('parses until, request_prefix and iso, and refuses bad values', () => {
    const q = parseTraceQuery(new URLSearchParams('since=1000&until=4000&request_prefix=ab&iso=1'));
    expect(q.filter.since).toBe(1000);
    expect(q.extras).toEqual({ until: 4000, requestPrefix: 'ab', iso: true });
    expect(() => parseTraceQuery(new URLSearchParams('until=soon'))).toThrow(/until/);
    expect(() => parseTraceQuery(new URLSearchParams('iso=maybe'))).toThrow(/iso/);
  });

  it('is what the dashboard asks for: its filter as a query, ISO times on', () => {
    expect(traceQuery('csv', { requestPrefix: 'ab', since: 1, until: 2, outcome: 'failed' })).toBe('format=csv&outcome=failed&request_prefix=ab&since=1&until=2&iso=1');
  });

  it('streams only the rows in the range and with the prefix, ISO times next to epoch ms', async () => {
    const server = createServer((req, res) => void streamTraces(rows, 'jsonl', req, res));
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    try {
      const { port } = server.address() as AddressInfo;
      const text = await (await fetch(`http://127.0.0.1:${port}/traces?until=4000&request_prefix=ab&iso=1`)).text();
      const got = text.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(got.map((r) => r.request_id)).toEqual(['abc1', 'abd2']);
      expect(Object.keys(got[0]!).slice(Object.keys(got[0]!).indexOf('started_at'), Object.keys(got[0]!).indexOf('started_at') + 4)).toEqual(['started_at', 'started_at_iso', 'ended_at', 'ended_at_iso']);
      expect(got[0]!.started_at_iso).toBe(new Date(1000).toISOString());
    } finally {
      await new Promise<void>((ok) => server.close(() => ok()));
    }
    // Without extras, rows are as they were.
    expect([...traceChunks(rows, 'jsonl')].join('')).toBe(rows.map((r) => JSON.stringify(r) + '\n').join(''));
  });
});
