// Exactly-once trace rows under concurrent failures: real worker processes killed with SIGKILL
// and restarted at random while streaming and unary requests run. Whatever ends an attempt, it
// leaves one row; the rows, the counters of /metrics and the event stream agree.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonEvent } from '../../router/events/types.ts';
import type { AttemptRow, RequestRow } from '../../router/trace/row.ts';
import { generate, rng, scrape, sleep, startStack, until, type Answer, type Stack } from './harness.ts';
import { total } from './prom-text.ts';

const SEED = Number(process.env.BATON_TEST_SEED ?? Date.now() % 100_000);

describe(`random SIGKILLs under concurrent traffic (seed ${SEED})`, () => {
  let stack: Stack;
  const events: BatonEvent[] = [];

  beforeAll(async () => {
    // benchMs short so that restarted workers come back into use within the run.
    stack = await startStack(3, 3, { benchMs: 300, migrationLimit: 4 });
    stack.router.subscribe((e) => events.push(e));
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('one row per attempt and per request; rows, /metrics and events agree', async () => {
    const random = rng(SEED);
    const { cluster, router } = stack;
    const sent: { id: string; stream: boolean; maxNewTokens: number; abort: boolean; migratable: boolean }[] = [];
    const answers: Promise<Answer>[] = [];
    let trafficDone = false;

    // Traffic: at least 40 requests, and on until 3 workers were killed under it; about 12 at a
    // time, streaming and unary, 20-150 tokens each.
    let kills = 0;
    // A client that leaves does so once its request is under way (a request whose body the router
    // never read is no logical request and has no row): some time after its first attempt starts.
    const leaving = new Map<string, { controller: AbortController; afterMs: number }>();
    const leaveSoonAfterStart = (id: string, afterMs: number): AbortSignal => {
      const controller = new AbortController();
      leaving.set(id, { controller, afterMs });
      return controller.signal;
    };
    router.subscribe((e) => {
      if (e.type !== 'attempt_started' || e.attempt !== 0) return;
      const l = leaving.get(e.request_id);
      if (l) setTimeout(() => l.controller.abort(), l.afterMs);
    });
    const traffic = (async () => {
      const running = new Set<Promise<Answer>>();
      for (let i = 0; (i < 40 || kills < 3) && i < 300; i++) {
        // One in ten gives up early (cancel racing kills); one in ten may not migrate (a penalty).
        const r = { id: `rk-${SEED}-${i}`, stream: random() < 0.5, maxNewTokens: 20 + Math.floor(random() * 130), abort: random() < 0.1, migratable: random() >= 0.1 };
        sent.push(r);
        const p = generate(router.url, {
          ...r,
          promptLength: 8 + Math.floor(random() * 64),
          ...(r.abort ? { signal: leaveSoonAfterStart(r.id, random() * 300) } : {}),
          ...(r.migratable ? {} : { sampling: { frequency_penalty: 0.5 } }),
        });
        answers.push(p);
        running.add(p);
        void p.finally(() => running.delete(p));
        if (running.size >= 12) await Promise.race(running);
        await sleep(random() * 30);
      }
      await Promise.all(answers);
      trafficDone = true;
    })();

    // Chaos: every 250-550 ms, SIGKILL a random live worker (keeping one alive); each dead worker
    // is restarted 300-800 ms later, in the background, so kills keep coming while it boots.
    // Once, a worker hangs instead, until the router's inter-token timeout gives up on its
    // streams (the router aborting an attempt while the worker may still send is a race too).
    const restarts: Promise<void>[] = [];
    let hung: number | null = null;
    let hangDone = false;
    const chaos = (async () => {
      while (!trafficDone) {
        await sleep(250 + random() * 300);
        // The hung worker is spared until it is cleared, so that its streams do stall.
        const alive = cluster.workers().filter((w) => w.alive && w.index !== hung);
        if (trafficDone || alive.length < 2) continue;
        const victim = alive[Math.floor(random() * alive.length)]!.index;
        if (!hangDone && kills === 1) {
          hangDone = true;
          hung = victim;
          await cluster.fault(victim, { kind: 'hang' }).catch(() => undefined);
          restarts.push(sleep(2600).then(() => cluster.fault(victim, { kind: 'clear' })).catch(() => undefined).finally(() => (hung = null)));
          continue;
        }
        await cluster.kill(victim);
        kills++;
        const delay = 300 + random() * 500;
        restarts.push(sleep(delay).then(() => cluster.restart(victim)).catch(() => undefined));
      }
    })();

    await Promise.all([traffic, chaos]);
    await Promise.all(restarts);
    const done = await Promise.all(answers);
    await until(async () => total(await scrape(router.url), 'baton_requests_in_flight') === 0, 10_000, 'no request in flight');

    const rows = router.traceRows();
    const attemptRows = rows.filter((r): r is AttemptRow => r.kind === 'attempt');
    const requestRows = rows.filter((r): r is RequestRow => r.kind === 'request');
    const metrics = await scrape(router.url);
    const tally = (xs: string[]) => xs.reduce((m: Record<string, number>, x) => ((m[x] = (m[x] ?? 0) + 1), m), {});
    console.log(`random kills (seed ${SEED}): ${kills} kills, ${sent.length} requests, ${requestRows.filter((r) => r.migrations > 0).length} migrated,`,
      JSON.stringify({ requests: tally(requestRows.map((r) => r.outcome)), attempts: tally(attemptRows.map((r) => `${r.outcome}:${r.error_kind ?? '-'}`)) }));

    // The run did what it says: workers died and requests migrated.
    expect(kills).toBeGreaterThanOrEqual(3);
    const migrated = requestRows.filter((r) => r.migrations > 0);
    expect(migrated.length).toBeGreaterThanOrEqual(3);

    // attempt rows == attempts started == attempts counted by outcome.
    expect(attemptRows.length).toBe(total(metrics, 'baton_attempts_started_total'));
    expect(attemptRows.length).toBe(total(metrics, 'baton_attempts_total'));
    for (const outcome of ['finished', 'failed', 'cancelled', 'budget_exhausted']) {
      expect(total(metrics, 'baton_attempts_total', { outcome }), outcome).toBe(attemptRows.filter((r) => r.outcome === outcome).length);
    }
    expect(total(metrics, 'baton_requests_total')).toBe(sent.length);
    expect(total(metrics, 'baton_migrations_total')).toBe(migrated.reduce((s, r) => s + r.migrations, 0));

    // Exactly one request row per request sent, and none for anything else.
    expect(requestRows.map((r) => r.request_id).sort()).toEqual(sent.map((s) => s.id).sort());

    // No (request_id, attempt) twice; attempts numbered 0..n-1; n as the request row says.
    const keys = attemptRows.map((r) => `${r.request_id}#${r.attempt}`);
    expect(new Set(keys).size).toBe(keys.length);
    const byRequest = new Map<string, AttemptRow[]>();
    for (const r of attemptRows) byRequest.set(r.request_id, [...(byRequest.get(r.request_id) ?? []), r]);
    for (const req of requestRows) {
      const mine = (byRequest.get(req.request_id) ?? []).sort((a, b) => a.attempt - b.attempt);
      expect(mine.map((a) => a.attempt), req.request_id).toEqual(mine.map((_, i) => i));
      expect(mine.length, req.request_id).toBe(req.attempts);
      expect(req.migrations).toBe(Math.max(0, req.attempts - 1));
      // Every attempt's tokens add up to what the request delivered, migrated or not.
      expect(mine.reduce((s, a) => s + a.tokens, 0), req.request_id).toBe(req.completion_tokens);
      // Each continuation replays exactly what the attempts before it produced.
      let before = 0;
      for (const a of mine) {
        expect(a.replayed_tokens, `${req.request_id}#${a.attempt}`).toBe(before);
        expect(a.budget_before! - a.tokens, `${req.request_id}#${a.attempt}`).toBe(a.budget_after);
        before += a.tokens;
      }
      if (req.migrations > 0) {
        expect(new Set(mine.map((a) => a.worker)).size, req.request_id).toBeGreaterThanOrEqual(2);
      }
    }

    // The client saw what the rows say it was sent.
    const spec = new Map(sent.map((s) => [s.id, s]));
    for (const req of requestRows) {
      const answer = done.find((a) => a.id === req.request_id)!;
      const s = spec.get(req.request_id)!;
      expect(req.admitted, req.request_id).toBe(s.migratable);
      if (!s.migratable) expect(req.migrations).toBe(0);
      if (!s.abort) expect(req.outcome, req.request_id).not.toBe('cancelled');
      if (req.outcome === 'cancelled') continue; // the client left: it saw what it saw
      if (req.outcome === 'finished') {
        expect(req.completion_tokens, req.request_id).toBe(s.maxNewTokens);
        // A client that aborted may have left just as its answer completed: it saw what it saw.
        if (s.abort) continue;
        expect(answer.status, req.request_id).toBe(200);
        expect(answer.error, req.request_id).toBe(false);
        expect(answer.tokens, req.request_id).toBe(req.completion_tokens);
      } else if (!s.abort) {
        expect(answer.status !== 200 || answer.error, req.request_id).toBe(true);
      }
    }

    // The event stream carried one start and one end per attempt, one admission and one finish per request.
    const count = (type: BatonEvent['type']) => events.filter((e) => e.type === type).length;
    expect(count('attempt_started')).toBe(attemptRows.length);
    expect(count('attempt_ended')).toBe(attemptRows.length);
    expect(count('request_admitted')).toBe(sent.length);
    expect(count('request_finished')).toBe(sent.length);
    expect(count('migrated')).toBe(total(metrics, 'baton_migrations_total'));
  });
});
