// Checks that keep hostile HTTP input out, each a pure function of the request's bytes and
// headers. They sit in front of /generate and the admin routes (router/index.ts); each names the
// attack it stops, because none of them is needed by a well-behaved client.
import { createHash, timingSafeEqual } from 'node:crypto';
import { validateHeaderValue, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { isLoopback } from '../loopback.ts';

/**
 * FastAPI's rule for a JSON body: no content type, or application/json, or application/*+json.
 * text/plain and forms are what a web page may POST cross-site without a CORS preflight.
 */
export function isJsonContentType(header: string | undefined): boolean {
  if (header === 'application/json') return true; // what nearly every client sends
  if (header === undefined || header.trim() === '') return true;
  const type = header.split(';')[0]!.trim().toLowerCase();
  if (!type.startsWith('application/')) return false;
  const sub = type.slice('application/'.length);
  return sub === 'json' || sub.endsWith('+json');
}


/** Deeper than any real request; far below where JSON.stringify overflows the stack (~10,000). */
export const MAX_JSON_DEPTH = 512;

/**
 * A body Python's json would refuse before parsing (FastAPI: "There was an error parsing the
 * body"): bytes that are not UTF-8 (`text` is `raw` decoded), or nesting past MAX_JSON_DEPTH.
 */
export function unparseableBody(raw: Buffer, text: string): boolean {
  return (text.includes('\uFFFD') && !raw.equals(Buffer.from(text, 'utf8'))) || jsonDepthExceeds(text, MAX_JSON_DEPTH);
}

/**
 * Whether JSON text nests deeper than `max`. V8's JSON.parse accepts a million levels, but
 * JSON.stringify recurses and throws past about ten thousand: a small valid body with a deep
 * opaque field would parse, be admitted, and blow up when forwarded. A scan of the bytes, not a
 * walk of the parsed value, so the check itself cannot recurse.
 */
export function jsonDepthExceeds(text: string, max: number): boolean {
  // Deeper than `max` takes more than `max` opening brackets.
  if (text.length <= max) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/**
 * Whether a parsed JSON value could have come from text with a number hasLossyNumber would flag:
 * such a number parses to an integer of magnitude 2^53 or more, or to ±Infinity. False is exact
 * (nothing lossy); true means: ask hasLossyNumber. A walk of the parsed value, cheaper than a
 * scan of the text for the usual body of small numbers; its depth is bounded by the depth check
 * (MAX_JSON_DEPTH) that runs before any body is parsed.
 */
export function mayHoldLossyNumber(v: unknown): boolean {
  if (typeof v === 'number') return !(Math.abs(v) < 2 ** 53);
  if (typeof v !== 'object' || v === null) return false;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) if (mayHoldLossyNumber(v[i])) return true;
    return false;
  }
  for (const k in v) if (mayHoldLossyNumber((v as Record<string, unknown>)[k])) return true;
  return false;
}

/**
 * Whether JSON text holds a number JSON.parse cannot keep exactly: an integer beyond 2^53 (Python
 * reads it exactly, and the router would forward another value after re-serialising the body:
 * PD disaggregation's 64-bit bootstrap_room is one) or a magnitude past the double range (1e999,
 * which JSON.stringify writes as null). A scan of the bytes outside strings; no recursion.
 */
export function hasLossyNumber(text: string): boolean {
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) {
      inString = true;
      continue;
    }
    if (c !== 0x2d && (c < 0x30 || c > 0x39)) continue;
    let j = i + 1;
    let integer = true;
    for (; j < text.length; j++) {
      const d = text.charCodeAt(j);
      if (d >= 0x30 && d <= 0x39) continue;
      if (d === 0x2e || d === 0x65 || d === 0x45 || d === 0x2b || d === 0x2d) {
        integer = false;
        continue;
      }
      break;
    }
    const from = i;
    i = j - 1;
    // An integer of 15 characters or fewer is exact: no need to read it (nor to slice it out).
    if (integer && j - from <= 15) continue;
    const value = Number(text.slice(from, j));
    if (integer ? !Number.isSafeInteger(value) : !Number.isFinite(value)) return true;
  }
  return false;
}

