// Copy-paste curl commands: a first request for an empty dashboard, and a replay of a request
// whose body the host kept. Shell-quoted with single quotes. Pure (the unit tests run it in Node).

export const SAMPLE_BODY = { input_ids: [1, 2, 3, 4, 5, 6, 7, 8], sampling_params: { max_new_tokens: 64, temperature: 0 }, stream: true };

/** The router's client-facing paths a body can be posted to, one per wire format and front. */
export type FrontPath = '/generate' | '/inference/v1/generate' | '/v1/chat/completions' | '/v1/completions';

export const FRONT_PATHS: readonly FrontPath[] = ['/generate', '/inference/v1/generate', '/v1/chat/completions', '/v1/completions'];

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Which front a body belongs to, read from its shape as each server reads it: OpenAI chat has
 * `messages` (vLLM's ChatCompletionRequest), OpenAI completions a `prompt` and no SGLang keys
 * (vLLM's CompletionRequest; SGLang's /generate names its prompt `text` or `input_ids`), vLLM's
 * token-in/token-out generate `token_ids` (GenerateRequest in vllm/entrypoints/serve/disagg),
 * and everything else SGLang's /generate (GenerateReqInput).
 */
export function frontOf(body: unknown): FrontPath {
  if (!isObject(body)) return '/generate';
  if (Array.isArray(body.messages)) return '/v1/chat/completions';
  if (Array.isArray(body.token_ids)) return '/inference/v1/generate';
  if ('prompt' in body && !('input_ids' in body) && !('text' in body) && !('sampling_params' in body)) return '/v1/completions';
  return '/generate';
}

/** The id a replay of request `id` runs under: its own, and linked to the original by name. */
export function replayId(id: string, n = 1): string {
  return `${id}-replay-${n}`;
}

export interface CurlOptions {
  /** The path the original was posted to (the host knows it for its traffic); else read from the body. */
  path?: FrontPath | null;
  /**
   * The original request's id: the replay is sent with `X-Request-Id: <id>-replay-1`, and an
   * SGLang body's `rid`, if it has one, becomes the same (the router takes a body's rid before
   * the header, so both must move or the replay would reuse the original's id).
   */
  requestId?: string | null;
}

/**
 * POST the body to the router's front for it (SGLang's /generate, vLLM's /inference/v1/generate,
 * the OpenAI /v1/chat/completions or /v1/completions); -N streams the answer as it comes.
 */
export function curlGenerate(routerUrl: string | null, body: unknown, opts: CurlOptions = {}): string {
  const base = (routerUrl || 'http://127.0.0.1:30080').replace(/\/$/, '');
  const path = opts.path ?? frontOf(body);
  let sent = body;
  const headers = [`-H 'content-type: application/json'`];
  if (opts.requestId) {
    const id = replayId(opts.requestId);
    headers.push(`-H ${shellQuote(`x-request-id: ${id}`)}`);
    if (path === '/generate' && isObject(body) && typeof body.rid === 'string') sent = { ...body, rid: replayId(body.rid) };
  }
  const stream = isObject(body) && body.stream === true;
  return `curl -s${stream ? 'N' : ''} ${base}${path} ${headers.join(' ')} -d ${shellQuote(JSON.stringify(sent))}`;
}
