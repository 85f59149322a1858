// SGLang's worker side as plain tokens, for the OpenAI front (../openai/): a native /generate
// request built from token ids and explicit sampling values, and its frames (cumulative or
// incremental, learnt as stitch.ts learns them) read as new ids, logprobs and a finish. Any
// `text` a worker without --skip-tokenizer-init returns is ignored: Baton renders the text.
import type { Json, JsonObject, TokenConstraint, TokenFrame, TokenLogprob, TokenReader, TokenRequest, TokenWorker, WorkerView } from '../../core/types.ts';
import { classifyAbort, classifyInBandError } from './failure.ts';
import { parseGenerateRequest } from './request.ts';
import { AttemptOutput, finishReasonOf, mergePrefillInput, metaOf } from './stitch.ts';

/** SGLang's sampling_params (sampling_params.py) for the front's explicit values. */
function samplingParams(t: TokenRequest): JsonObject {
  const s = t.sampling;
  const sp: JsonObject = { temperature: s.temperature, top_p: s.top_p };
  if (s.top_k !== null) sp.top_k = s.top_k;
  if (t.maxTokens !== null) sp.max_new_tokens = t.maxTokens;
  if (t.minTokens > 0) sp.min_new_tokens = t.minTokens;
  if (s.stop_token_ids.length > 0) sp.stop_token_ids = s.stop_token_ids;
  if (s.ignore_eos) sp.ignore_eos = true;
  if (s.seed !== null) sp.sampling_seed = s.seed;
  if (s.frequency_penalty !== 0) sp.frequency_penalty = s.frequency_penalty;
  if (s.presence_penalty !== 0) sp.presence_penalty = s.presence_penalty;
  if (s.repetition_penalty !== null) sp.repetition_penalty = s.repetition_penalty;
  if (s.logit_bias !== null) sp.logit_bias = s.logit_bias;
  if (t.constraint) Object.assign(sp, constraintFields(t.constraint));
  return sp;
}

/** Python re.escape, for the regex of a choice (SGLang has no choice constraint). */
const reEscape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\\-#&~\s]/g, (c) => `\\${c}`);

/**
 * SGLang's sampling_params fields for a constraint (sampling_params.py: json_schema as a JSON
 * string, regex, ebnf, structural_tag as a JSON string). json_object is SGLang's own
 * `{"type": "object"}` schema (openai/protocol.py ChatCompletionRequest.to_sampling_params); a
 * choice becomes the regex of its alternatives, as vLLM's outlines backend built it. vLLM's
 * StructuredOutputsParams options have no SGLang field and are not sent.
 */
export function constraintFields(c: TokenConstraint): JsonObject {
  switch (c.kind) {
    case 'json':
      return { json_schema: JSON.stringify(c.schema) };
    case 'json_object':
      return { json_schema: '{"type": "object"}' };
    case 'regex':
      return { regex: c.pattern };
    case 'choice':
      return { regex: `(${c.choices.map(reEscape).join('|')})` };
    case 'grammar':
      return { ebnf: c.grammar };
    case 'structural_tag':
      return { structural_tag: c.tag };
  }
}

function logprobEntry(tok: Json, top: Json | undefined): TokenLogprob {
  const lp = Array.isArray(tok) && typeof tok[0] === 'number' ? tok[0] : 0;
  const alts: TokenLogprob['top'] = [];
  if (Array.isArray(top)) {
    for (const t of top) if (Array.isArray(t) && typeof t[0] === 'number' && typeof t[1] === 'number') alts.push({ logprob: t[0], id: t[1] });
  }
  return { logprob: lp, top: alts };
}

class SglangTokenReader implements TokenReader {
  private readonly out: AttemptOutput;
  private seen = 0;
  private promptRead = false;
  private prefillMeta: JsonObject | null = null;

  constructor(worker: WorkerView) {
    this.out = new AttemptOutput(worker.incremental, 0);
  }

  prefillAnswered(meta: JsonObject | null): void {
    this.prefillMeta = meta;
  }

  read(chunk: JsonObject): TokenFrame {
    if (chunk.error !== undefined) return { kind: 'failed', failure: classifyInBandError(chunk.error) };
    const finish = finishReasonOf(chunk);
    if (finish && finish.type === 'abort') {
      const failure = classifyAbort(finish);
      if (failure.kind !== 'worker_abort') return { kind: 'failed', failure };
    }
    const out = this.out;
    if (this.prefillMeta !== null) mergePrefillInput(this.prefillMeta, chunk);
    out.absorb(chunk);
    const ids = out.ids.slice(this.seen);
    let logprobs: TokenLogprob[] | null = null;
    const tokLps = out.lists.output_token_logprobs;
    if (tokLps) {
      const tops = out.lists.output_top_logprobs;
      logprobs = [];
      for (let i = this.seen; i < out.ids.length; i++) logprobs.push(logprobEntry(tokLps[i] ?? null, tops?.[i]));
    }
    this.seen = out.ids.length;
    const meta = metaOf(chunk);
    // The prompt's logprobs (asked for with logprob_start_len 0), once: SGLang repeats them in
    // every cumulative chunk. The first position's is null (no token before it).
    let prompt: (TokenLogprob | null)[] | undefined;
    const inLps = out.input.input_token_logprobs;
    if (!this.promptRead && Array.isArray(inLps) && inLps.length > 0) {
      this.promptRead = true;
      const tops = out.input.input_top_logprobs;
      prompt = inLps.map((e, i) => (Array.isArray(e) && typeof e[0] === 'number' ? logprobEntry(e, Array.isArray(tops) ? tops[i] : undefined) : null));
    }
    return {
      prompt,
      kind: 'tokens',
      ids,
      logprobs,
      finish: finish === null ? null : {
        reason: finish.type === 'length' ? 'length' : finish.type === 'abort' ? 'abort' : 'stop',
        matched: typeof finish.matched === 'number' ? finish.matched : null,
      },
      weightVersion: typeof meta.weight_version === 'string' ? meta.weight_version : null,
      cachedTokens: typeof meta.cached_tokens === 'number' ? meta.cached_tokens : null,
    };
  }
}

export const SGLANG_TOKENS: TokenWorker = {
  request(t) {
    const body: JsonObject = { input_ids: t.promptIds, sampling_params: samplingParams(t), stream: t.stream };
    // The prompt's logprobs only when the client asks (echo + logprobs, prompt_logprobs): from
    // position 0 (SGLang's logprob_start_len); a continuation asks for none (continuation.ts).
    const pl = t.promptLogprobs ?? null;
    if (t.logprobs !== null || pl !== null) Object.assign(body, { return_logprob: true, top_logprobs_num: Math.max(t.logprobs ?? 0, pl ?? 0), logprob_start_len: pl !== null ? 0 : -1 });
    return parseGenerateRequest(body);
  },
  reader: (worker) => new SglangTokenReader(worker),
};
