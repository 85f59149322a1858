// P/D qualification, real processes: the router in --pd-disaggregation mode over two
// prefill and two decode simulated SGLang workers (sim/pd.ts, SGLang's roles).
// 1. kill -9 of a decode after 8 of 16 streams started (16 unary requests beside them): 32/32
//    exact, every request on the killed decode continued on a new pair with a new room, and no
//    worker saw a room twice.
// 2. a prefill killed before its rooms transfer, then a prefill that hangs: every affected
//    request exact on a new pair within Baton's P/D deadline, the rows name the prefill leg, the
//    decode workers are never benched.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { runModel } from '../../sim/model.ts';
import { spawnRouter, stream, traceRows, waitUntil, type RouterProc, type StreamResult } from './harness/procs.ts';

const ROLES = ['prefill', 'prefill', 'decode', 'decode'] as const;

function pdArgs(cluster: SimCluster, extra: string[]): string[] {
  const ws = cluster.workers();
  return [
    '--pd-disaggregation',
    ...ws.filter((w) => w.role === 'prefill').flatMap((w) => ['--prefill', w.url, String(w.bootstrapPort)]),
    ...ws.filter((w) => w.role === 'decode').flatMap((w) => ['--decode', w.url]),
    '--policy', 'round_robin', '--migration-limit', '3', ...extra,
  ];
}

function prompt(i: number, len = 12): number[] {
  return Array.from({ length: len + (i % 7) }, (_, j) => 100 + ((i * 7919 + j * 104729) % 30000));
}

async function unary(url: string, body: Record<string, unknown>): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

/** Every room any surviving worker saw, and the rooms it saw twice (its /_sim/stats book). */
async function roomBooks(cluster: SimCluster): Promise<{ duplicates: unknown[]; seen: number }> {
  let seen = 0;
  const duplicates: unknown[] = [];
  for (const w of cluster.workers()) {
    if (!w.alive) continue;
    const pd = (await cluster.stats(w.index)).pd;
    expect(pd, `worker ${w.index} keeps a room book`).toBeDefined();
    seen += pd!.roomsSeen;
    duplicates.push(...pd!.duplicateRooms);
  }
  return { duplicates, seen };
}

async function attemptRows(routerUrl: string, id: string): Promise<Record<string, unknown>[]> {
  return (await traceRows(routerUrl, `request=${id}&kind=attempt`)).sort((a, b) => (a.attempt as number) - (b.attempt as number));
}

