// Copy-paste curl commands: a first request for an empty dashboard, and a replay of a request
// whose body the host kept. Shell-quoted with single quotes.

export const SAMPLE_BODY = { input_ids: [1, 2, 3, 4, 5, 6, 7, 8], sampling_params: { max_new_tokens: 64, temperature: 0 }, stream: true };

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** POST {router}/generate with this body; -N streams the answer as it comes. */
export function curlGenerate(routerUrl: string | null, body: unknown): string {
  const base = (routerUrl || 'http://127.0.0.1:30080').replace(/\/$/, '');
  const stream = typeof body === 'object' && body !== null && (body as { stream?: unknown }).stream === true;
  return `curl -s${stream ? 'N' : ''} ${base}/generate -H 'content-type: application/json' -d ${shellQuote(JSON.stringify(body))}`;
}
