// The campaign client's SGLang plug-in (client.ts is the core): SGLang's `POST /generate`, read as
// an SGLang client would, checking the framing on the way: every stream chunk must be consistent
// with one streaming mode, carry the logical id, and never show a continuation's prompt window.

import type { Answer, ClientFormat, ClientResult, StreamFold } from './client.ts';

type Json = unknown;
type Obj = Record<string, Json>;

/** SGLang's part of the client: output_ids and meta_info, chunks in either streaming mode. */
export const sglangClient: ClientFormat = {
  name: 'SGLang',
  finishingChunk: 'finished chunk',
  strict: false,
  readAnswer,
  fold: (spec, inputs, problems) => new StreamAssembler(spec.id, inputs, problems),
};

const OUTPUT_LISTS = ['output_token_logprobs', 'output_top_logprobs'] as const;
const INPUT_LISTS = ['input_token_logprobs', 'input_top_logprobs'] as const;

/** The prompt-side lists a stream may carry, as JSON text: one, or one per set of weights. */
export type PromptLists = Partial<Record<(typeof INPUT_LISTS)[number], string | readonly string[]>>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Folds stream chunks into one answer, cumulative or incremental, whichever the chunks show. */
export class StreamAssembler implements StreamFold {
  mode: 'unknown' | 'cumulative' | 'incremental' = 'unknown';
  ids: number[] = [];
  lists: Partial<Record<(typeof OUTPUT_LISTS)[number], Json[]>> = {};
  meta: Obj | null = null;
  finished = false;
  chunks = 0;

  /** The prompt-side list each key showed first: every later chunk must show the same. */
  private readonly inputSeen: Partial<Record<(typeof INPUT_LISTS)[number], string>> = {};

  constructor(
    private readonly id: string,
    /**
     * JSON text of the prompt-side lists the client may see in chunks that carry them: one text,
     * or one per set of weights the answer may come from (the first chunk decides which).
     */
    private readonly inputs: PromptLists,
    private readonly problems: string[],
  ) {}

  /** Every data chunk counts toward a cancel. */
  get counted(): number {
    return this.chunks;
  }

  absorb(chunk: Obj): void {
    const n = ++this.chunks;
    const ids = chunk.output_ids;
    const meta = chunk.meta_info;
    if (!Array.isArray(ids) || !isObj(meta) || typeof meta.completion_tokens !== 'number') {
      this.problems.push(`chunk ${n} lacks output_ids or meta_info.completion_tokens`);
      return;
    }
    if (this.finished) this.problems.push(`chunk ${n} came after the finished chunk`);
    if (meta.id !== this.id) this.problems.push(`chunk ${n} has meta_info.id ${JSON.stringify(meta.id)}, not the logical id`);
    const c = meta.completion_tokens;
    const cumulative = ids.length === c && this.ids.every((t, i) => ids[i] === t);
    const incremental = this.ids.length + ids.length === c;
    if (this.mode === 'unknown') {
      if (cumulative && !incremental) this.mode = 'cumulative';
      else if (incremental && !cumulative) this.mode = 'incremental';
    }
    const append = this.mode === 'incremental' || (this.mode === 'unknown' && incremental);
    if ((this.mode === 'cumulative' && !cumulative) || (this.mode === 'incremental' && !incremental) || (!cumulative && !incremental)) {
      this.problems.push(`chunk ${n} (${ids.length} ids, completion_tokens ${c}) breaks ${this.mode} streaming after ${this.ids.length} tokens`);
    }
    if (append) this.ids.push(...(ids as number[]));
    else this.ids = ids as number[];
    for (const key of OUTPUT_LISTS) {
      const v = meta[key];
      if (v === undefined) continue;
      if (!Array.isArray(v)) {
        this.problems.push(`chunk ${n}: ${key} is not a list`);
        continue;
      }
      if (append) (this.lists[key] ??= []).push(...v);
      else this.lists[key] = v;
    }
    for (const key of INPUT_LISTS) {
      if (meta[key] === undefined) continue;
      const want = this.inputs[key];
      if (want === undefined) continue;
      const got = JSON.stringify(meta[key]);
      const allowed = this.inputSeen[key] !== undefined ? [this.inputSeen[key]] : typeof want === 'string' ? [want] : want;
      if (!allowed.includes(got)) {
        this.problems.push(`chunk ${n}: ${key} differs from the original prompt's (a continuation's prompt window leaked?)`);
      } else this.inputSeen[key] = got;
    }
    this.meta = meta;
    if (meta.finish_reason !== null && meta.finish_reason !== undefined) this.finished = true;
  }

  answer(): Answer {
    return { output_ids: this.ids, meta: this.meta ?? {}, ...this.lists };
  }
}

/** A unary 200 answer: output_ids and meta_info, the output-side logprob lists inside meta_info. */
function readAnswer(body: unknown, _text: string, _spec: unknown, r: ClientResult): void {
  if (!isObj(body) || !Array.isArray(body.output_ids) || !isObj(body.meta_info)) {
    r.problems.push('unary 200 answer without output_ids / meta_info');
    return;
  }
  const meta = body.meta_info;
  const answer: Answer = { output_ids: body.output_ids as number[], meta };
  for (const key of OUTPUT_LISTS) if (meta[key] !== undefined) answer[key] = meta[key] as Json[];
  r.answer = answer;
  r.partialIds = answer.output_ids;
}
