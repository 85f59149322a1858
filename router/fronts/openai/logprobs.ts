// The OpenAI front's logprobs: the rows Baton keeps for the output's tokens and the prompt's, and
// the shapes it renders them in (chat's `content` list, the completions' lists, vLLM's
// prompt_logprobs), for the chat/completions session (session.ts).
import type { JsonObject, TokenLogprob } from '../../core/types.ts';
import type { OpenAiRequest } from './request.ts';

/** OpenAI's logprob floor: JSON has no -Infinity (vLLM writes -9999.0 too). */
export const lp = (x: number): number => (Number.isFinite(x) ? x : -9999);

export interface LogprobRow {
  id: number;
  /** null: a prompt position without one (the first, or a worker that reported none). */
  logprob: number | null;
  top: { id: number; logprob: number }[];
}

/** One request's logprob rendering: the prompt's rows once reported, and the completions' text offset. */
export class OpenAiLogprobs {
  /** Character offset of the next token in the completion's text (legacy logprobs' text_offset). */
  private textOffset = 0;
  /** The prompt's logprob rows (logprob null at position 0), once the first attempt reported them. */
  private promptLogprobs: LogprobRow[] | null = null;

  constructor(
    private readonly req: OpenAiRequest,
    private readonly streaming: boolean,
  ) {}

  /** The prompt's logprobs, from the first attempt that reports them. */
  notePrompt(rows: readonly (TokenLogprob | null)[]): void {
    if (this.promptLogprobs !== null || (this.req.promptLogprobs ?? null) === null) return;
    const ids = this.req.promptIds;
    // vLLM and OpenAI: the first prompt token has no logprob (nothing precedes it).
    this.promptLogprobs = ids.map((id, i) => {
      const r = i === 0 ? null : rows[i];
      return r ? { id, logprob: r.logprob, top: r.top } : { id, logprob: null, top: [] };
    });
  }

  /** A token as a logprob entry names it: its text, or vLLM's "token_id:N" (return_tokens_as_token_ids). */
  private tokenName(id: number): string {
    return this.req.tokensAsIds ? `token_id:${id}` : this.req.tokenizer.tokenText(id);
  }

  /** The prompt's rows for an echo: the worker's, or the bare ids when it reported none. */
  private promptRows(): LogprobRow[] {
    return this.promptLogprobs ?? this.req.promptIds.map((id) => ({ id, logprob: null, top: [] }));
  }

  /**
   * OpenAI's logprobs object for some tokens: chat's `content` list, or the completions' lists
   * (led by the prompt's rows when echoed). vLLM's shapes: chat_completion/serving.py
   * _create_chat_logprobs, completion/serving.py _create_completion_logprobs (whose
   * top_logprobs holds the sampled token first, then the alternatives: `logprobs: 0` gives the
   * sampled token alone).
   */
  of(rows: LogprobRow[], withPrompt: boolean): JsonObject | null {
    if (this.req.logprobs === null || (this.streaming && rows.length === 0 && !withPrompt)) return null;
    const tok = this.req.tokenizer;
    const k = this.req.logprobs;
    if (this.req.kind === 'chat') {
      return {
        content: rows.map((r) => ({
          token: this.tokenName(r.id),
          logprob: lp(r.logprob ?? 0),
          bytes: tok.tokenBytes(r.id),
          top_logprobs: r.top.slice(0, k).map((t) => {
            const name = this.tokenName(t.id);
            return { token: name, logprob: lp(t.logprob), bytes: this.req.tokensAsIds ? [...Buffer.from(name)] : tok.tokenBytes(t.id) };
          }),
        })),
      };
    }
    const all = withPrompt ? [...this.promptRows(), ...rows] : rows;
    const tokens: string[] = [];
    const offsets: number[] = [];
    const tokenLps: (number | null)[] = [];
    const top: (Record<string, number> | null)[] = [];
    for (const r of all) {
      const t = this.tokenName(r.id);
      tokens.push(t);
      offsets.push(this.textOffset);
      this.textOffset += t.length;
      if (r.logprob === null) {
        tokenLps.push(null);
        top.push(null);
        continue;
      }
      tokenLps.push(lp(r.logprob));
      const alts: Record<string, number> = { [t]: lp(r.logprob) };
      for (const x of r.top.slice(0, k)) if (x.id !== r.id) alts[this.tokenName(x.id)] = lp(x.logprob);
      top.push(alts);
    }
    return { tokens, token_logprobs: tokenLps, top_logprobs: top, text_offset: offsets };
  }

  /** vLLM's prompt_logprobs: null, then per position {"<id>": {logprob, rank, decoded_token}}. */
  promptJson(): (JsonObject | null)[] | null {
    if ((this.req.promptLogprobs ?? null) === null) return null;
    return this.promptRows().map((r, i) => {
      if (i === 0 || r.logprob === null) return null;
      const o: JsonObject = {};
      const at = r.top.findIndex((t) => t.id === r.id);
      // rank: the token's place among the alternatives the worker reported (1-based), else past them.
      o[String(r.id)] = { logprob: lp(r.logprob), rank: at >= 0 ? at + 1 : r.top.length + 1, decoded_token: this.tokenName(r.id) };
      for (const [j, t] of r.top.slice(0, this.req.promptLogprobs!).entries()) if (t.id !== r.id) o[String(t.id)] = { logprob: lp(t.logprob), rank: j + 1, decoded_token: this.tokenName(t.id) };
      return o;
    });
  }
}
