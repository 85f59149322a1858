// GET /traces: the JSON Lines and CSV exports carry the same rows (field names exactly as docs/trace-rows.md
// lists them), the filters select what they say, and a bad query is a 400 with a JSON body.
// Rows come from real traffic through in-process simulated workers, with resets and refusals so
// that migrated, failed and cancelled requests are among them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorker, type SimWorker } from '../../sim/worker.ts';
import { startRouter, type RouterHandle } from '../../router/index.ts';
import type { AttemptRow, TraceRow } from '../../router/trace/row.ts';
import { fetchText, generate, parseJsonl, sleep, until } from './harness.ts';
import { ATTEMPT_FIELDS, REQUEST_FIELDS, parseTraceCsv } from './trace-fields.ts';

let a: SimWorker;
let b: SimWorker;
let router: RouterHandle;
let rows: TraceRow[];

beforeAll(async () => {
  a = await startWorker({ tokenIntervalMs: 2 });
  b = await startWorker({ tokenIntervalMs: 2 });
  // No bench, no circuit, no health sweep: each fault below must reach the worker it is set on.
  router = await startRouter({ port: 0, workers: [a.url, b.url], healthIntervalMs: 60_000, benchMs: 0, circuitFailureThreshold: 1000 });
  const run = (id: string, stream: boolean, extra: Partial<Parameters<typeof generate>[1]> = {}) =>
    generate(router.url, { id, stream, maxNewTokens: 60, ...extra });

  // Plain traffic, then resets mid-stream on both workers: migrations of ongoing requests.
  await Promise.all([0, 1, 2, 3].map((i) => run(`plain-${i}`, i % 2 === 0)));
  a.fault({ kind: 'reset', afterTokens: 50 });
  b.fault({ kind: 'reset', afterTokens: 90 });
  await Promise.all([0, 1, 2, 3, 4, 5].map((i) => run(`reset-${i}`, i % 2 === 0)));
  // A worker that refuses (503 with a JSON body: quotes and commas in the error text).
  b.fault({ kind: 'reject' });
  await Promise.all([0, 1, 2].map((i) => run(`reject-${i}`, i === 0)));
  b.fault({ kind: 'clear' });
  // Not migratable (a penalty), reset under it: a failed request.
  a.fault({ kind: 'reset', afterTokens: 10 });
  b.fault({ kind: 'reset', afterTokens: 10 });
  await Promise.all([0, 1].map((i) => run(`stuck-${i}`, true, { sampling: { frequency_penalty: 0.5 } })));
  a.fault({ kind: 'clear' });
  b.fault({ kind: 'clear' });
  // The request's own refusal (a stop string on a token-only worker): SGLang's message quotes
  // the strings, so the error text has quotes and commas to escape in CSV.
  await run('refused', true, { sampling: { stop: ['a, "b"'] } });
  // A client that leaves.
  const leave = new AbortController();
  const off = router.subscribe((e) => {
    if (e.type === 'first_token' && e.request_id === 'leaver') leave.abort();
  });
  await run('leaver', true, { maxNewTokens: 2000, signal: leave.signal });
  off();
  await until(() => router.traceRows({ kind: 'request' }).length === 17, 10_000, 'every request row');
  rows = router.traceRows();
});

afterAll(async () => {
  await router?.close();
  await a?.close();
  await b?.close();
});

async function exportText(query: string): Promise<string> {
  const res = await fetchText(`${router.url}/traces?${query}`);
  expect(res.status, res.text).toBe(200);
  return res.text;
}

describe('trace rows', () => {
  it('have exactly the documented fields, for both kinds, and cover the outcomes', () => {
    for (const row of rows) {
      const want = row.kind === 'attempt' ? ATTEMPT_FIELDS : REQUEST_FIELDS;
      expect(Object.keys(row).sort(), JSON.stringify(row)).toEqual([...want].sort());
    }
    const outcomes = new Set(rows.map((r) => `${r.kind}:${r.outcome}`));
    for (const o of ['attempt:finished', 'attempt:failed', 'attempt:cancelled', 'request:finished', 'request:failed', 'request:cancelled']) {
      expect(outcomes, o).toContain(o);
    }
    expect(rows.some((r) => r.kind === 'request' && r.migrations > 0)).toBe(true);
    expect(rows.some((r) => r.kind === 'request' && !r.admitted && r.admission_reason === 'frequency_penalty')).toBe(true);
  });
});

