// The response head of router/upstream/h1.ts's client: the status line and the header fields it
// acts on, read once per response (never on the body's path). What the fields mean for the
// connection (reuse, the body's framing) H1Connection decides.

const CR = 13;
const LF = 10;

/** A response head as parseHead reads it: the status and the fields the client acts on. */
export interface ResponseHead {
  status: number;
  /** An HTTP/1.0 response. */
  http10: boolean;
  contentType: string;
  /** A Transfer-Encoding field was sent; `chunked`: its last coding is chunked. */
  te: boolean;
  chunked: boolean;
  /** Content-Length, -1 for none. */
  length: number;
  /** The Connection field, lower-cased ('' for none). */
  connection: string;
  /** The last Keep-Alive field's `timeout=` in seconds, -1 for none. */
  keepAliveS: number;
}

/** An empty head for parseHead to fill (one per caller: parseHead overwrites every field it reads). */
export function responseHead(): ResponseHead {
  return { status: 0, http10: false, contentType: '', te: false, chunked: false, length: -1, connection: '', keepAliveS: -1 };
}

/** Where the head line that ends at `eol` (its LF, or -1 for the last line) stops, a CR before the LF dropped. */
function lineEnd(head: string, eol: number): number {
  const e = eol < 0 ? head.length : eol;
  return e > 0 && head.charCodeAt(e - 1) === CR ? e - 1 : e;
}

/**
 * Read the status line and the header fields of `head` (lines end in LF, a CR before it dropped:
 * H1Connection.headEnd) into `out`; null when they are sound, else what is wrong with them, as the
 * protocol error says it. `out` holds what was read up to the fault.
 */
export function parseHead(head: string, out: ResponseHead): string | null {
  out.contentType = '';
  out.te = false;
  out.chunked = false;
  out.length = -1;
  out.connection = '';
  out.keepAliveS = -1;
  // HTTP/1.x SP 3DIGIT SP reason
  const minor = head.charCodeAt(7);
  if (!head.startsWith('HTTP/1.') || !(minor >= 48 && minor <= 57) || head.charCodeAt(8) !== 0x20) return 'not an HTTP/1.x status line';
  // Three digits (Number() would take '2e2' for 200).
  let status = 0;
  for (let k = 9; k < 12; k++) {
    const d = head.charCodeAt(k) - 48;
    status = d >= 0 && d <= 9 ? status * 10 + d : NaN;
  }
  const after = head.charCodeAt(12);
  if (!(status >= 100 && status <= 999) || (head.length > 12 && after !== 0x20 && after !== CR && after !== LF)) return 'invalid status code';
  out.status = status;
  out.http10 = minor === 0x30;
  // `from` is the LF before the next line.
  let from = head.indexOf('\n');
  while (from >= 0) {
    let eol = head.indexOf('\n', from + 1);
    let line = head.slice(from + 1, lineEnd(head, eol));
    from = eol;
    // obs-fold: a line that starts with SP or HTAB continues the field before it. RFC 9112 §5.2:
    // a user agent replaces each fold with SP and reads the value so (one charCodeAt per line).
    while (from >= 0 && (head.charCodeAt(from + 1) === 0x20 || head.charCodeAt(from + 1) === 0x09)) {
      eol = head.indexOf('\n', from + 1);
      line = `${line.trimEnd()} ${head.slice(from + 1, lineEnd(head, eol)).trimStart()}`;
      from = eol;
    }
    const colon = line.indexOf(':');
    // No colon, an empty name, or whitespace between the status line and the first field (RFC
    // 9112 §2.2: rejected, never taken for a fold).
    if (colon <= 0 || line.charCodeAt(0) === 0x20 || line.charCodeAt(0) === 0x09) return 'invalid header line';
    const name = line.slice(0, colon).toLowerCase();
    const value = line.slice(colon + 1).trim();
    switch (name) {
      case 'content-type':
        out.contentType = value;
        break;
      case 'transfer-encoding':
        out.te = true;
        // The last coding decides (RFC 9112 §6.3): chunked last, else the body runs to the close.
        out.chunked = /(?:^|,)\s*chunked\s*$/i.test(value);
        break;
      case 'content-length': {
        const v = /^\d{1,15}$/.test(value) ? Number(value) : NaN;
        if (Number.isNaN(v) || (out.length >= 0 && v !== out.length)) return 'invalid Content-Length';
        out.length = v;
        break;
      }
      case 'connection':
        out.connection = value.toLowerCase();
        break;
      case 'keep-alive': {
        const m = /timeout=(\d+)/i.exec(value);
        if (m) out.keepAliveS = Number(m[1]);
        break;
      }
    }
  }
  return null;
}
