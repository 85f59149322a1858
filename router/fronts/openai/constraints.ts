// Constrained decoding through the OpenAI front: `tool_choice` ("required" and named tools),
// `response_format`, vLLM's `structured_outputs` (and its older `guided_*` names), SGLang's `regex`,
// `ebnf` and `json_schema`. Baton cannot enforce a grammar itself: it reads the client's fields into
// one neutral constraint (`TokenConstraint`, core/types.ts), which each worker format writes as
// its own fields (SGLang's sampling_params json_schema / regex / ebnf / structural_tag, vLLM's
// sampling_params.structured_outputs). Those fields make the request stateful for admission (a
// continuation would restart the grammar at the continuation prompt, as Dynamo concludes), so a
// constrained request is served on one attempt and never migrated, with the reason in its trace
// row. Wording of the refusals: vLLM's where vLLM checks (chat_completion/protocol.py
// check_tool_usage, check_structured_outputs_count, validate_response_format;
// v1/structured_output/backend_xgrammar.py validate_xgrammar_grammar), SGLang's where only SGLang
// does (serving_chat.py _validate_request).
import { isObject } from '../../core/json.ts';
import type { JsonObject, TokenConstraint } from '../../core/types.ts';
import { OpenAiError } from './request.ts';

const bad = (message: string, param: string | null = null) => new OpenAiError(400, message, param);

/** Python's str() of a JSON value, as vLLM's f-strings print a request field. */
function py(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (typeof v === 'string') return v;
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (typeof v === 'number') return String(v);
  if (Array.isArray(v)) return `[${v.map(pyRepr).join(', ')}]`;
  return `{${Object.entries(v as JsonObject).map(([k, x]) => `${pyRepr(k)}: ${pyRepr(x)}`).join(', ')}}`;
}

function pyRepr(v: unknown): string {
  return typeof v === 'string' ? `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'` : py(v);
}

// --- tools and tool_choice --------------------------------------------------------------------

export interface ToolChoice {
  /** 'none' also when no tools were sent (vLLM's default without tools). */
  mode: 'none' | 'auto' | 'required' | 'named';
  /** The named function (mode 'named'). */
  name: string | null;
}

const USAGE = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`';

/** A function tool's name and parameters schema, or a 400 naming the tool. */
function toolFunction(t: unknown, i: number): { name: string; parameters: unknown } {
  if (!isObject(t) || !isObject(t.function) || typeof t.function.name !== 'string') {
    throw bad(`tools[${i}] must be a function tool: {"type": "function", "function": {"name": ..., "parameters": {...}}}`, 'tools');
  }
  if (t.type !== undefined && t.type !== 'function') throw bad(`tools[${i}].type must be 'function', got ${JSON.stringify(t.type)}`, 'tools');
  return { name: t.function.name, parameters: t.function.parameters };
}

/**
 * `tools` and `tool_choice` checked as vLLM's ChatCompletionRequest.check_tool_usage does, in its
 * order and words; a tool's parameters schema as SGLang's _validate_request checks it.
 */
export function readToolChoice(body: JsonObject): { tools: JsonObject[] | null; choice: ToolChoice } {
  const raw = body.tools;
  if (raw !== undefined && raw !== null && !Array.isArray(raw)) throw bad('tools must be a list', 'tools');
  if (Array.isArray(raw) && raw.length === 0) throw bad('`tools` must not be an empty array. Either provide at least one tool or omit the field entirely.', 'tools');
  const tools = Array.isArray(raw) ? (raw as JsonObject[]) : null;
  const fns = tools?.map(toolFunction) ?? [];
  fns.forEach((f, i) => {
    if (f.parameters === undefined || f.parameters === null) return;
    const problem = schemaProblem(f.parameters, 0);
    if (problem !== null) throw bad(`Tool ${i} function has invalid 'parameters' schema: ${problem}`, 'tools');
  });
  // No tool_choice with tools: "auto"; without tools, "none" (vLLM's field default).
  let tc: unknown = 'tool_choice' in body ? body.tool_choice : tools ? 'auto' : 'none';
  if (tc === null) tc = tools ? 'auto' : 'none';
  if (tc === 'none') return { tools, choice: { mode: 'none', name: null } };
  if (!tools) throw bad('When using `tool_choice`, `tools` must be set.', 'tool_choice');
  if (tc === 'auto' || tc === 'required') return { tools, choice: { mode: tc, name: null } };
  if (!isObject(tc)) throw bad(`Invalid value for \`tool_choice\`: ${py(tc)}! Only named tools, "none", "auto" or "required" are supported.`, 'tool_choice');
  const fn = tc.function;
  if (!isObject(fn)) throw bad(`Invalid value for \`function\`: \`${py(fn)}\` in \`tool_choice\`! ${USAGE}`, 'tool_choice.function');
  if (!('name' in fn)) throw bad(`Expected field \`name\` in \`function\` in \`tool_choice\`! ${USAGE}`, 'tool_choice.function.name');
  const name = fn.name;
  if (typeof name !== 'string' || name.length === 0) throw bad(`Invalid \`name\` in \`function\`: \`${py(name)}\` in \`tool_choice\`! ${USAGE}`, 'tool_choice.function.name');
  if (!fns.some((f) => f.name === name)) throw bad('The tool specified in `tool_choice` does not match any of the specified `tools`', 'tool_choice');
  return { tools, choice: { mode: 'named', name } };
}

