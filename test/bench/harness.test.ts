// The bench harness's pure parts: percentile maths, the figures and ratios built from runs, the
// nginx config it generates, and the readings it takes from /proc. No timing is asserted here.
import { describe, expect, it } from 'vitest';
import { Histogram, bucketOf, bucketValue, percentileOf } from '../../bench/histogram.ts';
import { nginxConfig } from '../../bench/nginx.ts';
import { parseStatCpu, parseStatusRss } from '../../bench/proc.ts';
import { buildComparisons, checks, figuresOf, sideBySide, type SideBySideRun, gapLabel, markdown, median, migrationGap, ratio, ratios, spliceIntoDoc, summarize, traceGaps, verdictLines, type RunInfo, type Sample } from '../../bench/report.ts';
import { pinningFor } from '../../bench/run.ts';
import { endsWithLoneLf, frameEnds, lastCompletionTokens } from '../../bench/loadgen.ts';
import fc from 'fast-check';
import { attemptKey, previousAttemptKey, ridOf } from '../../bench/proxy-probe.ts';
import { parseRefs, refTargetName } from '../../bench/ref-build.ts';
import { alternateBuilds, isBatonRef, ridTag, targetLabel, type TargetName } from '../../bench/targets.ts';
import { optionsFromArgv } from '../../cli/bench.ts';
import { upstreamRid } from '../../router/migration/rid.ts';
import { baseOf, formatOf, generatePath, layoutOf, promptIds, requestBody, VLLM_WORKLOADS, workloads } from '../../bench/workloads.ts';

describe('histogram', () => {
  it('reports every percentile within 1 % above the exact nearest-rank value', () => {
    const samples = Array.from({ length: 10_000 }, (_, i) => 1 + ((i * 7919) % 100_000) / 7);
    const h = new Histogram();
    for (const s of samples) h.add(s);
    for (const p of [1, 10, 50, 90, 99, 99.9]) {
      const exact = percentileOf(samples, p);
      const got = h.percentile(p);
      expect(got).toBeGreaterThanOrEqual(exact);
      expect(got).toBeLessThanOrEqual(exact * 1.0101);
    }
  });

  it('gives the exact extremes at p0 and p100, and NaN when empty', () => {
    const h = new Histogram();
    expect(h.percentile(50)).toBeNaN();
    for (const v of [3, 1000, 0.2, 42]) h.add(v);
    expect(h.percentile(0)).toBe(0.2);
    expect(h.percentile(100)).toBe(1000);
    expect(h.n).toBe(4);
    expect(h.mean()).toBeCloseTo((3 + 1000 + 0.2 + 42) / 4);
  });

  it('merging equals recording everything in one histogram, also through its JSON form', () => {
    const a = new Histogram();
    const b = new Histogram();
    const all = new Histogram();
    for (let i = 1; i < 500; i++) {
      (i % 3 ? a : b).add(i * 1.7);
      all.add(i * 1.7);
    }
    const merged = Histogram.from(JSON.parse(JSON.stringify(a.toJSON()))).merge(b.toJSON());
    for (const p of [5, 50, 95, 99]) expect(merged.percentile(p)).toBe(all.percentile(p));
    const { sum, ...rest } = merged.toJSON();
    const { sum: allSum, ...allRest } = all.toJSON();
    expect(rest).toEqual(allRest);
    expect(sum).toBeCloseTo(allSum);
  });

  it('puts a value in the bucket whose upper bound is the first at or above it', () => {
    for (const v of [1.5, 10, 999.9, 123_456]) {
      const b = bucketOf(v);
      expect(bucketValue(b)).toBeGreaterThanOrEqual(v * (1 - 1e-9));
      expect(bucketValue(b - 1)).toBeLessThan(v);
    }
    expect(bucketOf(0)).toBe(0);
    expect(bucketOf(0.5)).toBe(0);
  });

  it('nearest-rank percentile of plain samples', () => {
    expect(percentileOf([5, 1, 4, 2, 3], 50)).toBe(3);
    expect(percentileOf([5, 1, 4, 2, 3], 99)).toBe(5);
    expect(percentileOf([5, 1, 4, 2, 3], 20)).toBe(1);
    expect(percentileOf([], 50)).toBeNaN();
  });
});

function sample(over: Partial<Sample>): Sample {
  const h = new Histogram();
  h.add(1000);
  return {
    workload: 'W1',
    target: 'direct',
    round: 1,
    wallMs: 1000,
    requests: 100,
    ok: 100,
    errors: 0,
    errorSamples: [],
    tokens: 3200,
    bytes: 1e6,
    chunks: 3300,
    ttft: h.toJSON(),
    gap: h.toJSON(),
    proxyCpuUs: null,
    rssIdleBytes: null,
    rssPeakBytes: null,
    concurrency: 64,
    tokenIntervalMs: 0,
    workersCpuUs: 1e6,
    loadgenCpuUs: 2e5,
    ...over,
  };
}

