// P/D pieces that are plain data: rooms, the bootstrap fields of a body, the leg a failure is
// attributed to, and the gateway's `--prefill URL PORT` syntax.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { RoomIssuer, attributeLeg, bootstrapHost, deadlineFailure, judgeWaiting, withBootstrap, type PrefillLeg } from '../../router/migration/pd.ts';
import type { Worker } from '../../router/pool/worker.ts';
import { configFromArgv, decodePolicyWarning, foldPrefillPorts } from '../../cli/router.ts';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Failure } from '../../router/core/failure.ts';

describe('rooms', () => {
  it('are 63-bit and never issued twice, even when the random source repeats itself', () => {
    const draws = [Buffer.from('ffffffffffffffff', 'hex'), Buffer.from('ffffffffffffffff', 'hex'), Buffer.from('0000000000000001', 'hex')];
    let i = 0;
    const rooms = new RoomIssuer((b) => void draws[i++ % draws.length]!.copy(b));
    const a = rooms.issue();
    const b = rooms.issue();
    expect(a).toBe(0x7fff_ffff_ffff_ffffn); // the top bit masked, as the gateway's i64::MAX mask
    expect(b).toBe(1n);
    expect(rooms.redraws).toBe(1);
  });

  it('a real issuer gives distinct rooms below 2^63', () => {
    const rooms = new RoomIssuer();
    const seen = new Set<bigint>();
    for (let k = 0; k < 10_000; k++) {
      const r = rooms.issue();
      expect(r >= 0n && r < 1n << 63n).toBe(true);
      seen.add(r);
    }
    expect(seen.size).toBe(10_000);
  });
});

describe('rooms: the law', () => {
  // No two live attempts share a room (a room active twice crashes SGLang's schedulers, sglang
  // #40125), nor does a new attempt get one of the last `kept` rooms released (a worker may hold
  // it until the abort reaches it); and the issuer holds only those, however many it issued.
  // The random source is adversarial: it repeats a small pool of values, with a fresh value
  // every few draws so that an issue always ends.
  const op = fc.oneof(fc.constant({ kind: 'issue' as const }), fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }));
  it('an issued room is never one in flight nor one of the last `kept` released, and what the issuer holds is bounded by them', () => {
    fc.assert(fc.property(
      fc.array(fc.bigInt({ min: 0n, max: 15n }), { minLength: 1, maxLength: 6 }),
      fc.integer({ min: 2, max: 5 }),
      fc.integer({ min: 0, max: 6 }),
      fc.array(op, { maxLength: 300 }),
      (pool, freshEvery, kept, ops) => {
        let draws = 0;
        let fresh = 1n << 40n;
        const rooms = new RoomIssuer((b) => void b.writeBigUInt64BE(++draws % freshEvery === 0 ? fresh++ : pool[draws % pool.length]!), kept);
        const live: bigint[] = [];
        const released: bigint[] = [];
        for (const o of ops) {
          if (o.kind === 'issue') {
            const r = rooms.issue();
            expect(r >= 0n && r < 1n << 63n).toBe(true);
            expect(live).not.toContain(r);
            expect(kept === 0 ? [] : released.slice(-kept)).not.toContain(r);
            live.push(r);
          } else if (live.length > 0) {
            const [r] = live.splice(o.pick % live.length, 1);
            rooms.release(r!);
            released.push(r!);
          }
          expect(rooms.remembered).toBeLessThanOrEqual(live.length + kept);
        }
      },
    ), { numRuns: 500 });
  });

  it('200,000 attempts, ten thousand in flight at a time: the issuer holds those and its ring of 4096, not every room it issued', () => {
    const rooms = new RoomIssuer();
    const inFlight = new Array<bigint>(10_000);
    for (let k = 0; k < 200_000; k++) {
      const slot = k % inFlight.length;
      if (k >= inFlight.length) rooms.release(inFlight[slot]!);
      inFlight[slot] = rooms.issue();
    }
    expect(rooms.remembered).toBe(10_000 + 4096);
  });
});