describe('GET /traces', () => {
  it('JSON Lines and CSV parse back to the same rows as the ring holds', async () => {
    const jsonl = parseJsonl(await exportText('format=jsonl'));
    const csvText = await exportText('format=csv');
    const csv = parseTraceCsv(csvText);
    expect(jsonl).toEqual(rows);
    expect(csv.length).toBe(jsonl.length);
    for (let i = 0; i < jsonl.length; i++) expect(csv[i], `row ${i}`).toEqual(jsonl[i]);
    // The round trip was not trivial: texts that need quoting, nulls, booleans.
    expect(rows.some((r) => r.error !== null && /[",]/.test(r.error))).toBe(true);
    expect(csvText.split('\n')[0]).toMatch(/^kind,request_id,attempt,rid,worker,/);
  });

  it('defaults to JSON Lines, with content types and a download name', async () => {
    const res = await fetchText(`${router.url}/traces`);
    expect(res.type).toBe('application/x-ndjson');
    expect(parseJsonl(res.text)).toEqual(rows);
    expect((await fetchText(`${router.url}/traces?format=csv`)).type).toMatch(/^text\/csv/);
  });

  it('filters by request, worker, outcome, kind and since, alone and together', async () => {
    const attempts = rows.filter((r): r is AttemptRow => r.kind === 'attempt');
    const migrated = rows.find((r) => r.kind === 'request' && r.migrations > 0)!;
    const mid = [...rows].sort((x, y) => x.ended_at - y.ended_at)[Math.floor(rows.length / 2)]!.ended_at;
    const cases: [string, (r: TraceRow) => boolean][] = [
      [`request=${migrated.request_id}`, (r) => r.request_id === migrated.request_id],
      [`worker=${encodeURIComponent(b.url)}`, (r) => r.kind === 'attempt' && r.worker === b.url],
      // the worker as a user might type it: trailing slash
      [`worker=${encodeURIComponent(b.url + '/')}`, (r) => r.kind === 'attempt' && r.worker === b.url],
      ['outcome=failed', (r) => r.outcome === 'failed'],
      ['outcome=cancelled', (r) => r.outcome === 'cancelled'],
      ['kind=request', (r) => r.kind === 'request'],
      ['kind=attempt', (r) => r.kind === 'attempt'],
      [`since=${mid}`, (r) => r.ended_at >= mid],
      [`kind=attempt&outcome=failed&worker=${encodeURIComponent(a.url)}`, (r) => r.kind === 'attempt' && r.outcome === 'failed' && r.worker === a.url],
      [`request=${migrated.request_id}&kind=attempt`, (r) => r.kind === 'attempt' && r.request_id === migrated.request_id],
      ['request=no-such-request', () => false],
    ];
    for (const [query, keep] of cases) {
      const want = rows.filter(keep);
      expect(parseJsonl(await exportText(`format=jsonl&${query}`)), query).toEqual(want);
      expect(parseTraceCsv(await exportText(`format=csv&${query}`)), query).toEqual(want);
    }
    // Each filter above selected something real (except the last), so none passed vacuously.
    expect(attempts.filter((r) => r.worker === b.url).length).toBeGreaterThan(0);
    expect(attempts.filter((r) => r.worker === a.url && r.outcome === 'failed').length).toBeGreaterThan(0);
  });

  it('an export that matches nothing still has its CSV header', async () => {
    const text = await exportText('format=csv&request=nothing');
    expect(text.trim().split('\n')).toHaveLength(1);
    expect(parseTraceCsv(text)).toEqual([]);
    expect(await exportText('format=jsonl&request=nothing')).toBe('');
  });

  it('answers a bad query with 400 and a JSON error naming the problem', async () => {
    const bad: [string, RegExp][] = [
      ['format=xml', /format/],
      ['kind=worker', /kind/],
      ['outcome=exploded', /outcome/],
      ['since=yesterday', /since/],
      ['since=-5', /since/],
      ['outcom=failed', /unknown parameter 'outcom'/],
      ['kind=attempt&kind=request', /more than once/],
    ];
    for (const [query, message] of bad) {
      const res = await fetchText(`${router.url}/traces?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.type, query).toBe('application/json');
      const body = JSON.parse(res.text) as { message: string; code: number };
      expect(body.message, query).toMatch(message);
      expect(body.code).toBe(400);
    }
  });

  it('a client that leaves mid-export does not stop the router from serving the next one', async () => {
    const { request } = await import('undici');
    const ac = new AbortController();
    const res = await request(`${router.url}/traces?format=csv`, { signal: ac.signal });
    ac.abort();
    await res.body.text().catch(() => undefined);
    await sleep(50);
    expect(parseJsonl(await exportText('format=jsonl'))).toEqual(router.traceRows());
  });
});
