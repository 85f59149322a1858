import type { Policy } from './policy.ts';
import { RoundRobin } from './round-robin.ts';
import { PowerOfTwo } from './power-of-two.ts';
import { LeastInflight } from './least-inflight.ts';
import { CacheAware, type CacheAwareOptions } from './cache-aware.ts';

export const POLICY_NAMES = ['least_inflight', 'round_robin', 'power_of_two', 'cache_aware'] as const;
export type PolicyName = (typeof POLICY_NAMES)[number];

/**
 * The SGLang model gateway's CLI defaults for `cache_aware` (sgl-model-gateway/src/main.rs:
 * --cache-threshold 0.3, --balance-abs-threshold 64, --balance-rel-threshold 1.5); its tree bound
 * is in characters, ours in tokens per worker (docs/routing.md).
 */
export const CACHE_AWARE_DEFAULTS: CacheAwareOptions = { cacheThreshold: 0.3, balanceAbsThreshold: 64, balanceRelThreshold: 1.5, maxTreeSize: 262_144 };

export function createPolicy(name: string, cacheAware: CacheAwareOptions = CACHE_AWARE_DEFAULTS): Policy {
  switch (name) {
    case 'round_robin': return new RoundRobin();
    case 'power_of_two': return new PowerOfTwo();
    case 'least_inflight': return new LeastInflight();
    case 'cache_aware': return new CacheAware(cacheAware);
    default: throw new Error(`unknown policy '${name}' (expected one of ${POLICY_NAMES.join(', ')})`);
  }
}

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
