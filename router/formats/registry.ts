// The wire formats Baton speaks, and the one place outside router/formats/<name>/ that names
// them. Adding one is a folder under router/formats/<name>/ (its `WireFormat`) and a line here;
// whatever the rest of the router knows of a format (its name as discovery, traces, metrics and
// OTel spans spell it, its generate path, what bounds a request) it reads off the `WireFormat`
// through this list. A format without a front of its own is served on its generate path by the
// plain front (fronts/plain.ts).
import type { WireFormat } from '../core/types.ts';
import { SGLANG } from './sglang/index.ts';
import { VLLM } from './vllm/index.ts';

/**
 * In probing order: SGLang's probe needs its own keys, so a vLLM worker never passes for one.
 * The first is the default (UNPROBED).
 */
const SHIPPED = [SGLANG, VLLM] as const;

/** The names of the wire formats Baton ships, as a union (the core spells a format's name as a string). */
export type FormatName = (typeof SHIPPED)[number]['workers'];

const formats: WireFormat[] = [...SHIPPED];

/** Every wire format, in probing order (the pool probes a worker with each in turn). */
export const FORMATS: readonly WireFormat[] = formats;

/**
 * What a worker not yet probed is taken to speak, and what a pool question that names no format
 * asks workers of (GET /v1/models without tokenizers): SGLang's, the format Baton began with.
 */
export const UNPROBED: FormatName = SHIPPED[0].workers;

/** The workers' format names, in probing order (what discovery accepts as a worker's `format`). */
export function formatNames(): string[] {
  return formats.map((f) => f.workers);
}

export function formatNamed(name: string): WireFormat {
  const f = formats.find((x) => x.name === name);
  if (!f) throw new Error(`no wire format '${name}'`);
  return f;
}

/**
 * A format of the tests' own (test/router/toy-format/), probed after the shipped ones, until the
 * returned function takes it out again. The router reads this list when it starts a front, probes a
 * worker or checks a discovered worker's format, so a router started after the call speaks it.
 */
export function registerFormat(format: WireFormat): () => void {
  if (formats.some((f) => f.name === format.name)) throw new Error(`a wire format '${format.name}' is registered already`);
  formats.push(format);
  return () => {
    const i = formats.indexOf(format);
    if (i >= 0) formats.splice(i, 1);
  };
}