describe('withBootstrap', () => {
  it('appends the three fields as the last keys, the room exact beyond 2^53', () => {
    const room = 9_007_199_254_740_993n; // 2^53 + 1
    const out = withBootstrap('{"rid":"r","input_ids":[1,2],"bootstrap_room":5,"stream":true}', '10.0.0.7', 8998, room) as string;
    expect(out).toBe('{"rid":"r","input_ids":[1,2],"bootstrap_room":5,"stream":true,"bootstrap_host":"10.0.0.7","bootstrap_port":8998,"bootstrap_room":9007199254740993}');
    expect(out.endsWith('"bootstrap_room":9007199254740993}')).toBe(true);
  });

  it('a Buffer body stays a Buffer; an unknown port is null; an empty object gets no leading comma', () => {
    const b = withBootstrap(Buffer.from('{ }\n'), 'p', null, 3n);
    expect(Buffer.isBuffer(b)).toBe(true);
    expect(JSON.parse(b.toString())).toEqual({ bootstrap_host: 'p', bootstrap_port: null, bootstrap_room: 3 });
  });

  it('any JSON object body keeps its fields and gains the bootstrap ones (last key wins)', () => {
    fc.assert(fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.bigInt({ min: 0n, max: (1n << 53n) - 1n }), (obj, room) => {
      const out = JSON.parse(withBootstrap(JSON.stringify(obj), 'h', 1, room) as string) as Record<string, unknown>;
      // JSON has no -0 (fast-check's jsonValue does): the body's own round trip is the reference.
      expect(out).toEqual({ ...(JSON.parse(JSON.stringify(obj)) as object), bootstrap_host: 'h', bootstrap_port: 1, bootstrap_room: Number(room) });
    }), { numRuns: 200 });
  });
});

describe('bootstrapHost', () => {
  // What mini_lb sends: maybe_wrap_ipv6_address(urllib.parse.urlparse(url).hostname), and the
  // gateway's Url::host_str(): an IPv6 host in brackets, any other host as it is.
  const host = (url: string) => bootstrapHost({ url } as Worker);
  it('an IPv6 host keeps its brackets (SGLang builds f"{host}:{port}"); a name or an IPv4 address is bare', () => {
    expect(host('http://[::1]:30000')).toBe('[::1]');
    expect(host('http://[fd00:10:244::7]:30000')).toBe('[fd00:10:244::7]');
    expect(host('http://10.0.0.7:30000')).toBe('10.0.0.7');
    expect(host('http://prefill-0.prefill.svc:30000')).toBe('prefill-0.prefill.svc');
    const body = JSON.parse(withBootstrap('{"input_ids":[1]}', host('http://[::1]:30000'), 8998, 7n) as string) as Record<string, unknown>;
    expect(`${String(body.bootstrap_host)}:${String(body.bootstrap_port)}`).toBe('[::1]:8998');
  });
});

describe('attributeLeg', () => {
  const leg = (state: PrefillLeg['state'], failure: Failure | null = null) => ({ state, failure, worker: { url: 'http://p:1' }, room: 42n }) as unknown as PrefillLeg;
  const abort: Failure = { kind: 'engine_abort', message: 'Decode transfer failed for request rank=0 ...', status: 500, evidence: 'abort finish with status_code 500' };
  const reset: Failure = { kind: 'stream_broken', message: 'ECONNRESET', status: 502, evidence: 'transport error ECONNRESET after the response started' };

  it("a decode's in-band abort before its first token while the prefill had not answered is the prefill's", () => {
    const r = attributeLeg(abort, leg('waiting'), false);
    expect(r.leg).toBe('prefill');
    expect(r.failure.kind).toBe('prefill_failed');
    expect(r.failure.evidence).toContain('had not answered');
    expect(attributeLeg(abort, leg('failed', reset), false).failure.evidence).toContain('had failed');
  });

  it("the decode's own transport failure, or anything after its first token, is the decode's", () => {
    expect(attributeLeg(reset, leg('waiting'), false)).toEqual({ failure: reset, leg: 'decode' });
    expect(attributeLeg(abort, leg('waiting'), true)).toEqual({ failure: abort, leg: 'decode' });
    expect(attributeLeg(abort, leg('done'), false)).toEqual({ failure: abort, leg: 'decode' });
  });

  it('the P/D deadline fails the prefill leg unless it had answered, with the evidence read', () => {
    const verdict = judgeWaiting({ outOfService: null, probe: { ok: false, refused: false, detail: 'GET /health failed: timeout' }, load: null });
    const f = deadlineFailure(leg('waiting'), 500, verdict);
    expect(f.kind).toBe('prefill_failed');
    expect(f.evidence).toContain('its health check failed (GET /health failed: timeout)');
    expect(deadlineFailure(leg('done'), 500).kind).toBe('first_token_timeout');
  });

  it("the router's own first-token timeout while the prefill leg waits moves the attempt, attributed to the prefill leg, blaming nobody", () => {
    const slow: Failure = { kind: 'first_token_timeout', message: 'no first token from worker within 120000 ms (queue + prefill)', status: 504, evidence: 'first-token deadline: nothing for 120000 ms since the request was sent' };
    const r = attributeLeg(slow, leg('waiting'), false);
    expect(r.leg).toBe('prefill');
    expect(r.failure.kind).toBe('first_token_timeout'); // not prefill_failed: the loop benches nobody
    expect(r.failure.evidence).toContain('not shown faulty');
    expect(attributeLeg(slow, leg('done'), false)).toEqual({ failure: slow, leg: 'decode' });
  });
});

