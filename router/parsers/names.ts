// The names of the chat output parsers (`--tool-call-parser`, `--reasoning-parser`): SGLang's
// names (python/sglang/srt/function_call/function_call_parser.py FunctionCallParser.ToolCallParserEnum,
// python/sglang/srt/parser/reasoning_parser.py ReasoningParser.DetectorMap), and vLLM's names as
// aliases (vllm/tool_parsers/__init__.py, vllm/reasoning/__init__.py). Import-free, so the
// config reads it without pulling the parsers in.

/** Tool-call formats Baton parses. */
export const TOOL_FORMATS = ['qwen25', 'llama3', 'mistral', 'deepseekv3', 'pythonic', 'qwen3_coder'] as const;
export type ToolFormat = (typeof TOOL_FORMATS)[number];

/** Every accepted `--tool-call-parser` name → its format (SGLang's names, then vLLM's). */
export const TOOL_PARSER_NAMES: Readonly<Record<string, ToolFormat>> = {
  qwen25: 'qwen25',
  qwen: 'qwen25',
  hermes: 'qwen25',
  llama3: 'llama3',
  llama3_json: 'llama3',
  llama4_json: 'llama3',
  mistral: 'mistral',
  deepseekv3: 'deepseekv3',
  deepseek_v3: 'deepseekv3',
  pythonic: 'pythonic',
  llama4_pythonic: 'pythonic',
  qwen3_coder: 'qwen3_coder',
};

/** Reasoning formats: `<think>…</think>` with or without the opening tag in the output. */
export const REASONING_FORMATS = ['qwen3', 'qwen3-thinking', 'deepseek-r1'] as const;
export type ReasoningFormat = (typeof REASONING_FORMATS)[number];

/** Every accepted `--reasoning-parser` name → its format. */
export const REASONING_PARSER_NAMES: Readonly<Record<string, ReasoningFormat>> = {
  qwen3: 'qwen3',
  'qwen3-thinking': 'qwen3-thinking',
  'deepseek-r1': 'deepseek-r1',
  deepseek_r1: 'deepseek-r1',
  step3: 'deepseek-r1',
  minimax: 'qwen3-thinking',
  interns1: 'qwen3',
};
