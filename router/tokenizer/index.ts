// The router's tokenizer (docs/tokenizer.md): load a model directory's tokenizer, encode, decode
// as HF does, render chat templates, detokenize incrementally, match stop strings.

export { TemplateError, type ChatMessage, type ChatTemplateOptions, type DecodeOptions, type EncodeOptions, type Tokenizer } from './types.ts';
export { loadTokenizer, readTokenizerFiles } from './load.ts';
export { IncrementalDecoder } from './incremental.ts';
export { StopMatcher, type StopResult } from './stop.ts';
export { cleanUpTokenization } from './cleanup.ts';
export { benchTokenizer, chatOfTokens, timeChatTokenize, type ChatTokenizeTiming } from './bench.ts';
