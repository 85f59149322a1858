// Finding what a Responses request names: the response of `previous_response_id` and the items of
// `item_reference`s, in this process's store, else (replicas of one router) from the replica whose
// id the response's key carries (store.ts). The errors are vLLM's and OpenAI's words: an unknown
// response is vLLM's 404 `Response with id '...' not found.` (responses/serving.py
// _make_not_found_error), an id that is no response id SGLang's 400 (serving_responses.py
// _make_invalid_id_error), an unknown item OpenAI's 404 `Item with id '...' not found.`.
import type { JsonObject } from '../../../core/types.ts';
import { OpenAiError } from '../request.ts';
import type { Resolved, ResponsesRefs } from './request.ts';
import { keyOfItemId, keyOfResponseId } from './store.ts';

/** A stored response, read: the Response object and the input items it was generated from. */
export interface StoredParts {
  response: JsonObject;
  input: JsonObject[];
}

/** Where stored responses are read from. */
export interface StoreReader {
  /** This process's copy, or null. */
  local(id: string): StoredParts | null;
  /** The copy of the replica that made `key`, or null when no other replica can hold it. */
  remote(key: string): Promise<StoredParts | null> | null;
}

const TYPE = 'invalid_request_error';

export const notFound = (id: string, param: string): OpenAiError => new OpenAiError(404, `Response with id '${id}' not found.`, param, TYPE);
export const invalidId = (id: string, param: string): OpenAiError => new OpenAiError(400, `Invalid '${param}': '${id}'. Expected an ID that begins with 'resp'.`, param, TYPE);
const itemNotFound = (id: string): OpenAiError => new OpenAiError(404, `Item with id '${id}' not found.`, 'input', TYPE);

/** A stored response by id: here, else from its owner; null when neither has it. */
export function readStored(id: string, reader: StoreReader): StoredParts | null | Promise<StoredParts | null> {
  const here = reader.local(id);
  if (here) return here;
  const key = keyOfResponseId(id);
  return key === null ? null : reader.remote(key);
}

/** An item of a stored response, by id: its output first, then its input. */
function itemOf(parts: StoredParts, id: string): JsonObject | null {
  const output = Array.isArray(parts.response.output) ? (parts.response.output as JsonObject[]) : [];
  return output.find((o) => o.id === id) ?? parts.input.find((o) => o.id === id) ?? null;
}

/**
 * The request's references, resolved; an OpenAiError for the first that is not found. Synchronous
 * when this process holds everything named (the common case: one router, or the same replica).
 */
export function resolveRefs(refs: ResponsesRefs, reader: StoreReader): Resolved | OpenAiError | Promise<Resolved | OpenAiError> {
  if (refs.previous === null && refs.items.length === 0) return { previous: null, items: new Map() };
  if (refs.previous !== null && !refs.previous.startsWith('resp')) return invalidId(refs.previous, 'previous_response_id');
  // Each stored response read once, however many of its items are named.
  const wanted = new Map<string, StoredParts | null | Promise<StoredParts | null>>();
  const read = (id: string) => {
    if (!wanted.has(id)) wanted.set(id, readStored(id, reader));
    return wanted.get(id)!;
  };
  if (refs.previous !== null) read(refs.previous);
  for (const item of refs.items) {
    const key = keyOfItemId(item);
    if (key !== null) read(`resp_${key}`);
  }
  const finish = (): Resolved | OpenAiError => {
    const got = (id: string) => wanted.get(id) as StoredParts | null | undefined;
    let previous: JsonObject[] | null = null;
    if (refs.previous !== null) {
      const p = got(refs.previous);
      if (!p) return notFound(refs.previous, 'previous_response_id');
      previous = [...p.input, ...(Array.isArray(p.response.output) ? (p.response.output as JsonObject[]) : [])];
    }
    const items = new Map<string, JsonObject>();
    for (const id of refs.items) {
      const key = keyOfItemId(id);
      const parts = key === null ? null : got(`resp_${key}`);
      const item = parts ? itemOf(parts, id) : null;
      if (!item) return itemNotFound(id);
      items.set(id, item);
    }
    return { previous, items };
  };
  const pending = [...wanted.entries()].filter((e): e is [string, Promise<StoredParts | null>] => e[1] instanceof Promise);
  if (pending.length === 0) return finish();
  return Promise.all(pending.map(async ([id, p]) => wanted.set(id, await p))).then(finish);
}