describe('judgeWaiting: a prefill leg unanswered at the P/D deadline is its server\'s fault only on evidence', () => {
  const ok = { ok: true, refused: false, detail: 'GET /health answered 200' };
  const answered = { answered: true, detail: 'GET /get_load answered 200' };
  it('a server that answers its health check and its load report is working through a queue', () => {
    const v = judgeWaiting({ outOfService: null, probe: ok, load: answered });
    expect(v.blame).toBe(false);
    expect(v.evidence).toContain('a queue, not a fault');
  });
  it('its health checks taking it out, a failed probe, or no load report from its scheduler are evidence', () => {
    expect(judgeWaiting({ outOfService: 'unhealthy', probe: null, load: null })).toMatchObject({ blame: true, dead: false });
    expect(judgeWaiting({ outOfService: null, probe: { ok: false, refused: true, detail: 'GET /health failed: ECONNREFUSED' }, load: answered })).toMatchObject({ blame: true, dead: true });
    expect(judgeWaiting({ outOfService: null, probe: { ok: false, refused: false, detail: 'GET /health answered 503' }, load: answered })).toMatchObject({ blame: true, dead: false });
    // SGLang's /health without SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION answers from the HTTP
    // process alone; a stuck scheduler still answers no load report.
    const v = judgeWaiting({ outOfService: null, probe: ok, load: { answered: false, detail: 'GET /get_load failed: TimeoutError' } });
    expect(v).toMatchObject({ blame: true, dead: false });
    expect(v.evidence).toContain('no load report');
  });
});

describe('command line', () => {
  it("reads the gateway's --prefill URL PORT and --prefill URL, and --decode URL", () => {
    expect(foldPrefillPorts(['--prefill', 'http://a:1', '9001', '--prefill', 'http://b:2', '--decode', 'http://c:3'])).toEqual(['--prefill', 'http://a:1 9001', '--prefill', 'http://b:2', '--decode', 'http://c:3']);
    const cfg = configFromArgv(['--pd-disaggregation', '--prefill', 'http://a:1', '9001', '--prefill', 'http://b:2', '--decode', 'http://c:3', '--pd-first-token-timeout-ms', '5000'], {})!;
    expect(cfg.pdDisaggregation).toBe(true);
    expect(cfg.prefill).toEqual(['http://a:1 9001', 'http://b:2']);
    expect(cfg.decode).toEqual(['http://c:3']);
    expect(cfg.pdFirstTokenTimeoutMs).toBe(5000);
  });

  it('--prefill without --pd-disaggregation is a usage error that says so', () => {
    expect(() => configFromArgv(['--prefill', 'http://a:1'], {})).toThrow(/need --pd-disaggregation/);
    expect(() => configFromArgv(['--pd-disaggregation', '--prefill', 'http://a:1 x'], {})).toThrow(/URL BOOTSTRAP_PORT/);
  });
});

