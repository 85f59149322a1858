// A small OTLP/HTTP trace receiver on loopback: what a collector's HTTP port (4318) does with
// POST /v1/traces, for the bench (export on, to somewhere real) and the tracing tests. It decodes
// both encodings the OTLP exporters send, protobuf (`application/x-protobuf`, decoded here from
// the wire format after opentelemetry-proto's trace.proto) and JSON (`application/json`, OTLP's
// JSON mapping: hex ids, lowerCamelCase keys), into one plain shape.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type AttrValue = string | number | boolean | AttrValue[] | { [key: string]: AttrValue } | null;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  traceState: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  /** Unix nanoseconds. */
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, AttrValue>;
  events: { name: string; timeNs: bigint; attributes: Record<string, AttrValue> }[];
  links: { traceId: string; spanId: string; attributes: Record<string, AttrValue> }[];
  /** OTLP StatusCode: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  resource: Record<string, AttrValue>;
  scope: string;
  /** Which encoding it arrived in. */
  encoding: 'protobuf' | 'json';
}

// --- protobuf wire format --------------------------------------------------------------------

class Reader {
  pos = 0;
  constructor(readonly buf: Buffer, readonly end = buf.length) {}

  done(): boolean {
    return this.pos >= this.end;
  }

  varint(): bigint {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (this.pos >= this.end) throw new Error('truncated varint');
      const b = this.buf[this.pos++]!;
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
    }
  }

  /** A field's key: [number, wire type]. */
  key(): [number, number] {
    const k = Number(this.varint());
    return [k >>> 3, k & 7];
  }

  bytes(): Buffer {
    const len = Number(this.varint());
    const start = this.pos;
    this.pos += len;
    if (this.pos > this.end) throw new Error('truncated field');
    return this.buf.subarray(start, this.pos);
  }

  fixed64(): bigint {
    const v = this.buf.readBigUInt64LE(this.pos);
    this.pos += 8;
    return v;
  }

  fixed32(): number {
    const v = this.buf.readUInt32LE(this.pos);
    this.pos += 4;
    return v;
  }

  double(): number {
    const v = this.buf.readDoubleLE(this.pos);
    this.pos += 8;
    return v;
  }

  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 1) this.pos += 8;
    else if (wire === 2) this.bytes();
    else if (wire === 5) this.pos += 4;
    else throw new Error(`unsupported wire type ${wire}`);
  }
}

/** Each field of a message: `on(number, wireType, reader)` reads it or returns false to skip. */
function fields(buf: Buffer, on: (n: number, wire: number, r: Reader) => boolean): void {
  const r = new Reader(buf);
  while (!r.done()) {
    const [n, wire] = r.key();
    if (!on(n, wire, r)) r.skip(wire);
  }
}

function anyValue(buf: Buffer): AttrValue {
  let v: AttrValue = null;
  fields(buf, (n, wire, r) => {
    if (n === 1 && wire === 2) v = r.bytes().toString('utf8');
    else if (n === 2 && wire === 0) v = r.varint() !== 0n;
    else if (n === 3 && wire === 0) v = Number(BigInt.asIntN(64, r.varint()));
    else if (n === 4 && wire === 1) v = r.double();
    else if (n === 5 && wire === 2) {
      const arr: AttrValue[] = [];
      fields(r.bytes(), (m, w2, r2) => (m === 1 && w2 === 2 ? (arr.push(anyValue(r2.bytes())), true) : false));
      v = arr;
    } else if (n === 6 && wire === 2) v = keyValues([r.bytes()]);
    else if (n === 7 && wire === 2) v = r.bytes().toString('hex');
    else return false;
    return true;
  });
  return v;
}

function keyValues(list: Buffer[]): Record<string, AttrValue> {
  const out: Record<string, AttrValue> = {};
  for (const kv of list) {
    let key = '';
    let value: AttrValue = null;
    fields(kv, (n, wire, r) => {
      if (n === 1 && wire === 2) key = r.bytes().toString('utf8');
      else if (n === 2 && wire === 2) value = anyValue(r.bytes());
      else return false;
      return true;
    });
    out[key] = value;
  }
  return out;
}

