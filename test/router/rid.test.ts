// Upstream rids: unique and prefix-free per attempt, whatever ids clients send (SGLang refuses a
// duplicate rid in flight and aborts every rid that *starts with* the one given to /abort_request).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { formatRid, parseUpstreamRid, ridReplica, setRidIdentity, upstreamRid } from '../../router/migration/rid.ts';

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
    expect(upstreamRid('job-1', 0)).toMatch(/^job-1~m0~[0-9a-f]{24}$/);
    expect(parseUpstreamRid('job-1')).toBeNull();
  });

  // Replicas (router/replicas/): each process counts from 1 and may draw the same random digits;
  // what keeps their rids apart is the replica id and epoch.
  it('from different replicas or epochs never meet or prefix one another, even when their random digits and counters do', () => {
    const hex4 = fc.integer({ min: 0, max: 0xffff }).map((n) => n.toString(16).padStart(4, '0'));
    fc.assert(
      fc.property(
        fc.array(fc.record({ replica: hex4, epoch: fc.integer({ min: 0, max: 0xffff }), id: fc.constantFrom('job-1', 'job-10', 'a', 'a~m1', ''), attempt: fc.nat(3), n: fc.nat(3) }), { minLength: 2, maxLength: 30 }),
        (reqs) => {
          const key = (r: (typeof reqs)[number]) => `${r.replica}/${r.epoch}/${r.id}/${r.attempt}/${r.n}`;
          const rids = reqs.map((r) => formatRid(r.id, r.attempt, r.replica + r.epoch.toString(16).padStart(4, '0') + 'cafef00d', r.n));
          for (let i = 0; i < rids.length; i++) {
            expect(ridReplica(rids[i]!)).toEqual({ replica: reqs[i]!.replica, epoch: reqs[i]!.epoch });
            for (let j = 0; j < rids.length; j++) {
              if (key(reqs[i]!) === key(reqs[j]!)) continue;
              expect(rids[j]!.startsWith(rids[i]!)).toBe(false);
            }
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it('carry the identity the process was given', () => {
    setRidIdentity('00a3', 0x10002);
    expect(ridReplica(upstreamRid('x', 0))).toEqual({ replica: '00a3', epoch: 2 });
    expect(parseUpstreamRid(upstreamRid('x', 1))).toEqual({ id: 'x', attempt: 1 });
    expect(() => setRidIdentity('r1', 0)).toThrow(/4 lowercase hex/);
  });
});
