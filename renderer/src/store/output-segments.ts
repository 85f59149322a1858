// A finished request's output token ids split into runs, one per attempt that produced them,
// with a hand-off mark wherever a continuation took over: what the Request view draws as
// coloured tokens. Pure: the router's `/requests/:id/output` answer in, plain data out.
import type { RequestOutput } from '../../../host/contract.ts';

/** Consecutive output tokens from one attempt; attempt and worker are null for tokens no attempt claims. */
export interface OutputRun {
  kind: 'run';
  attempt: number | null;
  worker: string | null;
  /** Index of the first token in output_ids. */
  from: number;
  ids: number[];
  /** The text each of these tokens added, where the router has the tokenizer. */
  texts: string[] | null;
}

/** A continuation started here: the tokens from `at` on came from `worker` (none if it failed first). */
export interface OutputHandoff {
  kind: 'handoff';
  attempt: number;
  worker: string;
  fromWorker: string | null;
  at: number;
}

export type OutputPiece = OutputRun | OutputHandoff;

export interface OutputLayout {
  /** Runs and hand-offs in output order; a hand-off comes before the run it starts. */
  pieces: OutputPiece[];
  total: number;
  /** Tokens in the pieces: min(total, limit). */
  shown: number;
  /** Hand-offs past the shown tokens. */
  hiddenHandoffs: number;
}

interface Span { attempt: number | null; worker: string | null; from: number; to: number }

const clamp = (v: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, Math.trunc(Number.isFinite(v) ? v : lo)));

/**
 * Every attempt after the first is a hand-off at its `from_token`, even one that produced no
 * tokens (it still shows where the request went). A continuation resumes at its `from_token`, so
 * anything an earlier attempt claimed past that point was replaced; tokens no attempt claims
 * (which the router should never report) stay visible, uncoloured, so runs always cover the
 * output exactly once.
 */
export function outputLayout(out: RequestOutput, limit = Number.POSITIVE_INFINITY): OutputLayout {
  const ids = out.output_ids;
  const total = ids.length;
  const shown = Math.min(total, Math.max(0, limit));
  const attempts = [...out.attempts].sort((a, b) => a.attempt - b.attempt);

  const spans: Span[] = [];
  const handoffs: OutputHandoff[] = [];
  let previous: string | null = null;
  attempts.forEach((a, i) => {
    const from = clamp(a.from_token, 0, total);
    while (spans.length > 0 && spans[spans.length - 1]!.from >= from) spans.pop();
    const last = spans[spans.length - 1];
    if (last && last.to > from) last.to = from;
    while (handoffs.length > 0 && handoffs[handoffs.length - 1]!.at > from) handoffs.pop();
    if (i > 0) handoffs.push({ kind: 'handoff', attempt: a.attempt, worker: a.worker, fromWorker: previous, at: from });
    const to = clamp(from + a.tokens, from, total);
    if (to > from) spans.push({ attempt: a.attempt, worker: a.worker, from, to });
    previous = a.worker;
  });

  // Fill what no attempt claims, so the runs add up to the output.
  const covered: Span[] = [];
  let at = 0;
  for (const s of spans) {
    if (s.from > at) covered.push({ attempt: null, worker: null, from: at, to: s.from });
    covered.push(s);
    at = s.to;
  }
  if (at < total) covered.push({ attempt: null, worker: null, from: at, to: total });

  const pieces: OutputPiece[] = [];
  const visible = (h: OutputHandoff) => h.at < shown || shown === total;
  let h = 0;
  for (const s of covered) {
    if (s.from >= shown) break;
    while (h < handoffs.length && handoffs[h]!.at <= s.from) pieces.push(handoffs[h++]!);
    const to = Math.min(s.to, shown);
    const texts = out.token_text && out.token_text.length === total ? out.token_text.slice(s.from, to) : null;
    pieces.push({ kind: 'run', attempt: s.attempt, worker: s.worker, from: s.from, ids: ids.slice(s.from, to), texts });
  }
  while (h < handoffs.length && visible(handoffs[h]!)) pieces.push(handoffs[h++]!);
  return { pieces, total, shown, hiddenHandoffs: handoffs.length - h };
}
