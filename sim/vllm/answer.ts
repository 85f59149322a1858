// Serialising a vLLM generate answer: stream chunks (token-id deltas) and the unary
// GenerateTokensResponse, field for field in pydantic's declaration order (protocol.py @ 006ebac2:
// GenerateStreamResponseBase / GenerateTokensStreamResponse / GenerateStreamChoiceBase /
// GenerateTokensStreamChoice, GenerateResponseBase / GenerateTokensResponse / GenerateChoiceBase /
// GenerateTokensChoice). The per-token path appends cached string pieces; nothing that grows is
// re-serialised. `legacy` renders the older serve/disagg-era shapes (protocol.py @ 055e47c2:
// GenerateStreamResponse / GenerateResponseStreamChoice / GenerateResponse / GenerateResponseChoice:
// no output_mode, no weight_versions, no prompt_token_ids).

import type { VllmFinish } from './model.ts';

export interface UsageNumbers {
  prompt: number;
  completion: number;
  /** Prompt tokens served from the prefix cache, when --enable-prompt-tokens-details. */
  cached: number | null;
}

/**
 * UsageInfo.model_dump(): every field, None as null (serve/engine/protocol.py @ f1bf7bd0); `legacy`:
 * the older UsageInfo the serve/disagg serving.py imported (openai/engine/protocol.py), without
 * completion_tokens_details, whose PromptTokenUsageInfo has cached_tokens alone.
 */
export function usageFull(u: UsageNumbers, legacy = false): string {
  if (legacy) {
    const d = u.cached === null ? 'null' : `{"cached_tokens":${u.cached}}`;
    return `{"prompt_tokens":${u.prompt},"total_tokens":${u.prompt + u.completion},"completion_tokens":${u.completion},"prompt_tokens_details":${d}}`;
  }
  const details = u.cached === null ? 'null' : `{"cached_tokens":${u.cached},"created_cache_tokens":null,"multimodal_tokens":null}`;
  return `{"prompt_tokens":${u.prompt},"total_tokens":${u.prompt + u.completion},"completion_tokens":${u.completion},"prompt_tokens_details":${details},"completion_tokens_details":null}`;
}

/** UsageInfo under model_dump_json(exclude_none=True) (the stream's final usage chunk). */
export function usageCompact(u: UsageNumbers): string {
  const details = u.cached === null ? '' : `,"prompt_tokens_details":{"cached_tokens":${u.cached}}`;
  return `{"prompt_tokens":${u.prompt},"total_tokens":${u.prompt + u.completion},"completion_tokens":${u.completion}${details}}`;
}

/** One choice's output: token ids, logprob entries and weight-version spans, kept as JSON pieces. */
export class ChoiceAnswer {
  readonly tokens: number[] = [];
  private allIds = '';
  private allLps = '';
  private deltaIds = '';
  private deltaLps = '';
  private spans: { version: string; start: number; end: number }[] = [];

  constructor(readonly index: number, private readonly logprobs: boolean) {}

  get count(): number {
    return this.tokens.length;
  }

  /** One generated token; `entry` is its logprobs.content entry (JSON), `version` the weights' label. */
  push(token: number, entry: string, version: string): void {
    const sepAll = this.tokens.length === 0 ? '' : ',';
    const sepDelta = this.deltaIds === '' ? '' : ',';
    this.tokens.push(token);
    this.allIds += sepAll + token;
    this.deltaIds += sepDelta + token;
    if (this.logprobs) {
      this.allLps += sepAll + entry;
      this.deltaLps += sepDelta + entry;
    }
    const last = this.spans[this.spans.length - 1];
    if (last && last.version === version) last.end = this.tokens.length;
    else this.spans.push({ version, start: this.tokens.length - 1, end: this.tokens.length });
  }

  get hasDelta(): boolean {
    return this.deltaIds !== '';
  }

  /** The weight_versions spans (CompletionOutput.weight_versions; `[]` for no tokens). */
  weightVersions(): string {
    return JSON.stringify(this.spans);
  }

  /** A stream choice with the tokens since the last chunk; consumes the delta. */
  streamChoice(finish: VllmFinish | null, legacy: boolean): string {
    const fr = finish === null ? 'null' : `"${finish}"`;
    const lp = this.logprobs ? `{"content":[${this.deltaLps}]}` : 'null';
    const ids = this.deltaIds;
    this.deltaIds = '';
    this.deltaLps = '';
    if (legacy) return `{"index":${this.index},"logprobs":${lp},"finish_reason":${fr},"token_ids":[${ids}],"routed_experts":null,"sampling_mask":null}`;
    const wv = finish === null ? 'null' : this.weightVersions();
    return `{"index":${this.index},"finish_reason":${fr},"token_ids":[${ids}],"routed_experts":null,"sampling_mask":null,"weight_versions":${wv},"logprobs":${lp}}`;
  }