describe('figures and ratios', () => {
  it('CPU per request and per token come from the summed runs', () => {
    const f = figuresOf([sample({ target: 'baton', proxyCpuUs: 50_000 }), sample({ target: 'baton', round: 2, proxyCpuUs: 30_000, ok: 60, tokens: 1920 })], null);
    expect(f.cpuUsPerRequest).toBeCloseTo(80_000 / 160);
    expect(f.cpuUsPerToken).toBeCloseTo(80_000 / 5120);
    expect(f.rps).toBeCloseTo(160 / 2);
    expect(f.proxyCores).toBeCloseTo(0.04);
  });

  it('added latency is measured against direct on the same workload', () => {
    const slow = new Histogram();
    slow.add(3000);
    const fs = summarize([sample({}), sample({ target: 'nginx', proxyCpuUs: 1, ttft: slow.toJSON(), gap: slow.toJSON() })]);
    const nginx = fs.find((f) => f.target === 'nginx')!;
    expect(nginx.addedTtftMs!.p50).toBeCloseTo(3 - 1, 1);
    expect(nginx.addedGapMs!.p99).toBeCloseTo(3 - 1, 1);
    expect(fs.find((f) => f.target === 'direct')!.addedTtftMs).toBeNull();
  });

  it('memory per stream is the largest RSS growth over rounds, divided by the streams', () => {
    const f = figuresOf(
      [
        sample({ target: 'baton', proxyCpuUs: 1, rssIdleBytes: 100 << 20, rssPeakBytes: (100 << 20) + 64 * 20 * 1024 }),
        sample({ target: 'baton', proxyCpuUs: 1, rssIdleBytes: 120 << 20, rssPeakBytes: (120 << 20) + 64 * 5 * 1024 }),
      ],
      null,
    );
    expect(f.memKiBPerStream).toBeCloseTo(20);
  });

  it('takes the CPU ratio round by round too, and its median', () => {
    const samples = [
      sample({ target: 'bare', round: 1, proxyCpuUs: 10_000 }),
      sample({ target: 'baton', round: 1, proxyCpuUs: 12_000 }),
      sample({ target: 'bare', round: 2, proxyCpuUs: 20_000 }),
      sample({ target: 'baton', round: 2, proxyCpuUs: 30_000 }),
      sample({ target: 'bare', round: 3, proxyCpuUs: 10_000 }),
      sample({ target: 'baton', round: 3, proxyCpuUs: 11_000 }),
    ];
    const r = ratios(summarize(samples), samples).find((q) => q.versus === 'bare')!;
    expect(r.cpuPerRequest).toBeCloseTo(53 / 40);
    expect(r.cpuPerRequestByRound.map((v) => +v.toFixed(2))).toEqual([1.2, 1.5, 1.1]);
    expect(r.cpuPerRequestMedian).toBeCloseTo(1.2);
    expect(median([3, 1, 2, 4])).toBe(2.5);
    expect(median([])).toBeNull();
  });

  it('judges W3 latency on the pinned layout, not when direct calls alone miss the token interval (saturated)', () => {
    const at = (ms: number) => {
      const h = new Histogram();
      h.add(ms * 1000);
      return h.toJSON();
    };
    const w3 = (workload: 'W3' | 'W3-pinned', target: Sample['target'], gapMs: number) => sample({ workload, target, tokenIntervalMs: 100, concurrency: 2000, proxyCpuUs: target === 'direct' ? null : 1, gap: at(gapMs) });
    const judge = (samples: Sample[], pinnedMissing?: string) => checks(summarize(samples), [], true, samples, [], [], pinnedMissing).find((c) => c.what.includes('inter-frame'))!;
    const judged = judge([w3('W3', 'direct', 300), w3('W3', 'baton', 400), w3('W3-pinned', 'direct', 120), w3('W3-pinned', 'baton', 125)]);
    expect(judged.met).toBe(true);
    expect(judged.workload).toBe('W3-pinned');
    expect(judged.value).toMatch(/^5\.\d+ ms at 2000 streams$/);
    const busy = { ...w3('W3-pinned', 'direct', 400), workersCpuUs: 610_000, loadgenCpuUs: 330_000 };
    const saturated = judge([busy, w3('W3-pinned', 'baton', 300)]);
    expect(saturated.met).toBeNull();
    // What filled CPU 0, from direct's own rounds (1 s of wall time each here).
    expect(saturated.value).toContain('CPU 0 is saturated: the workers used 0.61 of a core and the load generator 0.33');
    // Without the pinned layout the shared figure is shown, not judged.
    const shared = judge([w3('W3', 'direct', 120), w3('W3', 'baton', 125)], 'one CPU only');
    expect(shared.met).toBeNull();
    expect(shared.value).toMatch(/pinned layout not run: one CPU only; shared layout: 5\.\d+ ms, not judged/);
  });

  it('judges W2 throughput against nginx on the pinned layout, W1 and W2 CPU on the shared one, one verdict line each', () => {
    const w = (workload: Sample['workload'], target: Sample['target'], tokens: number, cpu: number) => sample({ workload, target, tokens, proxyCpuUs: target === 'direct' ? null : cpu });
    const samples = [
      w('W1', 'bare', 1000, 10_000), w('W1', 'nginx', 1000, 6_000), w('W1', 'baton', 1000, 11_000),
      w('W2', 'bare', 1000, 10_000), w('W2', 'nginx', 2000, 2_000), w('W2', 'baton', 1000, 9_000),
      w('W2-pinned', 'bare', 1000, 10_000), w('W2-pinned', 'nginx', 1000, 2_000), w('W2-pinned', 'baton', 950, 9_000),
    ];
    const cs = checks(summarize(samples), [], true, samples);
    const by = (what: string) => cs.find((c) => c.what.startsWith(what))!;
    expect(by('CPU per request, Baton / bare proxy').value).toBe('1.10×');
    expect(by('CPU per request, Baton / bare proxy').met).toBe(true);
    expect(by('CPU per request, Baton / nginx').met).toBe(false); // 1.83 > 1.8
    const tp = by('throughput');
    expect(tp.workload).toBe('W2-pinned');
    expect(tp.value).toBe('0.95×');
    expect(tp.met).toBe(true);
    const lines = verdictLines(cs);
    expect(lines).toHaveLength(cs.length);
    expect(lines.find((l) => l.includes('throughput'))).toMatch(/^verdict: met +W2-pinned +throughput \(tokens\/s\), Baton \/ nginx, pinned layout: 0\.95× \(target ≥ 0\.9×\)$/);
    expect(lines.find((l) => l.includes('Baton / nginx, each proxy alone, shared'))).toMatch(/^verdict: MISSED/);
  });

  it('places the pinned layout: the proxy on CPU 1, the rest on the others', () => {
    expect(pinningFor(2, true)).toEqual({ proxy: '1', others: '0', all: '0-1' });
    expect(pinningFor(8, true)).toEqual({ proxy: '1', others: '0,2-7', all: '0-7' });
    expect(pinningFor(1, true)).toEqual({ missing: 'one CPU only' });
    expect(pinningFor(4, false)).toEqual({ missing: 'taskset is not available' });
  });

  it('ratio is null when either side is missing or zero', () => {
    expect(ratio(2, 4)).toBe(0.5);
    expect(ratio(2, 0)).toBeNull();
    expect(ratio(null, 4)).toBeNull();
    expect(ratio(2, undefined)).toBeNull();
  });

  it('targets without nginx are reported as not judged, not as met', () => {
    const fs = summarize([sample({ target: 'bare', proxyCpuUs: 10_000 }), sample({ target: 'baton', proxyCpuUs: 11_000 })]);
    const cs = checks(fs, [], false);
    expect(cs.find((c) => c.what.includes('bare') && c.workload === 'W1')!.met).toBe(true);
    const vsNginx = cs.find((c) => c.what.includes('nginx') && c.workload === 'W1')!;
    expect(vsNginx.met).toBeNull();
    expect(vsNginx.value).toBe('nginx absent');
  });
});

