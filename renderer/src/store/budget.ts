// Budget bar arithmetic: the bar is the request's max_new_tokens; each attempt fills the token
// range it produced, in its worker's colour; the part the latest continuation replayed (every
// token produced before it, sent again as prompt) is shaded; the rest is remaining budget.
import type { RequestView } from './request-view.ts';

export interface BudgetSegment {
  attempt: number;
  worker: string;
  /** Token positions [from, to) of the output. */
  from: number;
  to: number;
}

export interface BudgetBar {
  /** The bar's full length in tokens: the original budget when known. */
  total: number;
  produced: number;
  remaining: number;
  /** Output tokens [0, replayed) were replayed into the latest continuation's prompt. */
  replayed: number;
  segments: BudgetSegment[];
  /** False when max_new_tokens was not known (the bar then ends at what was produced). */
  budgetKnown: boolean;
}

export function budgetBar(r: Pick<RequestView, 'attempts' | 'maxNewTokens' | 'completionTokens'>): BudgetBar {
  const segments: BudgetSegment[] = [];
  let produced = 0;
  let replayed = 0;
  for (const a of r.attempts) {
    // An attempt starts where the previous ones ended; the router reports that point as its
    // replayed count, which wins over our own sum if they ever disagree.
    const from = a.attempt === 0 ? 0 : a.replayed;
    segments.push({ attempt: a.attempt, worker: a.worker, from, to: from + a.tokens });
    produced = Math.max(produced, from + a.tokens);
    if (a.attempt > 0) replayed = Math.max(replayed, a.replayed);
  }
  produced = Math.max(produced, r.completionTokens);
  const budget = r.maxNewTokens ?? r.attempts[0]?.budgetBefore ?? null;
  const total = Math.max(budget ?? 0, produced, 1);
  return {
    total,
    produced,
    remaining: Math.max(0, (budget ?? produced) - produced),
    replayed: Math.min(replayed, produced),
    segments,
    budgetKnown: budget !== null,
  };
}

/** A token range as CSS percentages of the bar. */
export function percent(from: number, to: number, total: number): { left: string; width: string } {
  const clamp = (x: number) => Math.min(Math.max(x, 0), total);
  const f = clamp(from);
  const t = clamp(to);
  return { left: `${(f / total) * 100}%`, width: `${(Math.max(0, t - f) / total) * 100}%` };
}
