// The wire formats Baton speaks. Adding one is a folder under router/formats/<name>/ and a line
// here; nothing under router/migration/ names a format.
import type { FormatName, WireFormat } from '../core/types.ts';
import { SGLANG } from './sglang/index.ts';
import { VLLM } from './vllm/index.ts';

/** In probing order: SGLang's probe needs its own keys, so a vLLM worker never passes for one. */
export const FORMATS: readonly WireFormat[] = [SGLANG, VLLM];

/**
 * The worker format of a worker not yet probed, and of a pool question that names none: SGLang,
 * the format Baton was first written for (its CLI, /generate, is the default front too).
 */
export const UNPROBED: FormatName = SGLANG.workers;

export function formatNamed(name: FormatName): WireFormat {
  const f = FORMATS.find((x) => x.name === name);
  if (!f) throw new Error(`no wire format '${name}'`);
  return f;
}