describe('W4 migration gap', () => {
  it('pairs each continuation with its failed attempt and the client view of its request', () => {
    const g = migrationGap({
      tokenIntervalMs: 5,
      kills: 1,
      records: [
        { rid: upstreamRid('a', 1), failedUs: 1000, createdUs: 1100, sentUs: 1400, firstChunkUs: 3400 },
        { rid: upstreamRid('b', 1), failedUs: 1000, createdUs: 1200, sentUs: 1900, firstChunkUs: 3900 },
        { rid: upstreamRid('c', 1), failedUs: null, createdUs: 900, sentUs: 1000, firstChunkUs: null },
      ],
      client: new Map([
        ['a', { ok: true, maxWaitUs: 3000 }],
        ['b', { ok: true, maxWaitUs: 2600 }],
      ]),
      traceGapsMs: [0, 1],
      requests: 10,
      ok: 10,
      errors: 0,
      errorSamples: [],
    });
    expect(g.continuations).toBe(3);
    expect(g.matched).toBe(2);
    expect(g.gapUs.p50).toBe(400);
    expect(g.gapUs.p99).toBe(900);
    expect(g.loopUs).toEqual({ p50: 100, p99: 200 });
    expect(g.connectUs).toEqual({ p50: 300, p99: 700 });
    expect(g.survivorTtftUs.p50).toBe(2000);
    expect(g.stallMinusTtftUs).toEqual({ p50: 600, p99: 1000, n: 2 });
    expect(g.traceGapMs).toEqual({ p50: 0, p99: 1, n: 2 });
    const w4 = checks([], [g], true).filter((c) => c.workload === 'W4');
    expect(w4).toHaveLength(1);
    expect(w4[0]!.met).toBe(true);
    expect(w4[0]!.what).toContain('paced at 5 ms');
    // The same part with the router's priority raised is a diagnostic: shown, never judged.
    const raised = migrationGap({ tokenIntervalMs: 0, nice: -15, kills: 1, records: [{ rid: upstreamRid('a', 1), failedUs: 0, createdUs: 10, sentUs: 9000, firstChunkUs: null }], client: new Map(), traceGapsMs: null, requests: 1, ok: 1, errors: 0, errorSamples: [] });
    const shown = checks([], [raised], true).find((c) => c.workload === 'W4')!;
    expect(shown.met).toBeNull();
    expect(shown.what).toBe('p99 gap, failure detected → continuation sent (workers as fast as they go, box saturated, router at nice -15)');
    expect(shown.value).toMatch(/^9\.00 ms \(a diagnostic, not judged/);
  });

  it('reads the failed-attempt → continuation gap from trace rows', () => {
    const rows = [
      { kind: 'attempt', request_id: 'x', attempt: 1, started_at: 105, ended_at: 200, outcome: 'finished' },
      { kind: 'attempt', request_id: 'x', attempt: 0, started_at: 90, ended_at: 103, outcome: 'failed' },
      { kind: 'request', request_id: 'x' },
      { kind: 'attempt', request_id: 'y', attempt: 0, started_at: 90, ended_at: 103, outcome: 'finished' },
    ];
    expect(traceGaps(rows.map((r) => JSON.stringify(r)).join('\n'))).toEqual([2]);
  });

  it('finds the rid in an upstream body and the attempt a continuation follows', () => {
    expect(ridOf(Buffer.from('{"rid":"W4-1-7~m1","input_ids":[1]}'))).toBe('W4-1-7~m1');
    expect(ridOf('{"input_ids":[1]}')).toBeNull();
    // A continuation's body is a string; vLLM's key is request_id, and the last occurrence counts.
    expect(ridOf('{"rid":"a","text":"é","rid":"W4-1-7~m2~00ff"}')).toBe('W4-1-7~m2~00ff');
    expect(ridOf('{"request_id":"W4-2-1~m1~0a","token_ids":[1]}')).toBe('W4-2-1~m1~0a');
    expect(ridOf('{"rid":"unterminated')).toBeNull();
    // Attempt 0's body: the client's bytes (with the client's own rid) and Baton's rid appended.
    expect(ridOf(Buffer.from('{"rid":"W4-1-7","input_ids":[1],"stream":true,"rid":"W4-1-7~m0","stream":true}'))).toBe('W4-1-7~m0');
    const r0 = upstreamRid('r', 0);
    const r1 = upstreamRid('r', 1);
    const r3 = upstreamRid('r', 3);
    expect(previousAttemptKey(r1)).toBe(attemptKey(r0));
    expect(previousAttemptKey(r3)).toBe(attemptKey(upstreamRid('r', 2)));
    expect(previousAttemptKey(r0)).toBeNull();
    expect(previousAttemptKey('r')).toBeNull();
  });
});

describe('side-by-side runs', () => {
  const run = (round: number, baton: number, bare: number, nginx: number | null): SideBySideRun => ({
    workload: 'W1',
    round,
    targets: [
      { target: 'bare', cpuUs: bare * 100, ok: 100, errors: 0 },
      { target: 'baton', cpuUs: baton * 200, ok: 200, errors: 0 },
      ...(nginx === null ? [] : [{ target: 'nginx' as const, cpuUs: nginx * 50, ok: 50, errors: 0 }]),
    ],
  });

  it('gives Baton / bare and Baton / nginx per round, their medians, and CPU per request pooled over the rounds', () => {
    const [c] = sideBySide([run(2, 300, 250, 150), run(1, 220, 200, 100), run(3, 260, 260, 130)]);
    expect(c!.vsBareByRound).toEqual([1.1, 1.2, 1]);
    expect(c!.vsBareMedian).toBeCloseTo(1.1);
    expect(c!.vsNginxByRound).toEqual([2.2, 2, 2]);
    expect(c!.vsNginxMedian).toBe(2);
    // The Node floor: the bare proxy / nginx, 1.67, 2 and 2 by round.
    expect(c!.bareVsNginxMedian).toBe(2);
    // Baton: (220 + 300 + 260) * 200 / 600 requests.
    expect(c!.usPerRequest.find((q) => q.target === 'baton')!.us).toBeCloseTo(260);
    expect(c!.usPerRequest.find((q) => q.target === 'bare')!.us).toBeCloseTo((250 + 200 + 260) / 3);
  });

  it('leaves nginx out where it did not run, and a round without requests out of the ratios', () => {
    const empty: SideBySideRun = { workload: 'W1', round: 4, targets: [{ target: 'baton', cpuUs: 5, ok: 0, errors: 3 }, { target: 'bare', cpuUs: 5, ok: 10, errors: 0 }] };
    const [c] = sideBySide([run(1, 220, 200, null), empty]);
    expect(c!.vsBareByRound).toEqual([1.1]);
    expect(c!.vsNginxByRound).toEqual([]);
    expect(c!.vsNginxMedian).toBeNull();
    expect(c!.bareVsNginxMedian).toBeNull();
  });

  it('judges the CPU targets on the side-by-side runs when the run has them, the ratio alone shown beside', () => {
    const w = (workload: Sample['workload'], target: Sample['target'], cpu: number) => sample({ workload, target, tokens: 1000, proxyCpuUs: cpu });
    // Alone: Baton 1.5x bare, 2.5x nginx (both missed). Side by side: 1.1x and 1.75x by median.
    const samples = [w('W1', 'bare', 10_000), w('W1', 'nginx', 6_000), w('W1', 'baton', 15_000)];
    const side = [run(1, 220, 200, 125), run(2, 330, 300, 150), run(3, 240, 200, 160)];
    const cs = checks(summarize(samples), [], true, samples, [], [], undefined, side);
    const bare = cs.find((c) => c.workload === 'W1' && c.what.includes('bare'))!;
    const nginx = cs.find((c) => c.workload === 'W1' && c.what.includes('nginx'))!;
    expect(bare.what).toBe('CPU per request, Baton / bare proxy, side by side (median of 3 rounds), shared layout');
    expect(bare.value).toBe('1.10× (alone: 1.50×)');
    expect(bare.met).toBe(true);
    // With the bare proxy's own ratio to nginx (1.6, 2, 1.25 by round): the floor Baton sits on.
    expect(nginx.value).toBe('1.76× (alone: 2.50×; the bare Node proxy / nginx 1.60×)');
    expect(nginx.met).toBe(true);
    // Without side-by-side runs (or without nginx in them) the runs alone are judged, and say so.
    const aloneOnly = checks(summarize(samples), [], true, samples);
    expect(aloneOnly.find((c) => c.workload === 'W1' && c.what.includes('bare'))!).toMatchObject({ what: 'CPU per request, Baton / bare proxy, each proxy alone, shared layout', value: '1.50×', met: false });
    const noNginx = checks(summarize(samples), [], true, samples, [], [], undefined, [run(1, 220, 200, null)]);
    expect(noNginx.find((c) => c.workload === 'W1' && c.what.includes('nginx'))!).toMatchObject({ value: '2.50×', met: false });
  });
});

describe('load generator parsing', () => {
  it('reads completion_tokens from the last chunk of a stream', () => {
    const tail = Buffer.from('data: {"output_ids":[1],"meta_info":{"completion_tokens":31}}\n\ndata: {"meta_info":{"completion_tokens": 32,"x":1}}\n\ndata: [DONE]\n\n');
    expect(lastCompletionTokens(tail)).toBe(32);
    expect(lastCompletionTokens(Buffer.from('data: [DONE]\n\n'))).toBe(-1);
  });

  it('counts the SSE frames that end in each chunk, however the stream is cut', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ unit: fc.constantFrom('a', '{', '"', ':', '\n'), maxLength: 12 }).map((t) => t.replace(/\n+/g, '\n')), { minLength: 1, maxLength: 8 }), fc.array(fc.nat(), { maxLength: 10 }), (bodies, cuts) => {
        // Frames whose payload holds no blank line (as SSE's never do), then [DONE].
        const frames = [...bodies.map((b) => `data: ${b.replace(/\n$/, '')}\n\n`), 'data: [DONE]\n\n'];
        const stream = Buffer.from(frames.join(''));
        const at = [...new Set(cuts.map((c) => c % stream.length))].sort((a, b) => a - b);
        let lf = false;
        let total = 0;
        let from = 0;
        for (const c of [...at, stream.length]) {
          if (c <= from) continue;
          const chunk = stream.subarray(from, c);
          total += frameEnds(chunk, lf);
          lf = endsWithLoneLf(chunk);
          from = c;
        }
        expect(total).toBe(frames.length);
      }),
      { numRuns: 300 },
    );
  });

  it('builds bodies with the budget, ignore_eos and, for W2, every logprob option', () => {
    const W = workloads({ streams: 10, w3IntervalMs: 20 });
    const w2 = JSON.parse(requestBody(W.W2, 3, 'r'));
    expect(w2).toMatchObject({ rid: 'r', stream: true, return_logprob: true, logprob_start_len: 0, top_logprobs_num: 5, sampling_params: { max_new_tokens: 256, ignore_eos: true } });
    expect(w2.input_ids).toHaveLength(512);
    const w1 = JSON.parse(requestBody(W.W1, 3, 'r'));
    expect(w1.return_logprob).toBeUndefined();
    expect(w1.input_ids).toHaveLength(64);
    expect(promptIds(1, 8)).not.toEqual(promptIds(2, 8));
    expect(promptIds(1, 64).every((t) => t >= 3 && t < 32000)).toBe(true);
  });
});