function protoSpan(buf: Buffer, resource: Record<string, AttrValue>, scope: string): ReceivedSpan {
  const s: ReceivedSpan = {
    traceId: '', spanId: '', parentSpanId: '', traceState: '', name: '', kind: 0, startNs: 0n, endNs: 0n,
    attributes: {}, events: [], links: [], status: { code: 0, message: '' }, resource, scope, encoding: 'protobuf',
  };
  const attrs: Buffer[] = [];
  fields(buf, (n, wire, r) => {
    switch (n) {
      case 1: s.traceId = r.bytes().toString('hex'); return true;
      case 2: s.spanId = r.bytes().toString('hex'); return true;
      case 3: s.traceState = r.bytes().toString('utf8'); return true;
      case 4: s.parentSpanId = r.bytes().toString('hex'); return true;
      case 5: s.name = r.bytes().toString('utf8'); return true;
      case 6: s.kind = Number(r.varint()); return true;
      case 7: s.startNs = r.fixed64(); return true;
      case 8: s.endNs = r.fixed64(); return true;
      case 9: attrs.push(r.bytes()); return true;
      case 11: {
        const ev = { name: '', timeNs: 0n, attributes: {} as Record<string, AttrValue> };
        const evAttrs: Buffer[] = [];
        fields(r.bytes(), (m, _w, r2) => {
          if (m === 1) ev.timeNs = r2.fixed64();
          else if (m === 2) ev.name = r2.bytes().toString('utf8');
          else if (m === 3) evAttrs.push(r2.bytes());
          else return false;
          return true;
        });
        ev.attributes = keyValues(evAttrs);
        s.events.push(ev);
        return true;
      }
      case 13: {
        const link = { traceId: '', spanId: '', attributes: {} as Record<string, AttrValue> };
        const linkAttrs: Buffer[] = [];
        fields(r.bytes(), (m, _w, r2) => {
          if (m === 1) link.traceId = r2.bytes().toString('hex');
          else if (m === 2) link.spanId = r2.bytes().toString('hex');
          else if (m === 4) linkAttrs.push(r2.bytes());
          else return false;
          return true;
        });
        link.attributes = keyValues(linkAttrs);
        s.links.push(link);
        return true;
      }
      case 15:
        fields(r.bytes(), (m, w2, r2) => {
          if (m === 2 && w2 === 2) s.status.message = r2.bytes().toString('utf8');
          else if (m === 3 && w2 === 0) s.status.code = Number(r2.varint());
          else return false;
          return true;
        });
        return true;
      case 16:
        if (wire === 5) r.fixed32();
        else return false;
        return true;
      default:
        return false;
    }
  });
  s.attributes = keyValues(attrs);
  return s;
}

/** ExportTraceServiceRequest (protobuf) to spans. */
export function decodeProtobuf(body: Buffer): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  fields(body, (n, _w, r) => {
    if (n !== 1) return false;
    let resource: Record<string, AttrValue> = {};
    const scopeSpans: Buffer[] = [];
    fields(r.bytes(), (m, _w2, r2) => {
      if (m === 1) {
        const attrs: Buffer[] = [];
        fields(r2.bytes(), (k, _w3, r3) => (k === 1 ? (attrs.push(r3.bytes()), true) : false));
        resource = keyValues(attrs);
      } else if (m === 2) scopeSpans.push(r2.bytes());
      else return false;
      return true;
    });
    for (const ss of scopeSpans) {
      let scope = '';
      const spans: Buffer[] = [];
      fields(ss, (m, _w2, r2) => {
        if (m === 1) fields(r2.bytes(), (k, _w3, r3) => (k === 1 ? ((scope = r3.bytes().toString('utf8')), true) : false));
        else if (m === 2) spans.push(r2.bytes());
        else return false;
        return true;
      });
      for (const sp of spans) out.push(protoSpan(sp, resource, scope));
    }
    return true;
  });
  return out;
}

// --- JSON ------------------------------------------------------------------------------------

type J = Record<string, unknown>;

function jsonValue(v: J | undefined): AttrValue {
  if (!v) return null;
  if ('stringValue' in v) return String(v.stringValue);
  if ('boolValue' in v) return Boolean(v.boolValue);
  if ('intValue' in v) return Number(v.intValue);
  if ('doubleValue' in v) return Number(v.doubleValue);
  if ('arrayValue' in v) return (((v.arrayValue as J)?.values as J[]) ?? []).map((x) => jsonValue(x));
  if ('kvlistValue' in v) return jsonAttrs(((v.kvlistValue as J)?.values as J[]) ?? []);
  if ('bytesValue' in v) return String(v.bytesValue);
  return null;
}

