// The OpenAI front's stop matcher with vLLM's min_tokens gate (router/format/openai/stops.ts):
// without the gate it is the tokenizer's StopMatcher, piece for piece; with it, the text handed
// out and the match do not depend on how the text was cut.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { StopMatcher } from '../../router/tokenizer/index.ts';
import { GatedStopMatcher } from '../../router/format/openai/stops.ts';

const RUNS = Number(process.env.LAW_RUNS ?? 200);
const text = fc.string({ unit: fc.constantFrom('a', 'b', 'c', 'd'), maxLength: 6 });
const stopsArb = fc.array(fc.string({ unit: fc.constantFrom('a', 'b', 'c'), minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 3 });

function run(m: { push(t: string): { emit: string; stop: string | null }; flush(): string }, pieces: string[]): { out: string; stop: string | null; at: number } {
  let out = '';
  for (let i = 0; i < pieces.length; i++) {
    const r = m.push(pieces[i]!);
    out += r.emit;
    if (r.stop !== null) return { out, stop: r.stop, at: i };
  }
  return { out: out + m.flush(), stop: null, at: pieces.length };
}

describe('GatedStopMatcher', () => {
  it('is StopMatcher when every piece is searched (min_tokens 0)', () => {
    fc.assert(
      fc.property(stopsArb, fc.array(text, { maxLength: 12 }), fc.boolean(), (stops, pieces, includeStop) => {
        const gated = new GatedStopMatcher(stops, includeStop);
        const plain = new StopMatcher(stops, { includeStop });
        expect(run({ push: (t) => gated.push(t, true), flush: () => gated.flush() }, pieces)).toEqual(run(plain, pieces));
      }),
      { numRuns: RUNS },
    );
  });

  it('matches only what ends after the gate, however the gated and the searched text are cut', () => {
    fc.assert(
      fc.property(stopsArb, fc.array(text, { maxLength: 6 }), fc.array(text, { maxLength: 6 }), fc.boolean(), (stops, gatedPieces, searchedPieces, includeStop) => {
        const g = gatedPieces.join('');
        const rest = searchedPieces.join('');
        const all = g + rest;
        // The reference: the match ending first after the gate's end, ties to the first listed.
        let best: { at: number; end: number; stop: string } | null = null;
        for (const stop of stops) {
          const at = all.indexOf(stop, Math.max(0, g.length - stop.length + 1));
          if (at >= 0 && (best === null || at + stop.length < best.end)) best = { at, end: at + stop.length, stop };
        }
        const m = new GatedStopMatcher(stops, includeStop);
        let out = '';
        let stop: string | null = null;
        for (const p of gatedPieces) out += m.push(p, false).emit;
        for (const p of searchedPieces) {
          const r = m.push(p, true);
          out += r.emit;
          if (r.stop !== null) {
            stop = r.stop;
            break;
          }
        }
        if (stop === null) out += m.flush();
        expect({ out, stop }).toEqual(best === null ? { out: all, stop: null } : { out: all.slice(0, includeStop ? best.end : best.at), stop: best.stop });
      }),
      { numRuns: RUNS },
    );
  });
});
