// The tokenizer Baton uses for its OpenAI-compatible front and for native SGLang text requests:
// the names the rest of the router codes against (docs/tokenizer.md).

export interface ChatMessage {
  role: string;
  content: string | null | unknown[];
  [k: string]: unknown;
}

export interface DecodeOptions {
  /** Drop added tokens marked special (HF's skip_special_tokens). Default true, as SGLang's and vLLM's sampling params. */
  skipSpecialTokens?: boolean;
  /**
   * Default true. Accepted for SGLang's and vLLM's sampling params, and without effect: HF's fast
   * tokenizers ignore it, and so do SGLang's and vLLM's detokenizers for them (docs/tokenizer.md).
   */
  spacesBetweenSpecialTokens?: boolean;
  /**
   * transformers' clean_up_tokenization after the decode. Default: tokenizer_config.json's
   * clean_up_tokenization_spaces, as HF's decode. SGLang loads every tokenizer with false and
   * vLLM's detokenizers never apply it, so pass false to reproduce their text (docs/tokenizer.md).
   */
  cleanUpTokenizationSpaces?: boolean;
}

export interface EncodeOptions {
  /** The post-processor's special tokens (Llama's BOS). Default true, as HF's `tokenizer(text)`. */
  addSpecialTokens?: boolean;
}

export interface ChatTemplateOptions {
  /** Default false, as HF's apply_chat_template. */
  addGenerationPrompt?: boolean;
  /** JSON-schema tool definitions, passed to the template as `tools` (null when absent). */
  tools?: unknown[] | null;
  /** More template variables (HF's **kwargs), e.g. `enable_thinking`, `date_string`. */
  extra?: Record<string, unknown>;
}

/** A chat template that cannot be rendered for these messages: the template's raise_exception, a missing template, or a template the engine cannot run. */
export class TemplateError extends Error {
  override name = 'TemplateError';
}

export interface Tokenizer {
  /** The served model name it is registered for. */
  readonly name: string;
  readonly dir: string;
  /** Ids are < vocabSize (added tokens included). */
  readonly vocabSize: number;
  /** generation_config.json eos_token_id (int or list) if present, else tokenizer_config eos_token's id. */
  readonly eosTokenIds: readonly number[];
  /**
   * tokenizer_config.json eos_token's id (HF's tokenizer.eos_token_id), null without one: the
   * model's own EOS, which vLLM stops on apart from stop_token_ids (generation_config's other
   * ids join those), so a finish on it reports `stop_reason: null` (docs/openai.md).
   */
  readonly eosTokenId: number | null;
  readonly bosTokenId: number | null;
  /** tokenizer_config model_max_length when sane (< 1e7), else null. */
  readonly contextLength: number | null;
  encode(text: string, opts?: EncodeOptions): number[];
  /** == HF tokenizer.decode(ids, skip_special_tokens=..., spaces_between_special_tokens=...). */
  decode(ids: readonly number[], opts?: DecodeOptions): string;
  isSpecial(id: number): boolean;
  /** The decoded text of one token alone, for logprob entries (OpenAI's `token`), special tokens included. */
  tokenText(id: number): string;
  /** The vocabulary's own string for a token (HF convert_ids_to_tokens, e.g. "Ġhello"). */
  tokenString?(id: number): string;
  /** UTF-8 bytes of that token (OpenAI `bytes`), null if not representable. */
  tokenBytes(id: number): number[] | null;
  /** The rendered chat prompt; throws TemplateError with a clear message. */
  applyChatTemplate(messages: ChatMessage[], opts?: ChatTemplateOptions): string;
  /** HF apply_chat_template(tokenize=True): the rendered prompt encoded without added special tokens. */
  encodeChat(messages: ChatMessage[], opts?: ChatTemplateOptions): number[];
}
