// Every answer the router writes itself on SGLang's surface, in SGLang's exact status, shape and
// wording: one module, so that /generate, /abort_request and the routing layer cannot drift
// apart. Sources (docs/sglang-fidelity.md has the table with file:line):
// - a request's ValueError (http_server.py generate_request): a stream gets status 200, one
//   `data: {"error": {...}}` frame and `data: [DONE]`; a unary request gets 400 {"error": {"message"}};
// - a body FastAPI cannot validate (RequestValidationError, which SGLang turns from 422 into 400):
//   {"object": "error", "message": <repr of pydantic's error list>, "type": "Bad Request", "param": null, "code": 400};
// - an HTTPException (FastAPI's "There was an error parsing the body", and the router's own size
//   and time limits): the same object with `type` = the status as a string;
// - an unknown path or a wrong method: Starlette's {"detail": "Not Found"} / {"detail": "Method Not Allowed"}.
import type { ServerResponse } from 'node:http';

/** The `type` current SGLang puts in a stream's ValueError frame (http_server.py, since 2026-06). */
export const VALUE_ERROR_TYPE = 'invalid_request_error';

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), ...headers });
  res.end(text);
}

/** The in-band frame SGLang writes for a stream request's ValueError. */
export function valueErrorFrame(message: string): string {
  return `data: ${JSON.stringify({ error: { message, type: VALUE_ERROR_TYPE, code: 400, retryable: false } })}\n\n`;
}

/**
 * A request refused for a reason SGLang raises as a ValueError (a duplicate rid, ...): in-band
 * for a stream (the 200 and the event-stream headers have gone out in SGLang by then), 400 for
 * a unary request.
 */
export function writeValueError(res: ServerResponse, stream: boolean, message: string, headers: Record<string, string> = {}): void {
  if (!stream) {
    sendJson(res, 400, { error: { message } }, headers);
    return;
  }
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', ...headers });
  res.end(valueErrorFrame(message) + 'data: [DONE]\n\n');
}

/** SGLang's ErrorResponse, as its exception handlers write it. */
export function objectError(res: ServerResponse, status: number, message: string, type: string, headers: Record<string, string> = {}): void {
  sendJson(res, status, { object: 'error', message, type, param: null, code: status }, headers);
}

/** A body FastAPI refuses (RequestValidationError): SGLang answers 400 "Bad Request". */
export function malformedBody(res: ServerResponse, errors: PydanticError[], headers: Record<string, string> = {}): void {
  objectError(res, 400, validationMessage(errors), 'Bad Request', headers);
}

/** An HTTPException: SGLang's handler sets `type` to the status code as a string. */
export function httpException(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
  objectError(res, status, message, String(status), headers);
}

/** FastAPI's message when the body bytes are not JSON it can decode (invalid UTF-8, too deep). */
export const BODY_PARSE_ERROR = 'There was an error parsing the body';

export function notFound(res: ServerResponse): void {
  sendJson(res, 404, { detail: 'Not Found' });
}

export function methodNotAllowed(res: ServerResponse, allowed: string[]): void {
  sendJson(res, 405, { detail: 'Method Not Allowed' }, { allow: allowed.join(', ') });
}

// --- pydantic's error list, as FastAPI's str(RequestValidationError) prints it ---------------

/** One entry of pydantic's `errors()` (FastAPI strips the `url` key). */
export interface PydanticError {
  type: string;
  loc: (string | number)[];
  msg: string;
  input: unknown;
  ctx?: Record<string, unknown>;
}

/** Marks a value that must print as Python bytes (b'...'), as FastAPI's body is for a non-JSON content type. */
export class PyBytes {
  constructor(readonly text: string) {}
}

const REPR_LIMIT = 300;

function pyString(s: string, bytes = false): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = '';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '\\') out += '\\\\';
    else if (ch === quote) out += '\\' + quote;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (c < 0x20 || c === 0x7f || (bytes && c > 0x7e)) out += c <= 0xff ? `\\x${c.toString(16).padStart(2, '0')}` : ch;
    else out += ch;
  }
  return (bytes ? 'b' : '') + quote + out + quote;
}

/** Python's repr() of a JSON value (dict, list, str, int/float, True/False/None), cut at a length. */
export function pyRepr(v: unknown, limit = REPR_LIMIT): string {
  const text = reprOf(v);
  return text.length > limit ? text.slice(0, limit) + '...' : text;
}

function reprOf(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : v > 0 ? 'inf' : v < 0 ? '-inf' : 'nan';
  if (typeof v === 'string') return pyString(v);
  if (v instanceof PyBytes) return pyString(v.text, true);
  if (Array.isArray(v)) return '[' + v.map(reprOf).join(', ') + ']';
  if (typeof v === 'object') return '{' + Object.entries(v as Record<string, unknown>).map(([k, x]) => `${pyString(k)}: ${reprOf(x)}`).join(', ') + '}';
  return pyString(String(v));
}

function locRepr(loc: (string | number)[]): string {
  const parts = loc.map((p) => (typeof p === 'number' ? String(p) : pyString(p)));
  return parts.length === 1 ? `(${parts[0]},)` : `(${parts.join(', ')})`;
}

/**
 * SGLang's message for a RequestValidationError: `str(exc)`, which for FastAPI is the repr of
 * the error list (`[{'type': ..., 'loc': (...), 'msg': ..., 'input': ...}]`).
 */
export function validationMessage(errors: PydanticError[]): string {
  const items = errors.map((e) => {
    let s = `{'type': ${pyString(e.type)}, 'loc': ${locRepr(e.loc)}, 'msg': ${pyString(e.msg)}, 'input': ${pyRepr(e.input)}`;
    if (e.ctx) s += `, 'ctx': ${pyRepr(e.ctx)}`;
    return s + '}';
  });
  return `[${items.join(', ')}]`;
}
