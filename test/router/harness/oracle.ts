// The independent reference for law 6: a few lines that predict, from the deterministic model's
// uninterrupted answer and a fault schedule, what the client gets. Written apart from the router:
// it shares no code with it and follows migration.md directly.
import type { Fault } from './fault-proxy.ts';

export interface Prediction {
  ok: boolean; // the client gets the whole uninterrupted answer (else an error)
  attempts: number; // upstream calls made
  tokensPerAttempt: number[];
  delivered: number; // output tokens the client received
  finishedLocally: boolean; // budget spent at a failure: finished with no further call
}

/** `total`: tokens of the uninterrupted run; each frame carries one token, the last frame finishes. */
export function predict(total: number, budget: number, admitted: boolean, limit: number, schedule: readonly (Fault | null)[], logprobs = false): Prediction {
  let t = 0;
  let framesSeen = false; // some attempt sent a whole frame: the router knows an answer's shape
  // Failures before the request's first token that the worker does not show to be its own (the
  // proxies' workers stay healthy): the second ends the request (migration.md, "Blame needs evidence").
  let unproven = 0;
  const per: number[] = [];
  for (let i = 0; ; i++) {
    const f = schedule[i] ?? null;
    const left = total - t;
    const frames = Math.max(left, 1);
    let produced = left;
    let failed = false;
    // The request's own refusals (a 4xx, an in-band error frame without an engine mark) end it
    // where they happen: never migrated (migration.md, "Never migrate").
    let terminal = false;
    if (f?.kind === 'refuse') [produced, failed] = [0, true];
    else if (f?.kind === 'status4xx') [produced, failed, terminal] = [0, true, true];
    else if (f?.kind === 'lose_final') failed = true;
    else if (f && f.afterFrames < frames) [produced, failed, terminal] = [f.afterFrames, true, f.kind === 'refusal'];
    per.push(produced);
    t += produced;
    framesSeen ||= f === null || f.kind === 'lose_final' || ('afterFrames' in f && Math.min(f.afterFrames, frames) > 0);
    if (!failed) return { ok: true, attempts: i + 1, tokensPerAttempt: per, delivered: t, finishedLocally: false };
    if (terminal) return { ok: false, attempts: i + 1, tokensPerAttempt: per, delivered: t, finishedLocally: false };
    // Budget spent: finish without another call, unless no worker has sent a frame yet (only a
    // worker can say what an answer carries), or nothing came back and the client asked for
    // prompt logprobs, which only a worker can compute.
    if (admitted && t >= budget && framesSeen && (t > 0 || !logprobs)) return { ok: true, attempts: i + 1, tokensPerAttempt: per, delivered: t, finishedLocally: true };
    // A broken stream (reset, cut, end, a lost final frame) or a 500 with no token yet needs evidence.
    if (t === 0 && f !== null && ((f.kind === 'refuse' && f.status === 500) || f.kind === 'reset' || f.kind === 'cut' || f.kind === 'end' || f.kind === 'lose_final')) unproven++;
    if (!admitted || i + 1 > limit || unproven >= 2) return { ok: false, attempts: i + 1, tokensPerAttempt: per, delivered: t, finishedLocally: false };
  }
}
