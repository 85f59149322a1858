// The policies' names (`--policy`, `--prefill-policy`, `--decode-policy`) and how a P/D router's
// two sides pick theirs. Import-free, so the config reads them without pulling the policies in
// (the hub of `baton serve --router` reads a config file too).

export const POLICY_NAMES = ['least_inflight', 'round_robin', 'power_of_two', 'cache_aware'] as const;
export type PolicyName = (typeof POLICY_NAMES)[number];

/**
 * The policies of a P/D router's two sides. A side's own setting wins (the gateway's
 * `--prefill-policy`, `--decode-policy`: sgl-model-gateway src/main.rs). Without one, a side
 * follows `--policy` when it was given, as the gateway's sides do (config/types.rs
 * `RoutingMode::get_prefill_policy` / `get_decode_policy`: "Falls back to the main policy"), with
 * one exception: `cache_aware` is a prefill-side policy. The prompt is computed on the prefill
 * server, whose radix cache holds the prefixes; an SGLang decode server has no radix cache unless
 * started with --disaggregation-decode-enable-radix-cache (server_args.py
 * `_handle_pd_disaggregation`: "KV cache is forced as chunk cache for decode server"), so a shared
 * prefix says nothing about where to decode, and a prefix tree would send every request with one
 * system prompt to one decode server. So the decode side goes by load (`least_inflight`) unless
 * `--decode-policy` says otherwise. With nothing given, the prefill side is `cache_aware`.
 */
export function pdPolicies(o: { policy: string; prefillPolicy: string | null; decodePolicy: string | null }, policyGiven: boolean): { prefill: string; decode: string } {
  const main = policyGiven ? o.policy : 'cache_aware';
  return {
    prefill: o.prefillPolicy ?? main,
    decode: o.decodePolicy ?? (main === 'cache_aware' ? 'least_inflight' : main),
  };
}
