// Copy-paste curl commands: a first request for an empty dashboard, and a replay of a request
// whose body the host kept. Shell-quoted with single quotes.

export const SAMPLE_BODY = { input_ids: [1, 2, 3, 4, 5, 6, 7, 8], sampling_params: { max_new_tokens: 64, temperature: 0 }, stream: true };

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * POST the body to the router's generate endpoint of its format (SGLang's /generate, or vLLM's
 * /inference/v1/generate for a body with `token_ids`); -N streams the answer as it comes.
 */
export function curlGenerate(routerUrl: string | null, body: unknown): string {
  const base = (routerUrl || 'http://127.0.0.1:30080').replace(/\/$/, '');
  const b = typeof body === 'object' && body !== null ? (body as { stream?: unknown; token_ids?: unknown }) : {};
  const path = Array.isArray(b.token_ids) ? '/inference/v1/generate' : '/generate';
  return `curl -s${b.stream === true ? 'N' : ''} ${base}${path} -H 'content-type: application/json' -d ${shellQuote(JSON.stringify(body))}`;
}