  /** The unary choice: the whole output (FINAL_ONLY); finish_reason defaults to "stop". */
  unaryChoice(finish: VllmFinish | null, legacy: boolean): string {
    const fr = `"${finish ?? 'stop'}"`;
    const lp = this.logprobs ? `{"content":[${this.allLps}]}` : 'null';
    if (legacy) return `{"index":${this.index},"logprobs":${lp},"finish_reason":${fr},"token_ids":[${this.allIds}],"routed_experts":null,"sampling_mask":null}`;
    return `{"index":${this.index},"finish_reason":${fr},"token_ids":[${this.allIds}],"routed_experts":null,"sampling_mask":null,"weight_versions":${this.weightVersions()},"logprobs":${lp}}`;
  }
}

/** The request-level pieces of every chunk and of the unary answer. */
export class ResponseShape {
  readonly ridJson: string;

  constructor(
    requestId: string,
    private readonly legacy: boolean,
  ) {
    this.ridJson = JSON.stringify(requestId);
  }

  /**
   * A stream chunk carrying one choice. `usage` is the continuous-usage object (or null);
   * `promptIds` the first chunk's prompt_token_ids (return_token_ids).
   */
  chunk(choice: string, usage: string | null, promptIds: readonly number[] | null): string {
    if (this.legacy) return `{"request_id":${this.ridJson},"choices":[${choice}],"usage":${usage ?? 'null'}}`;
    const prompt = promptIds === null ? '' : `"prompt_token_ids":[${promptIds.join(',')}],"mm_placeholders":{},`;
    return `{"request_id":${this.ridJson},"usage":${usage ?? 'null'},${prompt}"output_mode":"tokens","choices":[${choice}]}`;
  }

  /** The final `{choices: [], usage}` chunk of include_usage (model_dump_json(exclude_none=True)). */
  usageChunk(u: UsageNumbers): string {
    if (this.legacy) return `{"request_id":${this.ridJson},"choices":[],"usage":${usageCompact(u)}}`;
    return `{"request_id":${this.ridJson},"usage":${usageCompact(u)},"output_mode":"tokens","choices":[]}`;
  }

  /** The unary GenerateTokensResponse (JSONResponse: compact JSON). */
  unary(model: string, created: number, u: UsageNumbers, choices: string[], promptLogprobs: string | null, promptIds: readonly number[] | null): string {
    const pl = promptLogprobs ?? 'null';
    const m = JSON.stringify(model);
    if (this.legacy) {
      return `{"request_id":${this.ridJson},"model":${m},"created":${created},"choices":[${choices.join(',')}],"usage":${usageFull(u, true)},"prompt_logprobs":${pl},"kv_transfer_params":null,"ec_transfer_params":null}`;
    }
    const pti = promptIds === null ? 'null' : `[${promptIds.join(',')}]`;
    const mm = promptIds === null ? 'null' : '{}';
    return (
      `{"request_id":${this.ridJson},"model":${m},"created":${created},"usage":${usageFull(u)},"prompt_logprobs":${pl},` +
      `"prompt_token_id_logprobs":null,"prompt_token_ids":${pti},"mm_placeholders":${mm},"metrics":null,"kv_transfer_params":null,"ec_transfer_params":null,` +
      `"output_mode":"tokens","choices":[${choices.join(',')}]}`
    );
  }
}

/** ErrorResponse as vLLM's handlers render it: compact through JSONResponse. */
export function errorBody(message: string, type: string, code: number, param: string | null): string {
  return JSON.stringify({ error: { message, type, param, code } });
}

/**
 * The in-band stream error frame: create_streaming_error_response is `json.dumps(...)` with
 * Python's default separators (", " and ": ").
 */
export function streamErrorFrame(message: string, type: string, code: number, param: string | null): string {
  return `{"error": {"message": ${pyJsonString(message)}, "type": ${pyJsonString(type)}, "param": ${param === null ? 'null' : pyJsonString(param)}, "code": ${code}}}`;
}

/** A string as Python's json.dumps writes it (ensure_ascii: non-ASCII as \uXXXX escapes). */
function pyJsonString(s: string): string {
  return JSON.stringify(s).replace(/[\u007f-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}
