// `baton chaos --discovery k8s`: the verdict's drain checks (chaos/k8s.ts drainViolations), the
// pod schedule's truth, and the CLI's refusals. The campaign itself is run by hand (its 120 s
// verdict is in the report); these hold the parts a campaign's verdict rests on.
import { afterAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { drainViolations, K8sChaos, type PodWindow } from '../../chaos/k8s.ts';
import type { SimCluster } from '../../sim/cluster.ts';

const w = (o: Partial<PodWindow> = {}): PodWindow => ({ url: 'http://127.0.0.11:9', kind: 'pod_delete', start: 1_000, drainSeenAt: 1_100, killedAt: 7_000, end: 8_000, ...o });
const att = (o: Partial<{ worker: string; started_at: number; ended_at: number; outcome: string; error_kind: string | null; request_id: string }>) => ({ worker: 'http://127.0.0.11:9', started_at: 500, ended_at: 3_000, outcome: 'drained', error_kind: 'drain', request_id: 'r', ...o });

describe('drainViolations', () => {
  it('accepts streams moved off before the kill and work started before the drain was seen', () => {
    expect(drainViolations([w()], [att({}), att({ started_at: 1_120, ended_at: 2_000, outcome: 'ok', error_kind: null })], 1_000).violations).toEqual([]);
  });
  it('flags an attempt started on a worker the router showed draining, and one cut by the kill', () => {
    const d = drainViolations([w()], [att({ request_id: 'new', started_at: 3_000, ended_at: 4_000, outcome: 'ok', error_kind: null }), att({ request_id: 'cut', ended_at: 7_005, outcome: 'failed', error_kind: 'stream_broken' })], 1_000);
    expect(d.violations).toHaveLength(2);
    expect(d.violations[0]).toMatch(/^new: an attempt started on draining pod/);
    expect(d.violations[1]).toMatch(/^cut: an attempt on .* was cut by the pod's kill \(stream_broken\)/);
    expect(d.drainLagMs).toEqual([100]);
  });
  it('counts apart a drain the router learned of too late to move anything, and ignores evictions', () => {
    const d = drainViolations([w({ drainSeenAt: 6_500 }), w({ drainSeenAt: null }), w({ kind: 'pod_evict' })], [att({ ended_at: 7_005, outcome: 'failed', error_kind: 'stream_broken' })], 1_000);
    expect(d).toEqual({ violations: [], lateDrains: 2, drainLagMs: [] });
  });
});

describe('K8sChaos', () => {
  let k: K8sChaos | null = null;
  afterAll(async () => {
    await k?.close();
  });
  it('makes one Running, Ready pod per worker at its address: the truth discovery must reach', async () => {
    const cluster = {} as SimCluster;
    k = await K8sChaos.start([{ url: 'http://127.0.0.11:4000', host: '127.0.0.11', cluster, local: 0 }, { url: 'http://127.0.0.12:4000', host: '127.0.0.12', cluster, local: 0 }], 1, () => undefined);
    expect([...k.truth()].sort()).toEqual(['http://127.0.0.11:4000', 'http://127.0.0.12:4000']);
    k.fake.evictPod('chaos-worker-0-0', 'chaos');
    k.fake.deletePod('chaos-worker-1-0', 30, 'chaos');
    expect([...k.truth()]).toEqual([]);
  });
});

describe('baton chaos --discovery', () => {
  it.each([
    [['--discovery', 'consul'], /--discovery must be k8s, got 'consul'/],
    [['--discovery', 'k8s', '--format', 'vllm'], /--discovery k8s runs SGLang workers only/],
  ])('refuses %j', (args, msg) => {
    const r = spawnSync(process.execPath, ['bin/baton.js', 'chaos', ...args], { encoding: 'utf8', cwd: `${__dirname}/../..` });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(msg);
  });
});
