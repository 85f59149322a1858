// Upstream rids: one per attempt, unique and prefix-free among everything Baton sends.
//
// Why not the client's id: SGLang refuses a rid that is already in flight ("Duplicate request ID
// detected", tokenizer_manager.py), clients share correlation headers (x-trace-id), and SGLang's
// /abort_request aborts every request whose rid *starts with* the given one
// (scheduler.py, `req.rid.startswith(recv_req.rid)`), so aborting `job-1` would abort `job-10`.
//
// Shape: `<escaped id>~m<attempt>~<24 hex>`. The escaped id keeps [A-Za-z0-9._-] and writes any
// other UTF-16 unit as `%XX` or `%uXXXX`, so it never contains `~`: two rids of different ids
// differ at or before the first `~`; the same id's rids differ in the attempt number (followed
// by `~`) or in the fixed-length suffix. No rid is then a prefix of another. The id stays
// readable in the worker's logs, and a rid is plain ASCII that no JSON writer escapes, so its
// bytes in a worker's frame are exactly `"<rid>"` (see swapId in formats/sglang/session.ts).
import { randomBytes } from 'node:crypto';

const SAFE = /^[A-Za-z0-9._-]*$/;

function escapeId(id: string): string {
  if (SAFE.test(id)) return id;
  let out = '';
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    const ch = id[i]!;
    if (/[A-Za-z0-9._-]/.test(ch)) out += ch;
    else if (c < 0x100) out += '%' + c.toString(16).padStart(2, '0');
    else out += '%u' + c.toString(16).padStart(4, '0');
  }
  return out;
}

function unescapeId(s: string): string | null {
  let out = '';
  for (let i = 0; i < s.length; ) {
    const ch = s[i]!;
    if (ch !== '%') {
      out += ch;
      i++;
      continue;
    }
    const wide = s[i + 1] === 'u';
    const hex = wide ? s.slice(i + 2, i + 6) : s.slice(i + 1, i + 3);
    if (!/^[0-9a-f]+$/.test(hex) || hex.length !== (wide ? 4 : 2)) return null;
    out += String.fromCharCode(parseInt(hex, 16));
    i += wide ? 6 : 3;
  }
  return out;
}

// The 24-hex suffix: the replica id (4 hex) and epoch (4 hex, its restart count mod 2^16) of the
// router process (router/replicas/identity.ts: distinct among one primary's replicas), 8 random
// hex digits drawn once per process (so two routers, or two runs, in front of one worker do not
// collide), and an 8-digit counter. Replicas of one `--replicas` group differ in their id, so
// their rids differ even where the random digits would meet. A randomBytes() call per attempt
// cost ~11 µs of a short request's CPU (bench W1, measured with --cpu-prof): the prefix is a
// string made once.
let prefix = '0000' + '0000' + randomBytes(4).toString('hex');
let counter = 0;

/** Set the replica id (4 lowercase hex) and epoch this process's rids carry; before any request. */
export function setRidIdentity(replicaId: string, epoch: number): void {
  if (!/^[0-9a-f]{4}$/.test(replicaId)) throw new Error(`replica id must be 4 lowercase hex digits, got '${replicaId}'`);
  prefix = replicaId + (epoch & 0xffff).toString(16).padStart(4, '0') + prefix.slice(8);
}

export function upstreamRid(id: string, attempt: number): string {
  counter = (counter + 1) >>> 0;
  return formatRid(id, attempt, prefix, counter);
}

/** A rid from its parts: `origin` is the 16 hex of replica id, epoch and random digits; `n` the counter. */
export function formatRid(id: string, attempt: number, origin: string, n: number): string {
  return `${escapeId(id)}~m${attempt}~${origin}${n.toString(16).padStart(8, '0')}`;
}

const SHAPE = /^([A-Za-z0-9._%-]*)~m(\d+)~([0-9a-f]{4})([0-9a-f]{4})[0-9a-f]{16}$/;

/** The logical id and attempt index of an upstream rid made by `upstreamRid`, or null. */
export function parseUpstreamRid(rid: string): { id: string; attempt: number } | null {
  const m = SHAPE.exec(rid);
  if (!m) return null;
  const id = unescapeId(m[1]!);
  return id === null ? null : { id, attempt: Number(m[2]) };
}

/** The replica id and epoch (mod 2^16) an upstream rid carries, or null. */
export function ridReplica(rid: string): { replica: string; epoch: number } | null {
  const m = SHAPE.exec(rid);
  return m ? { replica: m[3]!, epoch: parseInt(m[4]!, 16) } : null;
}