/**
 * The JSON schema a "required" or named tool_choice is enforced with: SGLang's
 * function_call/utils.py get_json_schema_constraint (an array of `{name, parameters}` objects, at
 * most one with parallel_tool_calls false). vLLM's own named-tool schema is the parameters alone;
 * Baton sends SGLang's shape to both worker formats so that one reader turns the answer into
 * tool calls (forced-tools.ts).
 */
export function toolChoiceSchema(tools: JsonObject[], choice: ToolChoice, parallel: boolean): JsonObject | null {
  const item = (t: JsonObject): JsonObject => {
    const f = toolFunction(t, 0);
    return {
      properties: { name: { type: 'string', enum: [f.name] }, parameters: isObject(f.parameters) && Object.keys(f.parameters).length > 0 ? f.parameters : { type: 'object', properties: {} } },
      required: ['name', 'parameters'],
    };
  };
  let schema: JsonObject;
  if (choice.mode === 'named') {
    const t = tools.find((x) => toolFunction(x, 0).name === choice.name)!;
    schema = { type: 'array', minItems: 1, items: item(t) };
  } else if (choice.mode === 'required') {
    schema = { type: 'array', minItems: 1, items: { type: 'object', anyOf: tools.map(item) } };
    const defs: JsonObject = {};
    for (const t of tools) {
      const p = toolFunction(t, 0).parameters;
      if (!isObject(p) || !isObject(p.$defs)) continue;
      for (const [k, v] of Object.entries(p.$defs)) {
        if (k in defs && JSON.stringify(defs[k]) !== JSON.stringify(v)) throw bad(`Tool definition '${k}' has multiple schemas, which is not supported.`, 'tools');
        defs[k] = v;
      }
    }
    if (Object.keys(defs).length > 0) schema.$defs = defs;
  } else {
    return null;
  }
  if (!parallel) schema.maxItems = 1;
  return schema;
}

// --- JSON schemas ----------------------------------------------------------------------------

const TYPES = new Set(['null', 'boolean', 'object', 'array', 'number', 'string', 'integer']);
const SCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'];
const SCHEMA_LISTS = ['anyOf', 'oneOf', 'allOf', 'prefixItems'];
const SCHEMA_ONE = ['items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains', 'propertyNames'];

/**
 * What makes `s` no JSON schema (the meta-schema's structural rules: Draft 2020-12's
 * check_schema, as SGLang runs it on tool parameters, and the shapes xgrammar needs), or null.
 * Keywords are not otherwise interpreted: the worker's grammar backend compiles the schema.
 */