function jsonAttrs(list: J[] | undefined): Record<string, AttrValue> {
  const out: Record<string, AttrValue> = {};
  for (const kv of list ?? []) out[String(kv.key)] = jsonValue(kv.value as J);
  return out;
}

/** OTLP/JSON ids are hex strings (the exporters write them so); base64 is accepted too. */
function jsonId(v: unknown): string {
  if (typeof v !== 'string' || v === '') return '';
  return /^[0-9a-f]+$/i.test(v) && (v.length === 32 || v.length === 16) ? v.toLowerCase() : Buffer.from(v, 'base64').toString('hex');
}

export function decodeJson(body: Buffer): ReceivedSpan[] {
  const doc = JSON.parse(body.toString('utf8')) as J;
  const out: ReceivedSpan[] = [];
  for (const rs of (doc.resourceSpans as J[]) ?? []) {
    const resource = jsonAttrs(((rs.resource as J)?.attributes as J[]) ?? []);
    for (const ss of (rs.scopeSpans as J[]) ?? []) {
      const scope = String((ss.scope as J)?.name ?? '');
      for (const sp of (ss.spans as J[]) ?? []) {
        const status = (sp.status as J) ?? {};
        out.push({
          traceId: jsonId(sp.traceId),
          spanId: jsonId(sp.spanId),
          parentSpanId: jsonId(sp.parentSpanId),
          traceState: String(sp.traceState ?? ''),
          name: String(sp.name ?? ''),
          kind: Number(sp.kind ?? 0),
          startNs: BigInt(String(sp.startTimeUnixNano ?? '0')),
          endNs: BigInt(String(sp.endTimeUnixNano ?? '0')),
          attributes: jsonAttrs(sp.attributes as J[]),
          events: ((sp.events as J[]) ?? []).map((e) => ({ name: String(e.name ?? ''), timeNs: BigInt(String(e.timeUnixNano ?? '0')), attributes: jsonAttrs(e.attributes as J[]) })),
          links: ((sp.links as J[]) ?? []).map((l) => ({ traceId: jsonId(l.traceId), spanId: jsonId(l.spanId), attributes: jsonAttrs(l.attributes as J[]) })),
          status: { code: Number(status.code ?? 0), message: String(status.message ?? '') },
          resource,
          scope,
          encoding: 'json',
        });
      }
    }
  }
  return out;
}

// --- the receiver ------------------------------------------------------------------------------

export interface OtlpReceiver {
  readonly url: string;
  readonly port: number;
  /** Spans received (only with `keep`). */
  readonly spans: ReceivedSpan[];
  /** Counts, kept either way. */
  readonly stats: { requests: number; spans: number; bytes: number; protobuf: number; json: number; errors: number };
  /** Stop listening and drop every connection (the collector goes down). */
  close(): Promise<void>;
  /** Listen again on the same port (the collector comes back). */
  reopen(): Promise<void>;
}

export async function startOtlpReceiver(opts: { port?: number; keep?: boolean } = {}): Promise<OtlpReceiver> {
  const keep = opts.keep ?? true;
  const spans: ReceivedSpan[] = [];
  const stats = { requests: 0, spans: 0, bytes: 0, protobuf: 0, json: 0, errors: 0 };
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const ct = String(req.headers['content-type'] ?? '');
      const json = ct.includes('json');
      if (req.method !== 'POST' || !(req.url ?? '').startsWith('/v1/traces')) {
        res.writeHead(404).end();
        return;
      }
      let got: ReceivedSpan[];
      try {
        got = json ? decodeJson(body) : decodeProtobuf(body);
      } catch (err) {
        stats.errors++;
        res.writeHead(400, { 'content-type': 'text/plain' }).end((err as Error).message);
        return;
      }
      stats.requests++;
      stats.bytes += body.length;
      stats.spans += got.length;
      if (json) stats.json += got.length;
      else stats.protobuf += got.length;
      if (keep) spans.push(...got);
      // An empty ExportTraceServiceResponse: {} in JSON, zero bytes in protobuf.
      if (json) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  };
  let server: Server = createServer(handle);
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve((server.address() as AddressInfo).port);
      });
    });
  const port = await listen(opts.port ?? 0);
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    spans,
    stats,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
    reopen: async () => {
      server = createServer(handle);
      await listen(port);
    },
  };
}