describe('a policy per side (--prefill-policy, --decode-policy)', () => {
  const pd = ['--pd-disaggregation', '--prefill', 'http://a:1', '--decode', 'http://c:3'];
  const sides = (argv: string[], env: NodeJS.ProcessEnv = {}) => {
    const c = configFromArgv([...pd, ...argv], env)!;
    return [c.prefillPolicy, c.decodePolicy];
  };

  it('without --policy: cache_aware for prefill, least_inflight for decode (an SGLang decode server keeps no radix cache)', () => {
    expect(sides([])).toEqual(['cache_aware', 'least_inflight']);
  });

  it("--policy given, no side's own: both sides follow it, the gateway's rule, but cache_aware is the prefill side's; a side's own wins", () => {
    expect(sides(['--policy', 'round_robin'])).toEqual(['round_robin', 'round_robin']);
    expect(sides(['--policy', 'cache_aware'])).toEqual(['cache_aware', 'least_inflight']);
    expect(sides(['--policy', 'cache_aware', '--decode-policy', 'cache_aware'])).toEqual(['cache_aware', 'cache_aware']);
    expect(sides(['--policy', 'round_robin', '--decode-policy', 'power_of_two'])).toEqual(['round_robin', 'power_of_two']);
    expect(sides(['--prefill-policy', 'power_of_two'])).toEqual(['power_of_two', 'least_inflight']);
    // --policy given in the environment is given too.
    expect(sides([], { BATON_POLICY: 'round_robin' })).toEqual(['round_robin', 'round_robin']);
  });

  it('from the environment and the config file, as every setting', () => {
    expect(sides([], { BATON_PREFILL_POLICY: 'round_robin', BATON_DECODE_POLICY: 'power_of_two' })).toEqual(['round_robin', 'power_of_two']);
    const dir = mkdtempSync(join(tmpdir(), 'baton-pd-policy-'));
    try {
      const file = join(dir, 'router.yaml');
      writeFileSync(file, 'prefill_policy: power_of_two\ndecode_policy: round_robin\n');
      expect(sides(['--config', file])).toEqual(['power_of_two', 'round_robin']);
      // Flags over the file.
      expect(sides(['--config', file, '--decode-policy', 'cache_aware'])).toEqual(['power_of_two', 'cache_aware']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a bad name, or a side\'s policy without --pd-disaggregation, is a usage error that says so', () => {
    expect(() => sides(['--decode-policy', 'random'])).toThrow(/decode-policy must be one of least_inflight, round_robin, power_of_two, cache_aware, got "random"/);
    expect(() => configFromArgv(['--prefill-policy', 'round_robin'], {})).toThrow(/--prefill-policy and --decode-policy need --pd-disaggregation/);
  });

  it('warns when the decode side is placed by prefix', () => {
    expect(decodePolicyWarning(configFromArgv([...pd], {})!)).toBeNull();
    expect(decodePolicyWarning(configFromArgv([...pd, '--policy', 'cache_aware'], {})!)).toBeNull();
    expect(decodePolicyWarning(configFromArgv([...pd, '--decode-policy', 'cache_aware'], {})!)).toMatch(/SGLang decode servers keep no radix cache/);
  });
});

describe('pairs (WorkerPool.pick + pickPrefill)', () => {
  it('a prefill server is never an attempt\'s worker; round_robin pairs go round on both sides', async () => {
    const { WorkerPool } = await import('../../router/pool/worker-pool.ts');
    const { createPolicy } = await import('../../router/pool/policies/index.ts');
    const opts = {
      circuit: { failureThreshold: 5, openMs: 1000, successThreshold: 1 },
      connectTimeoutMs: 500, healthIntervalMs: 0, healthTimeoutMs: 100, healthFailureThreshold: 1, benchMs: 1000, spareConnections: 0,
    };
    const pool = new WorkerPool(opts, () => createPolicy('round_robin'), () => undefined, () => undefined);
    try {
      // Port 9 on loopback refuses: the workers are never probed, their roles are the declared ones.
      const p = [await pool.addWithRole('http://127.0.1.1:9 8998', 'prefill'), await pool.addWithRole('http://127.0.2.1:9', 'prefill')];
      const d = [await pool.addWithRole('http://127.0.3.1:9', 'decode'), await pool.addWithRole('http://127.0.4.1:9', 'decode')];
      for (const w of [...p, ...d]) {
        w.healthy = true;
        w.dead = false;
      }
      expect(p[0]!.bootstrapPort).toBe(8998);
      expect(p[1]!.bootstrapPort).toBeNull();
      const pairs = new Set<string>();
      for (let k = 0; k < 8; k++) {
        const dec = pool.pick(new Set(), null, 'sglang', null)!;
        expect(dec.pdRole).toBe('decode');
        const pre = pool.pickPrefill(new Set(), null, null)!;
        expect(pre.pdRole).toBe('prefill');
        pairs.add(`${pre.id}/${dec.id}`);
      }
      // Each side in turn: both prefill and both decode servers take attempts.
      expect(new Set([...pairs].map((x) => x.split('/')[0])).size).toBe(2);
      expect(new Set([...pairs].map((x) => x.split('/')[1])).size).toBe(2);
      expect(pool.pickPrefill(new Set([p[0]!.id, p[1]!.id]), null, null)).toBeNull();
      await expect(pool.addWithRole('http://127.0.5.1:9 70000', 'prefill')).rejects.toThrow(/bootstrap port/);
    } finally {
      await pool.close();
    }
  });
});
