// Stop strings over streamed text: a match is found wherever the stop string straddles chunk
// boundaries (a chunk boundary may be an attempt boundary), the text before it is handed out
// exactly once, and nothing after it; how the text was cut never changes the result.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IncrementalDecoder, StopMatcher } from '../../router/tokenizer/index.ts';
import { fixture, runs, splitAt } from './fixtures.ts';

/** Everything a matcher hands out for these chunks, and the stop it reports. */
function feed(stops: string[], chunks: string[], includeStop = false): { text: string; stop: string | null } {
  const m = new StopMatcher(stops, { includeStop });
  let text = '';
  for (const chunk of chunks) {
    const r = m.push(chunk);
    text += r.emit;
    if (r.stop !== null) return { text, stop: r.stop };
  }
  return { text: text + m.flush(), stop: null };
}

/** The reference: the match that ends first (ties: first listed), on the whole text at once. */
function reference(stops: string[], text: string, includeStop = false): { text: string; stop: string | null } {
  let best: { at: number; end: number; stop: string } | null = null;
  for (const stop of stops.filter((s) => s.length > 0)) {
    const at = text.indexOf(stop);
    if (at >= 0 && (!best || at + stop.length < best.end)) best = { at, end: at + stop.length, stop };
  }
  return best ? { text: text.slice(0, includeStop ? best.end : best.at), stop: best.stop } : { text, stop: null };
}

const alphabet = fc.constantFrom('a', 'b', 'c', ' ', '\n', 'é', '🫠', 'ab', 'ba');
const text = fc.array(alphabet, { maxLength: 30 }).map((xs) => xs.join(''));

describe('StopMatcher', () => {
  it('finds a stop string wherever it straddles chunk boundaries, and cuts before it', () => {
    fc.assert(
      fc.property(text, text, fc.constantFrom('STOP', 'abcab', '\n\n', 'é🫠', 'x'), fc.array(fc.nat({ max: 80 }), { maxLength: 10 }), (before, after, stop, cuts) => {
        const whole = before + stop + after;
        // Cut by code points, as the detokenizer hands out whole characters.
        const chunks = splitAt([...whole], cuts).map((c) => c.join(''));
        expect(feed([stop], chunks)).toEqual(reference([stop], whole));
        expect(feed([stop], chunks).stop).toBe(stop);
      }),
      { numRuns: runs() },
    );
  });

  it('the result is a pure function of the text: any cut, several stops, with or without the stop kept', () => {
    fc.assert(
      fc.property(text, fc.array(fc.constantFrom('ab', 'ba', 'b b', 'c\n', 'aaa', '🫠a', ''), { maxLength: 4 }), fc.array(fc.nat({ max: 40 }), { maxLength: 8 }), fc.boolean(), (t, stops, cuts, keep) => {
        const chunks = splitAt([...t], cuts).map((c) => c.join(''));
        expect(feed(stops, chunks, keep)).toEqual(reference(stops, t, keep));
      }),
      { numRuns: runs() },
    );
  });

  it('the match that ends first wins; at the same end, the one listed first', () => {
    expect(feed(['world', 'lo w'], ['hello world'])).toEqual({ text: 'hel', stop: 'lo w' });
    expect(feed(['xyz', 'yz'], ['axyz'])).toEqual({ text: 'a', stop: 'xyz' });
    expect(feed(['yz', 'xyz'], ['axyz'])).toEqual({ text: 'ax', stop: 'yz' });
  });

  it('holds back only a tail that could begin a stop string', () => {
    const m = new StopMatcher(['Hello', 'lol']);
    expect(m.push('say Hel')).toEqual({ emit: 'say ', stop: null });
    expect(m.push('p')).toEqual({ emit: 'Help', stop: null });
    expect(m.push(' lo')).toEqual({ emit: ' ', stop: null });
    expect(m.push('l!')).toEqual({ emit: '', stop: 'lol' });
    expect(m.matched).toBe('lol');
    expect(m.push('more')).toEqual({ emit: '', stop: null });
    expect(m.flush()).toBe('');
    const n = new StopMatcher(['END']);
    expect(n.push('the EN')).toEqual({ emit: 'the ', stop: null });
    expect(n.flush()).toBe('EN');
    expect(new StopMatcher([]).push('anything')).toEqual({ emit: 'anything', stop: null });
  });

  it('over a detokenized stream split at a migration point', () => {
    const tok = fixture('qwen3');
    const ids = tok.encode('The answer is 42.\n\nDone. More text follows here.', { addSpecialTokens: false });
    for (let migration = 0; migration <= ids.length; migration++) {
      const dec = new IncrementalDecoder(tok);
      const m = new StopMatcher(['\n\nDone']);
      let out = '';
      let stop: string | null = null;
      for (const piece of [ids.slice(0, migration), ids.slice(migration)]) {
        const r = m.push(dec.push(piece));
        out += r.emit;
        stop ??= r.stop;
        if (stop) break;
      }
      expect({ out, stop }).toEqual({ out: 'The answer is 42.', stop: '\n\nDone' });
    }
  });
});

describe("StopMatcher with vLLM's min_tokens gate (push(text, false))", () => {
  const small = fc.string({ unit: fc.constantFrom('a', 'b', 'c', 'd'), maxLength: 6 });
  const stopsArb = fc.array(fc.string({ unit: fc.constantFrom('a', 'b', 'c'), minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 3 });

  it('matches only what ends after the gate, however the gated and the searched text are cut', () => {
    fc.assert(
      fc.property(stopsArb, fc.array(small, { maxLength: 6 }), fc.array(small, { maxLength: 6 }), fc.boolean(), (stops, gatedPieces, searchedPieces, includeStop) => {
        const g = gatedPieces.join('');
        const all = g + searchedPieces.join('');
        // The reference: the match ending first after the gate's end, ties to the first listed.
        let best: { at: number; end: number; stop: string } | null = null;
        for (const stop of stops) {
          const at = all.indexOf(stop, Math.max(0, g.length - stop.length + 1));
          if (at >= 0 && (best === null || at + stop.length < best.end)) best = { at, end: at + stop.length, stop };
        }
        const m = new StopMatcher(stops, { includeStop });
        let out = '';
        let stop: string | null = null;
        for (const p of gatedPieces) out += m.push(p, false).emit;
        for (const p of searchedPieces) {
          const r = m.push(p);
          out += r.emit;
          if (r.stop !== null) {
            stop = r.stop;
            break;
          }
        }
        if (stop === null) out += m.flush();
        expect({ out, stop }).toEqual(best === null ? { out: all, stop: null } : { out: all.slice(0, includeStop ? best.end : best.at), stop: best.stop });
      }),
      { numRuns: runs() },
    );
  });
});