describe('nginx config', () => {
  const conf = nginxConfig({ dir: '/tmp/x', port: 8123, upstreams: ['http://127.0.0.1:9001', 'http://127.0.0.1:9002'], workerConnections: 5000 });

  it('streams: buffering off, HTTP/1.1 keep-alive to the workers', () => {
    expect(conf).toMatch(/proxy_buffering off;/);
    expect(conf).toMatch(/proxy_http_version 1\.1;/);
    expect(conf).toMatch(/proxy_set_header Connection "";/);
    expect(conf).toMatch(/keepalive \d+;/);
  });

  it('runs in the foreground on loopback, one worker process, everything under its temp dir', () => {
    expect(conf).toMatch(/daemon off;/);
    expect(conf).toMatch(/worker_processes 1;/);
    expect(conf).toMatch(/listen 127\.0\.0\.1:8123;/);
    expect(conf).toMatch(/server 127\.0\.0\.1:9001 max_fails=0;/);
    expect(conf).toMatch(/server 127\.0\.0\.1:9002 max_fails=0;/);
    expect(conf).toMatch(/worker_connections 5000;/);
    for (const line of conf.split('\n').filter((l) => /_path |pid |error_log /.test(l))) expect(line).toContain('/tmp/x/');
  });

  it('refuses an empty upstream list', () => {
    expect(() => nginxConfig({ dir: '/tmp/x', port: 1, upstreams: [], workerConnections: 10 })).toThrow();
  });
});