/**
 * Whether a value can go out as a header as it is. A client's rid is echoed in x-request-id;
 * Node throws on CR, LF and characters above U+00FF, and a throw on the token path would be taken
 * for a worker failure (blaming a healthy worker) or leave a request half-finished.
 */
export function isHeaderSafe(value: string): boolean {
  try {
    validateHeaderValue('x-request-id', value);
    return true;
  } catch {
    return false;
  }
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** Two strings compared in constant time (their hashes: equal lengths always). */
function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

/**
 * Whether a request carries `key` as SGLang reads a key (sglang/srt/utils/auth.py,
 * decide_request_auth's `_check_token`): `Authorization: <scheme> <key>` split at the first
 * space, the scheme `bearer` in any case, or the key alone in `x-api-key` (Anthropic's header).
 * Compared in constant time. Used for both the api key and the admin token.
 */
export function keyMatches(headers: IncomingHttpHeaders, key: string): boolean {
  const auth = headers.authorization;
  if (typeof auth === 'string') {
    const sp = auth.indexOf(' ');
    if (sp > 0 && auth.slice(0, sp).toLowerCase() === 'bearer' && sameSecret(auth.slice(sp + 1), key)) return true;
  }
  const x = headers['x-api-key'];
  return typeof x === 'string' && x.length > 0 && sameSecret(x, key);
}

/**
 * Requests SGLang lets through without its api key (auth.py decide_request_auth): OPTIONS, and
 * paths that start with /health, /ready or /metrics ("to support k8s probes and Prometheus
 * scraping without embedding secrets"; matched by prefix, so /health_generate too).
 */
export function keyExempt(method: string, pathname: string): boolean {
  return method === 'OPTIONS' || pathname.startsWith('/health') || pathname.startsWith('/ready') || pathname.startsWith('/metrics')
    // Baton's own probes (http/lifecycle.ts) that the prefixes miss, exempt for the same reason;
    // SGLang serves no such path. (/readyz is under /ready; /readiness is not.)
    || pathname === '/livez' || pathname === '/liveness' || pathname === '/readiness';
}

/**
 * Who may call a route:
 * - `data`: the data plane (/generate, the OpenAI front, vLLM's generate and abort, SGLang's
 *   info endpoints, an abort by rid): the api key when one is set (SGLang's NORMAL level);
 * - `admin`: Baton's own admin surfaces (the worker API, traces, events, the dashboard's API):
 *   the admin token when one is set, else a loopback caller that is not a web page (and the api
 *   key, when one is set);
 * - `destructive`: SGLang's calls that act on other clients' requests or on every worker
 *   (`/flush_cache`; `/abort_request` with `abort_all`): the admin token when one is set (as
 *   SGLang's ADMIN_OPTIONAL level under `--admin-api-key`, where the api key is not accepted),
 *   else the api key when set, and never a web page;
 * - `abort`: `/abort_request`, whose level its body decides (an abort by rid is `data`,
 *   `abort_all` is `destructive`): the door takes either key, its handler decides.
 */
export type Access = 'data' | 'admin' | 'destructive' | 'abort';

export interface Keys {
  apiKey: string | null;
  adminToken: string | null;
}

export interface Refusal {
  status: number;
  /** The body, as JSON. */
  body: unknown;
  headers: Record<string, string>;
}

/** SGLang's refusal of a request without its key (auth.py add_api_key_middleware): 401 `{"error": "Unauthorized"}`. */
export const UNAUTHORIZED: Refusal = { status: 401, body: { error: 'Unauthorized' }, headers: {} };

function adminRefusal(status: number, message: string, type: string, headers: Record<string, string> = {}): Refusal {
  return { status, body: { object: 'error', message, type, param: null, code: status }, headers };
}

/**
 * Why a request may not reach a route of level `access`, or null. Pure: the request's headers,
 * method and path, and the keys the router was started with.
 */
export function accessRefusal(req: IncomingMessage, pathname: string, access: Access, keys: Keys): Refusal | null {
  const { apiKey, adminToken } = keys;
  switch (access) {
    case 'data':
      return apiKey !== null && !keyExempt(req.method ?? 'GET', pathname) && !keyMatches(req.headers, apiKey) ? UNAUTHORIZED : null;
    case 'abort':
      // Either key opens the door; the handler asks destructiveRefusal for abort_all.
      if (apiKey === null || keyMatches(req.headers, apiKey) || (adminToken !== null && keyMatches(req.headers, adminToken))) return null;
      return UNAUTHORIZED;
    case 'destructive':
      return destructiveRefusal(req, keys, false);
    case 'admin': {
      if (adminToken !== null) {
        return keyMatches(req.headers, adminToken) ? null : adminRefusal(401, 'this endpoint needs the admin token (Authorization: Bearer ...)', 'Unauthorized', { 'www-authenticate': 'Bearer' });
      }
      // No token means loopback only, and loopback must also hold against web pages in a browser.
      const cross = crossSiteRefusal(req);
      if (cross) return adminRefusal(cross.status, cross.message, 'Forbidden');
      if (apiKey !== null && !keyMatches(req.headers, apiKey)) return adminRefusal(401, 'this endpoint needs the api key (Authorization: Bearer ...)', 'Unauthorized', { 'www-authenticate': 'Bearer' });
      return null;
    }
  }
}

/**
 * Why a destructive call (`abort_all`, `/flush_cache`) may not go ahead, or null: the admin token
 * when one is set (SGLang's answer to a missing key); else, on a loopback router, the api key when
 * set (`keyChecked`: the door has checked it already), and no web page: a request addressed to a
 * foreign Host name or from a foreign Origin is refused, as for the admin routes. (Unlike them a
 * POST needs no JSON content type: SGLang's clients POST /flush_cache with no body.)
 */
export function destructiveRefusal(req: IncomingMessage, keys: Keys, keyChecked: boolean): Refusal | null {
  if (keys.adminToken !== null) return keyMatches(req.headers, keys.adminToken) ? null : UNAUTHORIZED;
  if (!keyChecked && keys.apiKey !== null && !keyMatches(req.headers, keys.apiKey)) return UNAUTHORIZED;
  const cross = crossSiteRefusal(req, false);
  return cross ? adminRefusal(cross.status, cross.message, 'Forbidden') : null;
}

function hostName(hostHeader: string): string | null {
  try {
    return new URL(`http://${hostHeader}`).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return null;
  }
}

/**
 * Why an admin request on a tokenless loopback router must be refused, or null. Loopback stops
 * other machines, not the browser on this one: a web page can POST text/plain or a form to
 * 127.0.0.1 without a preflight (so a POST must say JSON, which needs one; PUT and DELETE always
 * need one), it sends its Origin (which must be this router), and a DNS name rebound to
 * 127.0.0.1 arrives with a foreign Host (which must be a loopback name). `jsonPosts`: whether a
 * POST must say JSON.
 */
export function crossSiteRefusal(req: IncomingMessage, jsonPosts = true): { status: number; message: string } | null {
  const host = req.headers.host;
  const name = host === undefined ? null : hostName(host);
  if (name === null || !isLoopback(name)) {
    return { status: 403, message: 'admin endpoints answer only requests addressed to a loopback name (localhost, 127.0.0.1, [::1]); set --admin-token to reach them otherwise' };
  }
  const origin = req.headers.origin;
  if (origin !== undefined) {
    let originHost: string | null = null;
    try {
      originHost = new URL(origin).host;
    } catch {
      // an unparsable Origin is foreign
    }
    if (originHost !== host) return { status: 403, message: 'cross-origin request to an admin endpoint refused' };
  }
  const type = req.headers['content-type'];
  if (jsonPosts && req.method === 'POST' && (type === undefined || !isJsonContentType(type))) {
    return { status: 415, message: 'POST to an admin endpoint must be content-type application/json' };
  }
  return null;
}
