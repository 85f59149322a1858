// Client cancels: a client that hangs up mid-stream has its upstream attempt aborted within one
// second (the worker itself sees the request go), its trace rows say `cancelled`, and it is never
// continued on another worker, which must not see the request at all.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startBench, waitUntil, type Bench } from './helpers.ts';
import { parseUpstreamRid } from '../../router/migration/rid.ts';

describe('client cancels', () => {
  let bench: Bench;
  beforeAll(async () => {
    // Two workers: if the router wrongly migrated a cancelled request, the second would see it.
    bench = await startBench([{ tokenIntervalMs: 20 }, { tokenIntervalMs: 20 }], { interTokenTimeoutMs: 5000 });
  });
  afterAll(async () => {
    await bench.close();
  });

  const seen = () => bench.workers.map((w) => w.stats());

  for (const stream of [true, false]) {
    it(`a ${stream ? 'stream' : 'unary'} client that disconnects has its attempt aborted within 1 s, traced as cancelled, never migrated`, async () => {
      const id = `cancel-${stream ? 'stream' : 'unary'}`;
      const before = seen();
      const ac = new AbortController();
      const pending = request(bench.router.url + '/generate', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ input_ids: [11, 12, 13], sampling_params: { max_new_tokens: 500, ignore_eos: true }, stream, rid: id }),
        signal: ac.signal,
      }).catch((e: Error) => e);
      if (stream) {
        // Read a few chunks first: the cancel lands mid-generation.
        const res = await pending;
        if (res instanceof Error) throw res;
        let frames = 0;
        for await (const chunk of res.body) {
          frames += (chunk as Buffer).toString().split('\n\n').length - 1;
          if (frames >= 3) break;
        }
      } else {
        // A unary client waits for the whole answer; give the generation time to get going.
        await waitUntil(() => seen().some((s, i) => s.inFlight > before[i]!.inFlight), 3000, 'the generation to start');
      }
      const hungUpAt = Date.now();
      ac.abort();
      const worker = await waitUntil(() => {
        const now = seen();
        const i = now.findIndex((s, j) => s.clientDisconnects + s.requestsAborted > before[j]!.clientDisconnects + before[j]!.requestsAborted && s.inFlight === 0);
        return i >= 0 ? { i } : null;
      }, 5000, 'the worker to see the request go').then((f) => f.i, () => -1);
      await pending;
      const abortMs = Date.now() - hungUpAt;
      expect(worker, 'a worker saw the cancel').toBeGreaterThanOrEqual(0);
      expect(abortMs).toBeLessThan(1000);

      const rows = await waitUntil(() => {
        const r = bench.router.traceRows({ request: id });
        return r.some((x) => x.kind === 'request') ? r : null;
      }, 3000, 'the request row');
      const attempts = rows.filter((r) => r.kind === 'attempt');
      const req = rows.filter((r) => r.kind === 'request');
      expect(req).toHaveLength(1);
      expect(req[0]).toMatchObject({ outcome: 'cancelled', attempts: 1, migrations: 0 });
      expect(attempts).toHaveLength(1);
      expect(attempts[0]).toMatchObject({ outcome: 'cancelled', error_kind: 'client_cancel' });
      // Never continued: the other worker never heard of this request, under any rid.
      const others = seen().filter((_, i) => i !== worker);
      for (const s of others) expect(s.rids.filter((r) => r.startsWith(id))).toEqual([]);
      // One attempt, at one worker: its rid is Baton's per-attempt rid for this request.
      expect(seen()[worker]!.rids.filter((r) => r.startsWith(id)).map(parseUpstreamRid)).toEqual([{ id, attempt: 0 }]);
      await waitUntil(() => bench.router.workers().every((w) => w.in_flight === 0), 2000, 'router in-flight to return to 0');
    });
  }
});