describe('/proc readings and the docs splice', () => {
  it('parses utime + stime, even with spaces and parens in the command name', () => {
    const stat = '1234 (node (x) y) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1';
    expect(parseStatCpu(stat)).toBe((250 + 50) * 10_000);
    expect(parseStatusRss('Name:\tnode\nVmRSS:\t  2048 kB\n')).toBe(2048 * 1024);
    expect(parseStatusRss('Name:\tzombie\n')).toBeNull();
  });

  it('replaces only the marked section of docs/benchmarks.md', () => {
    const doc = '# B\n\nprose\n\n<!-- bench:begin -->\nold\n<!-- bench:end -->\n\nmore prose\n';
    const out = spliceIntoDoc(doc, 'new table');
    expect(out).toBe('# B\n\nprose\n\n<!-- bench:begin -->\nnew table\n<!-- bench:end -->\n\nmore prose\n');
    expect(spliceIntoDoc('# B\n', 't')).toBe('# B\n\n<!-- bench:begin -->\nt\n<!-- bench:end -->\n');
  });
});

describe('vLLM workloads', () => {
  const W = workloads({ streams: 10, w3IntervalMs: 20 });

  it('are SGLang\'s W1, W2 and W4 in size, in vLLM\'s format, and there is no vLLM W3', () => {
    expect(Object.keys(VLLM_WORKLOADS).sort()).toEqual(['W1', 'W2', 'W4']);
    for (const [base, name] of Object.entries(VLLM_WORKLOADS)) {
      const v = W[name!];
      const s = W[base as 'W1'];
      expect(v.format).toBe('vllm');
      expect(s.format).toBe('sglang');
      expect(formatOf(v.name)).toBe('vllm');
      expect(formatOf(s.name)).toBe('sglang');
      expect(baseOf(v.name)).toBe(base);
      expect({ p: v.promptTokens, n: v.newTokens, c: v.concurrency, l: v.logprobs, t: v.tokenIntervalMs }).toEqual({ p: s.promptTokens, n: s.newTokens, c: s.concurrency, l: s.logprobs, t: s.tokenIntervalMs });
    }
    expect(generatePath(W['W1-vllm'])).toBe('/inference/v1/generate');
    expect(generatePath(W.W1)).toBe('/generate');
  });

  it('have pinned-layout variants of W1, W2, W3 (and vLLM\'s W1, W2): the same requests under their own names', () => {
    for (const name of ['W1-pinned', 'W2-pinned', 'W3-pinned', 'W1-vllm-pinned', 'W2-vllm-pinned'] as const) {
      const p = W[name];
      const s = W[name.replace(/-pinned$/, '') as 'W1'];
      expect(p.name).toBe(name);
      expect(layoutOf(p.name)).toBe('pinned');
      expect(layoutOf(s.name)).toBe('shared');
      expect(formatOf(p.name)).toBe(s.format);
      expect(baseOf(p.name)).toBe(baseOf(s.name));
      expect({ ...p, name: s.name, title: s.title }).toEqual(s);
    }
  });

  it('builds vLLM\'s request: request_id, token_ids, an explicit max_tokens with ignore_eos, a stream that ends with usage', () => {
    const w1 = JSON.parse(requestBody(W['W1-vllm'], 3, 'r-3'));
    expect(w1).toEqual({
      request_id: 'r-3',
      token_ids: promptIds(3, 64),
      sampling_params: { max_tokens: 32, ignore_eos: true, temperature: 0 },
      stream: true,
      stream_options: { include_usage: true },
    });
    // No SGLang key leaks into a vLLM body.
    for (const k of ['rid', 'input_ids', 'return_logprob', 'top_logprobs_num']) expect(w1).not.toHaveProperty(k);
    const w2 = JSON.parse(requestBody(W['W2-vllm'], 3, 'r'));
    expect(w2.sampling_params).toEqual({ max_tokens: 256, ignore_eos: true, temperature: 0, logprobs: 5 });
    expect(w2.token_ids).toHaveLength(512);
    // The same prompt as SGLang's request of the same number.
    expect(w2.token_ids).toEqual(JSON.parse(requestBody(W.W2, 3, 'r')).input_ids);
  });

  it('reads completion_tokens from vLLM\'s usage frame at the end of a stream', () => {
    const tail = Buffer.from(
      'data: {"request_id":"generate-tokens-r","usage":null,"choices":[{"index":0,"finish_reason":"length","token_ids":[17323]}]}\n\n' +
        'data: {"request_id":"generate-tokens-r","usage":{"prompt_tokens":64,"total_tokens":96,"completion_tokens":32},"choices":[]}\n\ndata: [DONE]\n\n',
    );
    expect(lastCompletionTokens(tail)).toBe(32);
  });

  it('the probe finds the attempt in a vLLM body (request_id), not in an abort\'s request_ids', () => {
    const r1 = upstreamRid('W4-vllm-0-1-7', 1);
    expect(ridOf(Buffer.from(JSON.stringify({ request_id: r1, token_ids: [1, 2], sampling_params: { max_tokens: 3 }, stream: true })))).toBe(r1);
    expect(previousAttemptKey(r1)).toBe(attemptKey(upstreamRid('W4-vllm-0-1-7', 0)));
    expect(ridOf(Buffer.from(JSON.stringify({ request_ids: [`generate-tokens-${r1}`] })))).toBeNull();
    // SGLang's rid first, as before.
    expect(ridOf('{"rid":"a~m0~0123456789abcdef","input_ids":[1]}')).toBe('a~m0~0123456789abcdef');
  });

  it('labels vLLM\'s W4 gaps and judges them apart from SGLang\'s', () => {
    const g = (format: 'sglang' | 'vllm') =>
      migrationGap({ format, tokenIntervalMs: 0, kills: 1, records: [{ rid: upstreamRid('a', 1), failedUs: 0, createdUs: 10, sentUs: 20, firstChunkUs: 30 }], client: new Map(), traceGapsMs: null, requests: 1, ok: 1, errors: 0, errorSamples: [] });
    const gaps = [g('sglang'), g('vllm')];
    expect(gapLabel(gaps[1]!)).toMatch(/^vLLM workers, /);
    expect(gapLabel(gaps[0]!)).not.toContain('vLLM');
    expect(checks([], gaps, true).map((c) => c.workload)).toEqual(['W4', 'W4-vllm']);
  });

  it('judges SGLang\'s targets only for the workloads that ran', () => {
    const samples = [
      sample({ workload: 'W1-vllm', target: 'bare', proxyCpuUs: 10_000 }),
      sample({ workload: 'W1-vllm', target: 'baton', proxyCpuUs: 25_000 }),
    ];
    const fs = summarize(samples);
    expect(checks(fs, [], true, samples).filter((c) => c.workload !== 'W4')).toEqual([]);
    const r = ratios(fs, samples).find((q) => q.versus === 'bare')!;
    expect(r.workload).toBe('W1-vllm');
    expect(r.cpuPerRequest).toBeCloseTo(2.5);
  });
});

