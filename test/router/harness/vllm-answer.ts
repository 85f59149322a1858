// vLLM answers compared across two calls (the router's and a worker's own).

/** An answer without the one field that differs between two calls (`created`, a time): the frames of a stream, or the unary body. */
export function comparable(text: string): unknown {
  if (!text.startsWith('data:')) {
    const j = JSON.parse(text) as Record<string, unknown>;
    delete j.created;
    return j;
  }
  return text.split('\n\n').filter(Boolean).map((f) => (f === 'data: [DONE]' ? f : JSON.parse(f.slice(6))));
}