export function schemaProblem(s: unknown, depth: number): string | null {
  if (depth > 64) return 'the schema is too deeply nested';
  if (typeof s === 'boolean') return null;
  if (!isObject(s)) return `${JSON.stringify(s)} is not of type 'object', 'boolean'`;
  const t = s.type;
  if (t !== undefined) {
    const list = Array.isArray(t) ? t : [t];
    for (const x of list) if (typeof x !== 'string' || !TYPES.has(x)) return `${JSON.stringify(x)} is not valid under any of the given schemas (type)`;
  }
  if (s.required !== undefined && !(Array.isArray(s.required) && s.required.every((x) => typeof x === 'string'))) return `${JSON.stringify(s.required)} is not of type 'array' of strings (required)`;
  if (s.enum !== undefined && !Array.isArray(s.enum)) return `${JSON.stringify(s.enum)} is not of type 'array' (enum)`;
  for (const k of SCHEMA_MAPS) {
    const v = s[k];
    if (v === undefined) continue;
    if (!isObject(v)) return `${JSON.stringify(v)} is not of type 'object' (${k})`;
    for (const sub of Object.values(v)) {
      const p = schemaProblem(sub, depth + 1);
      if (p !== null) return p;
    }
  }
  for (const k of SCHEMA_LISTS) {
    const v = s[k];
    if (v === undefined) continue;
    if (!Array.isArray(v) || v.length === 0) return `${JSON.stringify(v)} is not a non-empty 'array' (${k})`;
    for (const sub of v) {
      const p = schemaProblem(sub, depth + 1);
      if (p !== null) return p;
    }
  }
  for (const k of SCHEMA_ONE) {
    if (s[k] === undefined) continue;
    const p = schemaProblem(s[k], depth + 1);
    if (p !== null) return p;
  }
  for (const k of ['minItems', 'maxItems', 'minLength', 'maxLength', 'minProperties', 'maxProperties']) {
    const v = s[k];
    if (v !== undefined && !(typeof v === 'number' && Number.isInteger(v) && v >= 0)) return `${JSON.stringify(v)} is not a non-negative integer (${k})`;
  }
  return null;
}

/** A schema given as an object or as JSON text (vLLM and SGLang take both), checked. */
function jsonSchema(v: unknown, param: string): JsonObject | boolean {
  let schema = v;
  if (typeof v === 'string') {
    try {
      schema = JSON.parse(v);
    } catch {
      throw bad('Invalid JSON grammar specification.', param);
    }
  }
  const problem = schemaProblem(schema, 0);
  if (problem !== null) throw bad(`Failed to transform json schema into a grammar: ${problem}`, param);
  return schema as JsonObject | boolean;
}

function str(v: unknown, param: string): string {
  if (typeof v !== 'string' || v.length === 0) throw bad(`${param} must be a non-empty string`, param);
  return v;
}

function choices(v: unknown, param: string): string[] {
  if (!Array.isArray(v) || v.length === 0 || !v.every((x) => typeof x === 'string')) throw bad(`${param} must be a non-empty list of strings`, param);
  return v as string[];
}

