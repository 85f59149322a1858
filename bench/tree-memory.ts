// What cache_aware's prefix trees cost in memory (docs/routing.md, "Memory"; docs/kubernetes.md,
// "Sizing"), apart from `baton bench`:
//
//   full trees   4 trees at the default bound (262,144 tokens) filled with distinct prompts of
//                512 to 4095 tokens, then kept under churn (every insert evicts): heap + array
//                buffers per tree, lowest and highest over the run, at page size 1 (SGLang's
//                default) and 16. A tree under churn swings between the two: V8's Map keeps
//                deleted entries until it rehashes, and an insert holds the request's new pages
//                before it evicts, so a rehash at that moment sizes the table for more than the
//                bound (the next power of two).
//   remove/add   a pool of 4 workers with full trees; 8 times, one worker removed and a new one
//                (a replaced pod: a new id) added and filled. The trees the policy holds after
//                each cycle, and the process's heap.
//
//   node --expose-gc --import tsx bench/tree-memory.ts
import { PageKeys, PrefixTree } from '../router/pool/prefix-tree.ts';
import { WorkerPool } from '../router/pool/worker-pool.ts';
import { CacheAware } from '../router/pool/policies/cache-aware.ts';
import { CACHE_AWARE_DEFAULTS } from '../router/pool/policies/index.ts';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  console.error('run with node --expose-gc --import tsx bench/tree-memory.ts');
  process.exit(2);
}
const heap = () => {
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
};
const MiB = 1024 * 1024;
let seed = 1;
// The high half of a 32-bit LCG (its low bits repeat soon): prompts that hardly share a prefix.
const prompt = (length = 2048) => Array.from({ length }, () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 16);

function fullTrees(page: number): string {
  const before = heap();
  const trees = Array.from({ length: 4 }, () => new PrefixTree(CACHE_AWARE_DEFAULTS.maxTreeSize, page));
  const k = new PageKeys();
  const per: number[] = [];
  for (let r = 0; r < 1200; r++) {
    for (const t of trees) {
      k.compute(prompt(512 + ((r * 7919) % 3584)), null, page);
      t.insert(k);
    }
    // From the first full tree on (about 115 prompts of 2300 tokens fill 262,144), every 50 rounds.
    if (r >= 150 && r % 50 === 0) per.push((heap() - before) / trees.length / MiB);
  }
  return `page size ${page}: ${trees[0]!.size} pages per tree, ${Math.min(...per).toFixed(1)} to ${Math.max(...per).toFixed(1)} MiB per tree`;
}

async function cycles(): Promise<string> {
  const opts = {
    circuit: { failureThreshold: 5, openMs: 1000, successThreshold: 1 },
    connectTimeoutMs: 500, healthIntervalMs: 0, healthTimeoutMs: 100, healthFailureThreshold: 1, benchMs: 1000, spareConnections: 0,
  };
  const policy = new CacheAware(CACHE_AWARE_DEFAULTS);
  const pool = new WorkerPool(opts, policy, () => undefined, () => undefined);
  let n = 0;
  // Port 9 on loopback refuses: the workers are never probed (page size 1), marked healthy by hand.
  const add = async () => Object.assign(await pool.add(`http://127.0.${++n}.1:9`), { healthy: true, dead: false });
  const fill = () => {
    for (let r = 0; r < 4 * 140; r++) pool.pick(new Set(), null, 'sglang', { prompt: prompt(), replayed: null, prefix: null, reason: null });
  };
  const out: string[] = [`no workers: ${(heap() / MiB).toFixed(0)} MiB`];
  try {
    for (let i = 0; i < 4; i++) await add();
    fill();
    out.push(`start: ${policy.footprint().workers.length} trees, ${(heap() / MiB).toFixed(0)} MiB`);
    for (let c = 1; c <= 8; c++) {
      pool.remove(pool.list()[0]!.id);
      await add();
      fill();
      out.push(`cycle ${c}: ${policy.footprint().workers.length} trees, ${(heap() / MiB).toFixed(0)} MiB`);
    }
  } finally {
    await pool.close();
  }
  return out.join('\n');
}

console.log(fullTrees(1));
console.log(fullTrees(16));
console.log(await cycles());
