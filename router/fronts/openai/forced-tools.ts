// The answer to a "required" or named tool_choice, as SGLang's serving_chat.py
// _process_tool_calls and _process_tool_call_stream read it for those choices: the reasoning
// parser first; then the model's own call format through the configured --tool-call-parser (what
// SGLang's structural-tag constraint makes a model write; the session runs the parsers); else the
// JSON array of `{name, parameters}` objects the JSON-schema constraint makes it write
// (constraints.ts toolChoiceSchema), read here: orjson.loads of the whole text, arguments
// json.dumps(parameters, ensure_ascii=False), ids `call_<24 hex>`. Text that is neither (a worker
// without a grammar backend, a truncated answer) stays content, as SGLang leaves it when its
// parse fails.
import { randomBytes } from 'node:crypto';
import { isObject } from '../../core/json.ts';

const THINK_END = '</think>';

export interface ForcedCall {
  id: string;
  name: string;
  arguments: string;
}

export function forcedToolCalls(text: string): ForcedCall[] | null {
  // A worker with a reasoning parser lets the model think before the grammar applies (SGLang's
  // ReasonerGrammarBackend, vLLM's reasoning_ended): the array follows the thought, which the
  // router's --reasoning-parser has taken out already when it is configured.
  const thought = text.lastIndexOf(THINK_END);
  let data: unknown;
  try {
    data = JSON.parse(thought >= 0 ? text.slice(thought + THINK_END.length) : text);
  } catch {
    return null;
  }
  if (!Array.isArray(data) || data.length === 0) return null;
  const out: ForcedCall[] = [];
  for (const t of data) {
    if (!isObject(t) || typeof t.name !== 'string') return null;
    out.push({ id: `call_${randomBytes(12).toString('hex')}`, name: t.name, arguments: pyDumps(t.parameters ?? {}) });
  }
  return out;
}

/** Python's json.dumps(v, ensure_ascii=False): ", " and ": " separators. */
export function pyDumps(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(pyDumps).join(', ')}]`;
  if (isObject(v)) return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}: ${pyDumps(x)}`).join(', ')}}`;
  return JSON.stringify(v);
}