describe('decode killed mid-stream', () => {
  let cluster: SimCluster;
  let router: RouterProc;

  beforeAll(async () => {
    cluster = await startCluster({ workers: 4, roles: [...ROLES], port: 0, tokenIntervalMs: 8 });
    router = await spawnRouter(pdArgs(cluster, []));
  });

  afterAll(async () => {
    await router?.stop();
    await cluster?.stop();
  });

  it('16 streams + 16 unary, kill -9 of a decode after 8 streams started: 32/32 exact, each on the killed decode continued on a new pair with a new room', async () => {
    const N = 16;
    const victim = cluster.workers().find((w) => w.role === 'decode')!;
    let started = 0;
    let killed: Promise<void> | null = null;
    const params = { max_new_tokens: 128, ignore_eos: true };
    const streams: Promise<StreamResult>[] = Array.from({ length: N }, (_, i) =>
      stream(router.url, { rid: `pds-${i}`, input_ids: prompt(i), sampling_params: params, return_logprob: true }, (n) => {
        if (n === 1 && ++started === 8) killed = cluster.kill(victim.index);
      }),
    );
    const unaries = Array.from({ length: N }, (_, i) => unary(router.url, { rid: `pdu-${i}`, input_ids: prompt(100 + i), sampling_params: params }));
    const [sAnswers, uAnswers] = await Promise.all([Promise.all(streams), Promise.all(unaries)]);
    await killed;
    expect(killed).not.toBeNull();

    let continued = 0;
    const rooms: string[] = [];
    const check = async (id: string, outputIds: unknown) => {
      const rows = await attemptRows(router.url, id);
      for (const r of rows) {
        expect(r.prefill_worker, `${id} attempt ${String(r.attempt)} is a pair`).toEqual(expect.any(String));
        expect(r.decode_worker).toBe(r.worker);
        rooms.push(r.bootstrap_room as string);
      }
      const first = rows[0]!;
      if (first.decode_worker === victim.url && first.outcome === 'failed') {
        expect(first.failed_leg).toBe('decode');
        const next = rows[1]!;
        expect(next.decode_worker).not.toBe(victim.url);
        expect(next.bootstrap_room).not.toBe(first.bootstrap_room);
        expect(next.replayed_tokens).toBe(first.tokens);
        continued++;
      }
      return outputIds;
    };
    for (const [i, a] of sAnswers.entries()) {
      expect(a.error, `stream ${i}`).toBeNull();
      expect(a.done).toBe(true);
      const last = a.frames.at(-1)!;
      const ref = runModel(prompt(i), params);
      expect(last.output_ids).toEqual(ref.output_ids);
      const meta = last.meta_info as Record<string, unknown>;
      expect((meta.output_token_logprobs as [number, number, null][]).map((x) => [x[0], x[1]])).toEqual(ref.output_ids.map((t, k) => [ref.output_logprobs[k], t]));
      expect(meta.finish_reason).toEqual({ type: 'length', length: 128 });
      await check(`pds-${i}`, last.output_ids);
    }
    for (const [i, a] of uAnswers.entries()) {
      expect(a.status, `unary ${i}: ${JSON.stringify(a.json).slice(0, 200)}`).toBe(200);
      expect(a.json.output_ids).toEqual(runModel(prompt(100 + i), params).output_ids);
      await check(`pdu-${i}`, a.json.output_ids);
    }
    expect(new Set(rooms).size).toBe(rooms.length);
    const books = await roomBooks(cluster);
    expect(books.duplicates).toEqual([]);
    expect(books.seen).toBeGreaterThan(0);
    console.log(`P/D qualification: 32/32 exact; ${continued} continued off the killed decode on a new pair; ${rooms.length} rooms, none twice`);
    expect(continued).toBeGreaterThanOrEqual(2);
  });
});

