// The SSE splitter and frame classifier run on every token; their laws: any split of the byte
// stream into chunks yields the same whole frames, a cut frame is never handed out, and the
// byte scan agrees with a JSON parse on what a frame is.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { FrameKind, SseSplitter, classifyFrame, framePayload, runningAt, scanCompletionTokens, scanOutputIds } from '../../router/formats/sglang/sse.ts';

const chunkArb = fc.record({
  output_ids: fc.array(fc.nat(32000), { maxLength: 8 }),
  meta_info: fc.record({
    id: fc.string({ maxLength: 12 }),
    finish_reason: fc.oneof(fc.constant(null), fc.record({ type: fc.constantFrom('length', 'stop'), length: fc.nat(100) }), fc.record({ type: fc.constant('abort'), message: fc.string(), status_code: fc.constantFrom(400, 500, 503) })),
    completion_tokens: fc.nat(5000),
    note: fc.string({ maxLength: 20 }), // arbitrary text, including quotes and "finish_reason":
  }),
});

function splitAt(buf: Buffer, cuts: number[]): Buffer[] {
  const points = [...new Set(cuts.map((c) => c % (buf.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let prev = 0;
  for (const p of points) {
    out.push(buf.subarray(prev, p));
    prev = p;
  }
  out.push(buf.subarray(prev));
  return out;
}

describe('SseSplitter', () => {
  it('hands out the same whole frames however the bytes are chunked', () => {
    fc.assert(
      fc.property(fc.array(chunkArb, { maxLength: 8 }), fc.array(fc.nat(), { maxLength: 30 }), fc.boolean(), (chunks, cuts, cutLast) => {
        const frames = chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`);
        let text = frames.join('') + 'data: [DONE]\n\n';
        if (cutLast) text = text.slice(0, -3); // a frame cut by a failure
        const bytes = Buffer.from(text);
        const got: string[] = [];
        const s = new SseSplitter();
        for (const part of splitAt(bytes, cuts)) s.push(part, (b, st, en) => got.push(b.toString('utf8', st, en)));
        const want = [...frames, ...(cutLast ? [] : ['data: [DONE]\n\n'])];
        expect(got).toEqual(want);
      }),
      { numRuns: 500 },
    );
  });

  it('a frame over many reads, its blank line split between two: every cut into three pieces, and one byte at a time', () => {
    const text = 'data: {"a":1}\n\ndata: {"b":"' + 'x'.repeat(40) + '"}\n\ndata: [DONE]\n\n';
    const want = ['data: {"a":1}\n\n', `data: {"b":"${'x'.repeat(40)}"}\n\n`, 'data: [DONE]\n\n'];
    const bytes = Buffer.from(text);
    const run = (pieces: Buffer[]) => {
      const got: string[] = [];
      const s = new SseSplitter();
      for (const p of pieces) s.push(p, (b, st, en) => got.push(b.toString('utf8', st, en)));
      expect(s.pendingBytes).toBe(0);
      return got;
    };
    for (let i = 1; i < bytes.length; i++) {
      for (let j = i; j < bytes.length; j++) expect(run([bytes.subarray(0, i), bytes.subarray(i, j), bytes.subarray(j)])).toEqual(want);
    }
    expect(run([...bytes].map((b) => Buffer.from([b])))).toEqual(want);
  });
});

describe('runningAt', () => {
  it('says Running only where classifyFrame does, for the rid right before finish_reason', () => {
    fc.assert(
      fc.property(chunkArb, fc.boolean(), fc.nat(40), (c, error, shift) => {
        const rid = 'r~m0~0123456789abcdef';
        // meta_info's `id` first and `finish_reason` second, as SGLang writes them.
        const meta = { ...c.meta_info, id: rid };
        const chunk = error ? { error: { message: 'x' }, meta_info: { id: rid, finish_reason: null } } : { output_ids: c.output_ids, meta_info: Object.assign({ id: rid, finish_reason: meta.finish_reason }, meta) };
        const buf = Buffer.from(`data: ${JSON.stringify(chunk)}\n\n`);
        const ridJson = Buffer.from(JSON.stringify(rid));
        const k = buf.indexOf(ridJson);
        expect(runningAt(buf, 0, k, ridJson)).toBe(classifyFrame(buf, 0, buf.length) === FrameKind.Running);
        // Anywhere else it is never taken for a running frame's rid.
        const other = (k + 1 + shift) % buf.length;
        if (other !== k) expect(runningAt(buf, 0, other, ridJson)).toBe(false);
      }),
      { numRuns: 500 },
    );
  });
});

describe('classifyFrame', () => {
  it('agrees with JSON.parse on running, finished and [DONE] frames', () => {
    fc.assert(
      fc.property(chunkArb, (c) => {
        const buf = Buffer.from(`data: ${JSON.stringify(c)}\n\n`);
        const kind = classifyFrame(buf, 0, buf.length);
        expect(kind).toBe(c.meta_info.finish_reason === null ? FrameKind.Running : FrameKind.Finished);
        expect(JSON.parse(framePayload(buf, 0, buf.length))).toEqual(c);
        expect(scanCompletionTokens(buf, 0, buf.length)).toBe(c.meta_info.completion_tokens);
      }),
      { numRuns: 500 },
    );
  });

  it('recognises error frames, [DONE], and frames that are not data', () => {
    const k = (s: string) => classifyFrame(Buffer.from(s), 0, Buffer.byteLength(s));
    expect(k('data: {"error":{"message":"x"}}\n\n')).toBe(FrameKind.Error);
    expect(k('data: { "error": {"message":"x"}}\n\n')).toBe(FrameKind.Error);
    expect(k('data: [DONE]\n\n')).toBe(FrameKind.Done);
    expect(k(': keep-alive\n\n')).toBe(FrameKind.Ignored);
    expect(k('data:{"output_ids":[1],"meta_info":{"finish_reason": null}}\n\n')).toBe(FrameKind.Running);
    expect(k('data: {"output_ids":[1],"meta_info":{}}\n\n')).toBe(FrameKind.Unknown);
  });
});

describe('scanOutputIds', () => {
  const frame = (json: string) => Buffer.from(`data: ${json}\n\n`);

  it('reads the same ids as JSON.parse, however the list is spaced, after what is already there', () => {
    fc.assert(
      fc.property(fc.array(fc.nat({ max: 2 ** 31 }), { maxLength: 40 }), fc.array(fc.nat(), { maxLength: 3 }), fc.constantFrom(undefined, 1, '\t'), (ids, prior, space) => {
        const json = JSON.stringify({ text: undefined, output_ids: ids, meta_info: { id: 'x', finish_reason: null, completion_tokens: ids.length } }, null, space);
        const buf = frame(json);
        const out = [...prior];
        expect(scanOutputIds(buf, 0, buf.length, out)).toBe(true);
        expect(out).toEqual([...prior, ...(JSON.parse(json) as { output_ids: number[] }).output_ids]);
      }),
      { numRuns: 500 },
    );
  });

  it('refuses, leaving the list untouched, anything but a plain list of non-negative integers', () => {
    for (const bad of [
      '{"meta_info":{}}',
      '{"output_ids":null}',
      '{"output_ids":[1,-2]}',
      '{"output_ids":[1,2.5]}',
      '{"output_ids":[1,1e3]}',
      '{"output_ids":[1,"2"]}',
      '{"output_ids":[01]}',
      '{"output_ids":[1,,2]}',
      '{"output_ids":[1,2',
      '{"output_ids":[12345678901234567890]}',
    ]) {
      const out = [7];
      const buf = frame(bad);
      expect(scanOutputIds(buf, 0, buf.length, out), bad).toBe(false);
      expect(out).toEqual([7]);
    }
  });

  it('stays inside the frame it is given', () => {
    const buf = Buffer.concat([frame('{"meta_info":{}}'), frame('{"output_ids":[4,5]}')]);
    const first = frame('{"meta_info":{}}').length;
    const out: number[] = [];
    expect(scanOutputIds(buf, 0, first, out)).toBe(false);
    expect(scanOutputIds(buf, first, buf.length, out)).toBe(true);
    expect(out).toEqual([4, 5]);
  });
});
