// Workers that answer text, and a router without a tokenizer: then nothing can migrate. A SGLang
// worker started without --skip-tokenizer-init (its /server_info `skip_tokenizer_init: false`,
// formats/sglang/probe.ts) takes text and answers text; a continuation must be stitched from token
// ids, so the router pins a request to token-only workers unless it writes the answer's text
// itself, which needs the model's tokenizer (pool/worker-pool.ts pinMismatch, docs/openai.md
// "Native /generate with a tokenizer"). With every worker in text mode and no tokenizer, every
// continuation is refused and a worker's death or a pod's deletion ends its streams: a deployment
// that looks fine until the first failure. SGLang's server_args.py: `--skip-tokenizer-init`, "If
// set, skip init tokenizer and pass input_ids in generate request".
import type { Worker } from './worker.ts';

/** The one-line warning for these workers, or null when some request can migrate. */
export function textOnlyWarning(workers: readonly Pick<Worker, 'probed' | 'tokenOnly' | 'healthFailures'>[], hasTokenizer: boolean): string | null {
  if (hasTokenizer) return null;
  // A worker whose first check has not ended yet (just added) may be the token-only one: wait.
  if (workers.some((w) => !w.probed && w.healthFailures === 0)) return null;
  // Only what the probes found: a worker that is down tells nothing.
  const probed = workers.filter((w) => w.probed);
  if (probed.length === 0 || probed.some((w) => w.tokenOnly !== false)) return null;
  return `warning: every worker (${probed.length}) answers text (SGLang without --skip-tokenizer-init) and the router has no tokenizer: no request can migrate, so a worker's failure or a pod's deletion ends its streams. Start the workers with --skip-tokenizer-init, or give the router the model's tokenizer (--tokenizer DIR)`;
}

/** Says the warning once, the first time it holds (checked after the probes of a health round). */
export function textOnlyWarner(workers: () => readonly Worker[], hasTokenizer: boolean, log: (line: string) => void): () => void {
  let said = false;
  return () => {
    if (said) return;
    const line = textOnlyWarning(workers(), hasTokenizer);
    if (line === null) return;
    said = true;
    log(line);
  };
}
