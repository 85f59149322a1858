import type { Policy } from './policy.ts';
import { RoundRobin } from './round-robin.ts';
import { PowerOfTwo } from './power-of-two.ts';
import { LeastInflight } from './least-inflight.ts';
import { CacheAware, type CacheAwareOptions } from './cache-aware.ts';
import { POLICY_NAMES } from './names.ts';

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
