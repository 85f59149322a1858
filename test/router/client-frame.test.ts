// Attempt 0's frames go to a streaming client as the worker wrote them but for meta_info.id,
// which is rewritten in the read buffer itself (session.ts clientFrame). Its law: whatever the
// client's id (quotes, control characters, non-ASCII, longer than the upstream rid), wherever
// the id sits in meta_info, and however the frames are cut into reads, the client receives each
// frame with exactly the upstream rid's JSON replaced by its own id's JSON, and nothing else.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { ClientSink } from '../../router/core/client-sink.ts';
import type { AttemptHost } from '../../router/core/types.ts';
import { SglangSession } from '../../router/formats/sglang/session.ts';
import { parseGenerateRequest } from '../../router/formats/sglang/request.ts';
import { SseSplitter } from '../../router/formats/sglang/sse.ts';
import { upstreamRid } from '../../router/migration/rid.ts';

function frame(ids: number[], rid: string, finish: unknown, idFirst: boolean, n: number): string {
  const meta = idFirst
    ? { id: rid, finish_reason: finish, prompt_tokens: 4, completion_tokens: n }
    : { finish_reason: finish, prompt_tokens: 4, id: rid, completion_tokens: n };
  return `data: ${JSON.stringify({ output_ids: ids, meta_info: meta })}\n\n`;
}

function run(id: string, idFirst: boolean, tokens: number, cuts: number[]): { sent: string[]; want: string[] } {
  const sent: string[] = [];
  const sink = {
    streaming: true,
    writeRaw: (d: Buffer | string) => (sent.push(Buffer.from(d).toString('utf8')), true),
    endStream: () => undefined,
  } as unknown as ClientSink;
  const req = parseGenerateRequest({ input_ids: [1, 2, 3, 4], sampling_params: { max_new_tokens: tokens }, stream: true });
  const session = new SglangSession(req, { id, budget: tokens, startedAt: 0 }, sink);
  const rid = upstreamRid(id, 0);
  const host: AttemptHost = {
    write: (d) => void sent.push(Buffer.from(d).toString('utf8')),
    accept: () => true,
    firstFrame: () => undefined,
    finished: () => undefined,
    stopped: () => undefined,
    failed: (f) => {
      throw new Error(f.message);
    },
  };
  const attempt = session.attempt({ index: 0, rid, replayed: [], remaining: null, minTokens: 0 }, { url: 'http://w', incremental: false, modelPath: null }, host, true, {});
  const frames: string[] = [];
  const want: string[] = [];
  const out: number[] = [];
  for (let n = 1; n <= tokens; n++) {
    out.push(100 + n);
    const finish = n === tokens ? { type: 'length', length: tokens } : null;
    frames.push(frame(out, rid, finish, idFirst, n));
    want.push(frame(out, id, finish, idFirst, n));
  }
  const bytes = Buffer.from(frames.join(''));
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const splitter = new SseSplitter();
  let prev = 0;
  // Each read its own buffer, as a socket's are.
  for (const p of [...points, bytes.length]) {
    splitter.push(Buffer.from(bytes.subarray(prev, p)), (b, s, e) => attempt.onFrame(b, s, e));
    prev = p;
  }
  return { sent, want };
}

describe('attempt 0: the client id swapped into forwarded frames', () => {
  it('sends each frame with only the rid replaced, for any id and any cut into reads', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.string({ maxLength: 40 }), fc.string({ unit: 'binary', maxLength: 40 }), fc.constantFrom('a', 'W1-baton-1-1-7', '"\n\t\u0001\u0002\u0003\u0004\u0005\u0006\u0007\u0008', 'é✓😀')),
        fc.boolean(),
        fc.integer({ min: 1, max: 14 }), // past 9: the counters change width, and the tail with them
        fc.array(fc.nat(), { maxLength: 6 }),
        (id, idFirst, tokens, cuts) => {
          const { sent, want } = run(id, idFirst, tokens, cuts);
          expect(sent).toEqual(want);
          for (const s of sent) expect((JSON.parse(s.slice(6)) as { meta_info: { id: string } }).meta_info.id).toBe(id);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('an id whose JSON is longer than the rid (many control characters) is spliced into a new buffer', () => {
    const id = '\u0001'.repeat(12);
    const { sent, want } = run(id, true, 3, [17]);
    expect(sent).toEqual(want);
  });
});
