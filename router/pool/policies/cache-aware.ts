// The SGLang model gateway's `cache_aware` policy (sgl-model-gateway/src/policies/cache_aware.rs,
// `CacheAwarePolicy::select_worker`), over token ids at each worker's page size:
//
// - load is imbalanced when both `max - min > balance_abs_threshold` and
//   `max > min * balance_rel_threshold` (over the eligible workers): then the least loaded worker;
// - otherwise the worker whose tree holds the longest prefix of the request; if that prefix is more
//   than `cache_threshold` of the request's tokens, that worker;
// - otherwise the least loaded worker. The gateway takes the first least-loaded one; here ties go
//   to the longer cached prefix, so idle workers keep a conversation together (SGLang's
//   test_cache_tokens through two workers), then rotate.
//
// Whichever way it chose, the request's tokens go into the chosen worker's tree, as the gateway
// inserts the request text. A continuation is placed the same way with prompt + replayed tokens:
// the survivor holding the longest prefix re-prefills the least. Load is the worker's own report
// (Worker.load) when polled, else the router's count of attempts in flight.
import type { Placement, Policy } from './policy.ts';
import type { Worker } from '../worker.ts';
import { PageKeys, PrefixTree } from '../prefix-tree.ts';
import type { PrefixSink } from '../prefix-share.ts';

export interface CacheAwareOptions {
  /** Match rate (cached prefix / tokens) above which the best-matching worker is chosen. */
  cacheThreshold: number;
  /** Load spread (max - min, in requests) above which load, not the cache, decides... */
  balanceAbsThreshold: number;
  /** ...when also max > min * this. */
  balanceRelThreshold: number;
  /** Tokens remembered per worker (capped by the worker's own max_total_num_tokens when probed). */
  maxTreeSize: number;
}

const NONE: readonly number[] = [];

export class CacheAware implements Policy {
  readonly name = 'cache_aware';
  readonly usesReportedLoad = true;
  private readonly trees = new Map<string, PrefixTree>();
  private readonly keys = new PageKeys();
  private turn = 0;
  /** Under `--replicas`, where what this policy sends also goes (the other replicas learn it). */
  private sink: PrefixSink | null = null;

  constructor(private readonly o: CacheAwareOptions) {}

  /** The tree of `w`, (re)made when its page size or capacity changed (a re-probe). */
  tree(w: Worker): PrefixTree {
    const page = w.pageSize ?? 1;
    const cap = Math.min(this.o.maxTreeSize, w.maxTotalTokens ?? Number.MAX_SAFE_INTEGER);
    let t = this.trees.get(w.id);
    if (t === undefined || t.pageSize !== page || t.capacityTokens !== cap) {
      t = new PrefixTree(cap, page);
      this.trees.set(w.id, t);
    }
    return t;
  }

  forget(w: Worker): void {
    this.trees.get(w.id)?.clear();
  }

  /**
   * The worker left the pool: its tree goes with it, as the gateway's
   * `CacheAwarePolicy::remove_worker` removes the worker's tenant from its tree. Clearing would
   * not do: a cleared tree keeps its arrays (up to 8 MiB at the default bound) and its entry here.
   */
  remove(w: Worker): void {
    this.trees.delete(w.id);
  }

  /** The workers this policy holds a tree for, and the page slots those trees have allocated. */
  footprint(): { workers: string[]; slots: number } {
    let slots = 0;
    for (const t of this.trees.values()) slots += t.allocatedSlots;
    return { workers: [...this.trees.keys()], slots };
  }

  share(sink: PrefixSink | null): void {
    this.sink = sink;
  }

  learn(w: Worker, k: PageKeys): void {
    this.tree(w).insert(k);
  }

  /** Tokens of `w`'s tree (the dashboard). */
  treeTokens(w: Worker): number {
    return this.trees.get(w.id)?.tokens ?? 0;
  }

  select(candidates: readonly Worker[], placement: Placement | null = null): Worker {
    const n = candidates.length;
    const offset = this.turn++ % n;
    let min = Infinity;
    let max = 0;
    for (let i = 0; i < n; i++) {
      const l = candidates[i]!.load();
      if (l < min) min = l;
      if (l > max) max = l;
    }
    const prompt = placement?.prompt ?? NONE;
    const replayed = placement?.replayed ?? null;
    const total = prompt.length + (replayed?.length ?? 0);
    const k = this.keys;
    let computedFor = 0;
    const matchOf = (w: Worker): number => {
      const t = this.tree(w);
      if (computedFor !== t.pageSize) {
        k.compute(prompt, replayed, t.pageSize);
        computedFor = t.pageSize;
      }
      return t.match(k);
    };

    let chosen: Worker;
    let prefix = 0;
    let reason: string;
    if (max - min > this.o.balanceAbsThreshold && max > min * this.o.balanceRelThreshold) {
      chosen = leastLoaded(candidates, offset);
      prefix = total === 0 ? 0 : matchOf(chosen);
      reason = `imbalanced: load ${min}..${max}`;
    } else if (total === 0) {
      chosen = leastLoaded(candidates, offset);
      reason = 'no_token_ids';
    } else {
      // The longest cached prefix; ties to the less loaded, then in turn.
      let best = candidates[offset]!;
      let bestMatch = matchOf(best);
      let bestLoad = best.load();
      let lowest = best;
      let lowestLoad = bestLoad;
      let lowestMatch = bestMatch;
      for (let j = 1; j < n; j++) {
        const w = candidates[(offset + j) % n]!;
        const m = matchOf(w);
        const l = w.load();
        if (m > bestMatch || (m === bestMatch && l < bestLoad)) {
          best = w;
          bestMatch = m;
          bestLoad = l;
        }
        if (l < lowestLoad || (l === lowestLoad && m > lowestMatch)) {
          lowest = w;
          lowestLoad = l;
          lowestMatch = m;
        }
      }
      if (bestMatch / total > this.o.cacheThreshold) {
        chosen = best;
        prefix = bestMatch;
        reason = `cache_hit ${bestMatch}/${total}`;
      } else {
        chosen = lowest;
        prefix = lowestMatch;
        reason = `below_threshold ${bestMatch}/${total}`;
      }
    }
    if (total > 0) {
      const t = this.tree(chosen);
      if (computedFor !== t.pageSize) k.compute(prompt, replayed, t.pageSize);
      t.insert(k);
      this.sink?.(chosen, k);
    }
    if (placement) {
      placement.prefix = total === 0 ? null : prefix;
      placement.reason = replayed !== null ? `continuation ${reason}` : reason;
    }
    return chosen;
  }
}

function leastLoaded(candidates: readonly Worker[], offset: number): Worker {
  const n = candidates.length;
  let best = candidates[offset]!;
  let bestLoad = best.load();
  for (let j = 1; j < n; j++) {
    const w = candidates[(offset + j) % n]!;
    const l = w.load();
    if (l < bestLoad) {
      best = w;
      bestLoad = l;
    }
  }
  return best;
}