describe('prefill dies or hangs before the transfer', () => {
  let cluster: SimCluster;
  let router: RouterProc;
  const DEADLINE = 4000;

  beforeAll(async () => {
    // A slow prefill (10 ms per prompt token), so a kill lands before the rooms transfer.
    cluster = await startCluster({ workers: 4, roles: [...ROLES], port: 0, tokenIntervalMs: 4, prefillUsPerToken: 10_000 });
    router = await spawnRouter(pdArgs(cluster, ['--pd-first-token-timeout-ms', String(DEADLINE), '--bench-ms', '300', '--health-interval-ms', '300']));
  });

  afterAll(async () => {
    await router?.stop();
    await cluster?.stop();
  });

  async function decodesNeverBenched(): Promise<void> {
    const ws = (await (await fetch(`${router.url}/workers`)).json()) as { workers?: Record<string, unknown>[] } | Record<string, unknown>[];
    const list = Array.isArray(ws) ? ws : ws.workers!;
    for (const w of list.filter((x) => x.pd_role === 'decode')) {
      expect(w.health, `${String(w.url)}`).toBe('healthy');
      expect(w.circuit).toBe('closed');
    }
  }

  async function runAffected(tag: string, n: number, onSent: () => Promise<void>): Promise<{ ids: string[]; durations: number[] }> {
    const params = { max_new_tokens: 32, ignore_eos: true };
    const ids = Array.from({ length: n }, (_, i) => `${tag}-${i}`);
    const sent = ids.map((id, i) => (i % 2 === 0
      ? stream(router.url, { rid: id, input_ids: prompt(200 + i, 20), sampling_params: params }).then((a) => {
        expect(a.error, id).toBeNull();
        return a.frames.at(-1)!.output_ids;
      })
      : unary(router.url, { rid: id, input_ids: prompt(200 + i, 20), sampling_params: params }).then((a) => {
        expect(a.status, `${id}: ${JSON.stringify(a.json).slice(0, 300)}`).toBe(200);
        return a.json.output_ids;
      })));
    await onSent();
    const outs = await Promise.all(sent);
    for (const [i, out] of outs.entries()) expect(out, ids[i]).toEqual(runModel(prompt(200 + i, 20), params).output_ids);
    const durations: number[] = [];
    for (const id of ids) {
      const req = (await traceRows(router.url, `request=${id}&kind=request`))[0]!;
      durations.push(req.duration_ms as number);
    }
    return { ids, durations };
  }

  it('a prefill killed before its rooms transfer: each affected request exact on a new pair, the prefill leg named, decodes never benched', async () => {
    const victim = cluster.workers().find((w) => w.role === 'prefill')!;
    const { ids } = await runAffected('pk', 8, async () => {
      // The fact, not the clock: the victim holds rooms that have not transferred yet.
      await waitUntil(async () => ((await cluster.stats(victim.index)).pd?.roomsActive ?? 0) >= 2, 10_000, 'rooms on the victim prefill');
      await cluster.kill(victim.index);
    });
    let affected = 0;
    for (const id of ids) {
      const rows = await attemptRows(router.url, id);
      if (rows[0]!.prefill_worker !== victim.url) continue;
      affected++;
      expect(rows[0]!.error_kind).toBe('prefill_failed');
      expect(rows[0]!.failed_leg).toBe('prefill');
      expect(rows[0]!.error_evidence).toMatch(/prefill leg/);
      const next = rows[1]!;
      expect(next.prefill_worker).not.toBe(victim.url);
      expect(next.bootstrap_room).not.toBe(rows[0]!.bootstrap_room);
      expect(next.outcome).toBe('finished');
    }
    expect(affected).toBeGreaterThanOrEqual(2);
    await decodesNeverBenched();
    expect((await roomBooks(cluster)).duplicates).toEqual([]);
  });

  it("a prefill that hangs: Baton's P/D deadline moves each affected request to a new pair, exact, the prefill leg blamed", async () => {
    const dead = cluster.workers().find((w) => w.role === 'prefill' && !w.alive)!;
    await cluster.restart(dead.index);
    await waitUntil(async () => {
      const ws = (await (await fetch(`${router.url}/workers`)).json()) as { workers?: Record<string, unknown>[] } | Record<string, unknown>[];
      return (Array.isArray(ws) ? ws : ws.workers!).every((w) => w.health === 'healthy');
    }, 15_000, 'every worker healthy again');
    const hung = cluster.workers().find((w) => w.role === 'prefill' && w.index !== dead.index)!;
    await cluster.fault(hung.index, { kind: 'hang' });
    const { ids, durations } = await runAffected('ph', 6, async () => undefined);
    let affected = 0;
    for (const [k, id] of ids.entries()) {
      const rows = await attemptRows(router.url, id);
      if (rows[0]!.prefill_worker !== hung.url) continue;
      affected++;
      expect(rows[0]!.error_kind).toBe('prefill_failed');
      expect(rows[0]!.failed_leg).toBe('prefill');
      expect(rows[0]!.error_evidence).toMatch(/P\/D first-token deadline/);
      expect(rows[1]!.prefill_worker).not.toBe(hung.url);
      // Within Baton's deadline (plus the continuation's own work), far below SGLang's 300 s.
      expect(durations[k]).toBeLessThan(DEADLINE + 10_000);
    }
    expect(affected).toBeGreaterThanOrEqual(1);
    await decodesNeverBenched();
    await cluster.fault(hung.index, { kind: 'clear' });
  });
});
