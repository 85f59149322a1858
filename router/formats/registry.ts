// The wire formats Baton speaks. Adding one is a folder under router/formats/<name>/ and a line
// here; nothing under router/migration/ names a format.
import type { FormatName, WireFormat } from '../core/types.ts';
import { SGLANG } from './sglang/index.ts';
import { VLLM } from './vllm/index.ts';

/** In probing order: SGLang's probe needs its own keys, so a vLLM worker never passes for one. */
export const FORMATS: readonly WireFormat[] = [SGLANG, VLLM];

export function formatNamed(name: FormatName): WireFormat {
  const f = FORMATS.find((x) => x.name === name);
  if (!f) throw new Error(`no wire format '${name}'`);
  return f;
}
