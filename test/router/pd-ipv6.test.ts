// P/D over IPv6: a prefill server whose URL has an IPv6 host. SGLang's decode reaches the
// prefill's bootstrap server at `f"{bootstrap_host}:{bootstrap_port}"` (decode.py), so the host
// must come in brackets, as the gateway (`Url::host_str`) and mini_lb
// (`maybe_wrap_ipv6_address`) send it; the simulated decode builds the address the same way
// (sim/pd.ts pullKv). Real processes on ::1.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { runModel } from '../../sim/model.ts';
import { spawnRouter, traceRows, type RouterProc } from './harness/procs.ts';

let cluster: SimCluster;
let router: RouterProc;

beforeAll(async () => {
  cluster = await startCluster({ workers: 2, roles: ['prefill', 'decode'], host: '::1', port: 0, tokenIntervalMs: 1 });
  const [prefill, decode] = cluster.workers();
  expect(prefill!.url).toMatch(/^http:\/\/\[::1\]:\d+$/);
  router = await spawnRouter(['--pd-disaggregation', '--prefill', prefill!.url, String(prefill!.bootstrapPort), '--decode', decode!.url, '--migration-limit', '1']);
}, 60_000);

afterAll(async () => {
  await router?.stop();
  await cluster?.stop();
});

describe('a prefill server on an IPv6 address', () => {
  it('is paired: the decode reaches its bootstrap server at [host]:port, the answer is exact on the first pair', async () => {
    const ids = Array.from({ length: 24 }, (_, j) => 100 + j * 37);
    const params = { max_new_tokens: 12, ignore_eos: true };
    const res = await fetch(`${router.url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ rid: 'pd6-0', input_ids: ids, sampling_params: params }) });
    const json = (await res.json()) as Record<string, unknown>;
    expect(res.status, JSON.stringify(json).slice(0, 400)).toBe(200);
    expect(json.output_ids).toEqual(runModel(ids, params).output_ids);
    const rows = await traceRows(router.url, 'request=pd6-0&kind=attempt');
    expect(rows.map((r) => [r.outcome, r.error_evidence ?? null])).toEqual([['finished', null]]);
  }, 30_000);
});