function structuralTag(v: unknown, param: string): string {
  // vLLM's validate_structural_tag_response_format: a malformed tag is the request's fault.
  let tag = v;
  if (typeof v === 'string') {
    try {
      tag = JSON.parse(v);
    } catch {
      tag = null;
    }
  }
  const ok = isObject(tag) && (tag.format !== undefined || (Array.isArray(tag.structures) && Array.isArray(tag.triggers)));
  if (!ok) throw bad(`Invalid ${param} structural_tag specification.`, param);
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/** vLLM's StructuredOutputsParams options Baton passes on (for vLLM workers only). */
const SO_OPTIONS = ['disable_any_whitespace', 'disable_additional_properties', 'whitespace_pattern', 'disable_fallback'];

interface Found {
  c: TokenConstraint;
  from: string;
}

/**
 * Every constraint the body names, each read and checked: response_format (OpenAI's, vLLM's and
 * SGLang's protocol.py), structured_outputs (vLLM), guided_json / guided_regex / guided_choice /
 * guided_grammar (vLLM before structured_outputs replaced them), regex / ebnf / json_schema
 * (SGLang's ChatCompletionRequest and CompletionRequest extras).
 */
function found(body: JsonObject): Found[] {
  const out: Found[] = [];
  const rf = body.response_format;
  if (rf !== undefined && rf !== null) {
    if (!isObject(rf)) throw bad('response_format must be an object', 'response_format');
    const type = rf.type;
    if (type === 'json_object') out.push({ c: { kind: 'json_object' }, from: 'response_format' });
    else if (type === 'json_schema') {
      const js = rf.json_schema;
      if (js === undefined || js === null) throw bad("When response_format type is 'json_schema', the 'json_schema' field must be provided.", 'response_format');
      if (!isObject(js)) throw bad('response_format.json_schema must be an object', 'response_format');
      // SGLang's _validate_request (vLLM's JsonSchemaResponseFormat allows no schema, then fails later).
      if (js.schema === undefined || js.schema === null) throw bad('schema_ is required for json_schema response format request.', 'response_format');
      out.push({ c: { kind: 'json', schema: jsonSchema(js.schema, 'response_format') }, from: 'response_format' });
    } else if (type === 'structural_tag') out.push({ c: { kind: 'structural_tag', tag: structuralTag(rf, 'response_format') }, from: 'response_format' });
    else if (type !== 'text') throw bad(`response_format.type must be one of 'text', 'json_object', 'json_schema', 'structural_tag', got ${JSON.stringify(type)}`, 'response_format');
  }
  const so = body.structured_outputs;
  let options: JsonObject | undefined;
  if (so !== undefined && so !== null) {
    if (!isObject(so)) throw bad('structured_outputs must be an object', 'structured_outputs');
    const p = 'structured_outputs';
    if (so.json !== undefined && so.json !== null) out.push({ c: { kind: 'json', schema: jsonSchema(so.json, p) }, from: p });
    if (so.regex !== undefined && so.regex !== null) out.push({ c: { kind: 'regex', pattern: str(so.regex, 'structured_outputs.regex') }, from: p });
    if (so.choice !== undefined && so.choice !== null) out.push({ c: { kind: 'choice', choices: choices(so.choice, 'structured_outputs.choice') }, from: p });
    if (so.grammar !== undefined && so.grammar !== null) out.push({ c: { kind: 'grammar', grammar: str(so.grammar, 'structured_outputs.grammar') }, from: p });
    if (so.json_object !== undefined && so.json_object !== null && so.json_object !== false) out.push({ c: { kind: 'json_object' }, from: p });
    if (so.structural_tag !== undefined && so.structural_tag !== null) out.push({ c: { kind: 'structural_tag', tag: structuralTag(so.structural_tag, p) }, from: p });
    const opts = SO_OPTIONS.filter((k) => so[k] !== undefined && so[k] !== null);
    if (opts.length > 0) options = Object.fromEntries(opts.map((k) => [k, so[k]])) as JsonObject;
    if (out.every((f) => f.from !== p)) throw bad(`You must use one kind of structured outputs constraint but none are specified: ${py(so)}`, p);
  }
  const field = (k: string, read: (v: unknown) => TokenConstraint) => {
    const v = body[k];
    if (v !== undefined && v !== null) out.push({ c: read(v), from: k });
  };
  field('guided_json', (v) => ({ kind: 'json', schema: jsonSchema(v, 'guided_json') }));
  field('guided_regex', (v) => ({ kind: 'regex', pattern: str(v, 'guided_regex') }));
  field('guided_choice', (v) => ({ kind: 'choice', choices: choices(v, 'guided_choice') }));
  field('guided_grammar', (v) => ({ kind: 'grammar', grammar: str(v, 'guided_grammar') }));
  field('regex', (v) => ({ kind: 'regex', pattern: str(v, 'regex') }));
  field('ebnf', (v) => ({ kind: 'grammar', grammar: str(v, 'ebnf') }));
  field('json_schema', (v) => ({ kind: 'json', schema: jsonSchema(v, 'json_schema') }));
  if (options) for (const f of out) if (f.from === 'structured_outputs') f.c.options = options;
  return out;
}

export interface Constrained {
  constraint: TokenConstraint | null;
  /** The constraint is tool_choice's: the answer is a JSON array of tool calls (forced-tools.ts). */
  forcedTools: boolean;
}

/**
 * The one constraint a request carries, or none. More than one: vLLM's refusal. A named
 * tool_choice beside a constraint: vLLM's refusal too; "required" beside one: the client's
 * constraint wins and no tool calls are forced (SGLang's to_sampling_params, which warns
 * "Constrained decoding is not compatible with tool calls.").
 */
export function readConstraint(body: JsonObject, tools: JsonObject[] | null, choice: ToolChoice): Constrained {
  const all = found(body);
  if (all.length > 1) throw bad("You can only use one kind of constraints for structured outputs ('json', 'regex' or 'choice').", all[1]!.from);
  if (all.length === 1) {
    if (choice.mode === 'named') throw bad('You can only either use constraints for structured outputs or tools, not both.', 'tool_choice');
    return { constraint: all[0]!.c, forcedTools: false };
  }
  if (tools && (choice.mode === 'required' || choice.mode === 'named')) {
    const schema = toolChoiceSchema(tools, choice, body.parallel_tool_calls !== false);
    if (schema) return { constraint: { kind: 'json', schema }, forcedTools: true };
  }
  return { constraint: null, forcedTools: false };
}