describe('other Baton builds side by side (--compare-ref)', () => {
  const REF = refTargetName('6f100f1667e23ba0866112025ef8821d50b9881c');
  // Three rounds; bare costs 100 µs a request throughout, Baton 130/140/120, the other build 125/130/130.
  const cpu: Record<string, number[]> = { bare: [100, 100, 100], baton: [130, 140, 120], [REF]: [125, 130, 130], nginx: [50, 50, 50] };
  const samples: Sample[] = [];
  for (let round = 1; round <= 3; round++) {
    samples.push(sample({ target: 'direct', round }));
    for (const [t, us] of Object.entries(cpu)) samples.push(sample({ target: t as TargetName, round, proxyCpuUs: us[round - 1]! * 100 }));
  }
  const fs = summarize(samples);

  it('names the build by its commit, and tags its request ids like Baton\'s (same length, no escaping)', () => {
    expect(REF).toBe('baton@6f100f1');
    expect(isBatonRef(REF)).toBe(true);
    expect(isBatonRef('baton')).toBe(false);
    expect(targetLabel(REF)).toBe('Baton@6f100f1');
    expect(targetLabel('bare')).toBe('bare Node proxy');
    expect(ridTag(REF)).toHaveLength(ridTag('baton').length);
    expect(ridTag(REF)).toMatch(/^[A-Za-z0-9._-]+$/);
    expect(() => refTargetName('HEAD')).toThrow();
  });

  it('reads --compare-ref as comma-separated revisions, each once, never an option', () => {
    expect(parseRefs(undefined)).toEqual([]);
    expect(parseRefs('6f100f1, HEAD,6f100f1')).toEqual(['6f100f1', 'HEAD']);
    expect(() => parseRefs('--output=x')).toThrow();
    expect(() => parseRefs(' , ')).toThrow();
  });

  it('puts the other build right after Baton in the figures, and gives it ratios of its own', () => {
    expect(fs.map((f) => f.target)).toEqual(['direct', 'bare', 'nginx', 'baton', REF]);
    const rs = ratios(fs, samples);
    const mine = rs.find((q) => q.target === 'baton' && q.versus === 'bare')!;
    const theirs = rs.find((q) => q.target === REF && q.versus === 'bare')!;
    expect(mine.cpuPerRequestByRound.map((v) => +v.toFixed(2))).toEqual([1.3, 1.4, 1.2]);
    expect(theirs.cpuPerRequestByRound.map((v) => +v.toFixed(2))).toEqual([1.25, 1.3, 1.3]);
    // SGLang's targets are judged on this checkout's Baton only.
    expect(checks(fs, [], true, samples).find((c) => c.workload === 'W1' && c.what.startsWith('CPU per request, Baton / bare'))!.value).toBe('1.30×');
  });

  it('compares the builds round by round, and checks this checkout against the other within 5 %', () => {
    const [c] = buildComparisons(fs, samples);
    expect(c!.ref).toBe(REF);
    expect(c!.byRound.map((v) => +v.toFixed(3))).toEqual([1.04, 1.077, 0.923]);
    expect(c!.median).toBeCloseTo(1.04);
    expect(c!.pooled).toBeCloseTo(390 / 385);
    expect(c!.ratioChange).toBeCloseTo(1.3 / 1.3);
    expect(c!.builds.map((b) => b.target)).toEqual(['baton', REF]);
    expect(c!.builds[1]!.vsNginxMedian).toBeCloseTo(2.6);
    const check = checks(fs, [], true, samples).find((q) => q.what.includes('Baton@6f100f1'))!;
    expect(check).toMatchObject({ workload: 'W1', limit: '≤ 1.05×', value: '1.04×', met: true });
    expect(check.what).toContain('median of 3 rounds');
    // 10 % more CPU in every round is a regression.
    const worse = samples.map((s) => (s.target === 'baton' ? { ...s, proxyCpuUs: cpu[REF]![s.round - 1]! * 110 } : s));
    expect(checks(summarize(worse), [], true, worse).find((q) => q.what.includes('Baton@6f100f1'))!.met).toBe(false);
  });

  it('shows both builds in the side-by-side table, the main ratios staying this checkout\'s', () => {
    const info: RunInfo = {
      date: 'd',
      mode: 'quick',
      machine: { cores: 2, cpu: 'c', memoryGiB: 1, node: 'v20', os: 'linux', nginx: null },
      loadAverage: { start: [1, 1, 1], end: [1, 1, 1] },
      settings: {},
      workloadTitles: { W1: 'short' },
      compareRefs: [{ target: REF, rev: '6f100f1', sha: '6f100f1667e23ba0866112025ef8821d50b9881c' }],
    };
    const md = markdown(info, fs, [], true, samples);
    expect(md).toContain('| W1 short | Baton@6f100f1 |');
    expect(md).toContain('Baton@6f100f1 = 6f100f1667e23ba0866112025ef8821d50b9881c');
    expect(md).toContain('| W1 | Baton (this checkout) | 130 | 1.30, 1.40, 1.20 (1.30×) |');
    expect(md).toContain('| W1 | Baton@6f100f1 | 128 | 1.25, 1.30, 1.30 (1.30×) | 2.60× | 1.04, 1.08, 0.92 (1.04×) | +0.0 % |');
    const ratioRows = md.split('\n').filter((l) => /^\| W1 \| (nginx|bare Node proxy) \|/.test(l));
    expect(ratioRows).toHaveLength(2);
  });

  it('adds the paired runs (one load shared request by request) as a second measure, with a check of its own', () => {
    const pairs = [1, 2, 3].map((round) => ({ workload: 'W1' as const, round, ref: REF, baton: { cpuUs: [106, 99, 104][round - 1]! * 1000, ok: 1000, errors: 0 }, other: { cpuUs: 100 * 500, ok: 500, errors: 0 } }));
    const [c] = buildComparisons(fs, samples, pairs);
    // Per request: Baton 106, 99, 104 µs; the other build 100 µs each round.
    expect(c!.pairedByRound.map((v) => +v.toFixed(2))).toEqual([1.06, 0.99, 1.04]);
    expect(c!.pairedMedian).toBeCloseTo(1.04);
    const paired = checks(fs, [], true, samples, [], pairs).find((q) => q.what.includes('paired'))!;
    expect(paired).toMatchObject({ value: '1.04×', met: true });
    expect(buildComparisons(fs, samples)[0]!.pairedByRound).toEqual([]);
    expect(checks(fs, [], true, samples).some((q) => q.what.includes('paired'))).toBe(false);
  });

  it('alternates the builds\' order every other round and leaves the other targets in place', () => {
    const t = (name: TargetName) => ({ name });
    const order = [t('direct'), t('baton'), t(REF), t('bare')];
    expect(alternateBuilds(order, 1).map((x) => x.name)).toEqual(['direct', 'baton', REF, 'bare']);
    expect(alternateBuilds(order, 2).map((x) => x.name)).toEqual(['direct', REF, 'baton', 'bare']);
  });

  it('the CLI: --format, and --compare-ref with its rounds and warm-up', () => {
    const o = optionsFromArgv(['--quick'])!;
    expect(o.formats).toEqual(['sglang', 'vllm']);
    expect(o.compareRefs).toEqual([]);
    expect(optionsFromArgv(['--format', 'vllm'])!.formats).toEqual(['vllm']);
    expect(() => optionsFromArgv(['--format', 'grpc'])).toThrow(/--format/);
    const c = optionsFromArgv(['--quick', '--compare-ref', '6f100f1'])!;
    expect(c).toMatchObject({ compareRefs: ['6f100f1'], rounds: 1, warmupMs: 700, compareRounds: 3, compareWarmupMs: 6000 });
    expect(optionsFromArgv(['--quick', '--compare-ref', '6f100f1', '--rounds', '2', '--warmup-ms', '1000'])).toMatchObject({ compareRounds: 2, compareWarmupMs: 1000 });
    expect(() => optionsFromArgv(['--compare-ref', '6f100f1', '--targets', 'direct,bare'])).toThrow(/baton/);
    expect(() => optionsFromArgv(['--compare-ref', '6f100f1', '--format', 'vllm'])).toThrow(/sglang/);
  });

  it('the CLI: --only openai runs the OpenAI front row, alone or beside workloads; by default it runs', () => {
    expect(optionsFromArgv(['--quick'])).toMatchObject({ workloads: ['W1', 'W2', 'W3', 'W4'], openai: true });
    expect(optionsFromArgv(['--only', 'openai'])).toMatchObject({ workloads: [], openai: true });
    expect(optionsFromArgv(['--only', 'W1,openai'])).toMatchObject({ workloads: ['W1'], openai: true });
    expect(optionsFromArgv(['--only', 'W2'])).toMatchObject({ workloads: ['W2'], openai: false });
    expect(() => optionsFromArgv(['--only', 'chat'])).toThrow(/openai/);
  });

  it('the CLI: --layout and --pinned-rounds', () => {
    expect(optionsFromArgv(['--quick'])).toMatchObject({ layouts: ['shared', 'pinned'], pinnedRounds: 1 });
    expect(optionsFromArgv([])).toMatchObject({ layouts: ['shared', 'pinned'], pinnedRounds: 2 });
    expect(optionsFromArgv(['--layout', 'pinned', '--pinned-rounds', '3'])).toMatchObject({ layouts: ['pinned'], pinnedRounds: 3 });
    expect(optionsFromArgv(['--layout', 'shared'])!.layouts).toEqual(['shared']);
    expect(() => optionsFromArgv(['--layout', 'taskset'])).toThrow(/--layout/);
  });
});
