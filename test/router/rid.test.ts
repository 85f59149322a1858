// Upstream rids: unique and prefix-free per attempt, whatever ids clients send (SGLang refuses a
// duplicate rid in flight and aborts every rid that *starts with* the one given to /abort_request).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { parseUpstreamRid, upstreamRid } from '../../router/migration/rid.ts';

describe('upstream rids', () => {
  it('are never a prefix of one another, for any ids, shared or not, and any attempts', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ id: fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('job-1', 'job-10', 'a~m1', 'a', 'a%7E', '~', '%')), attempt: fc.nat(12) }), { minLength: 2, maxLength: 30 }),
        (reqs) => {
          const rids = reqs.map((r) => upstreamRid(r.id, r.attempt));
          for (let i = 0; i < rids.length; i++) {
            for (let j = 0; j < rids.length; j++) if (i !== j) expect(rids[j]!.startsWith(rids[i]!)).toBe(false);
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it('are plain ASCII that no JSON writer escapes, whatever the id', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 20 }), fc.nat(9), (id, attempt) => {
        const rid = upstreamRid(id, attempt);
        expect(rid).toMatch(/^[\x21-\x7e]+$/);
        expect(JSON.stringify(rid)).toBe(`"${rid}"`);
      }),
      { numRuns: 300 },
    );
  });

  it('carry the logical id and the attempt, recoverable exactly', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), fc.nat(100), (id, attempt) => {
        expect(parseUpstreamRid(upstreamRid(id, attempt))).toEqual({ id, attempt });
      }),
      { numRuns: 500 },
    );
    expect(upstreamRid('job-1', 0)).toMatch(/^job-1~m0~[0-9a-f]{16}$/);
    expect(parseUpstreamRid('job-1')).toBeNull();
  });
});
