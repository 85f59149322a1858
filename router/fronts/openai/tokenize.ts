// POST /tokenize and POST /detokenize with vLLM's shapes (vllm/entrypoints/serve/tokenize/
// protocol.py TokenizeCompletionRequest, TokenizeChatRequest, TokenizeResponse,
// DetokenizeRequest, DetokenizeResponse), served from the router's own tokenizers: the ids are
// the ones Baton sends workers, so a client counting tokens gets the prompt the worker sees.
// - tokenize {model?, prompt, add_special_tokens=true, return_token_strs=false}
//   or {model?, messages, add_generation_prompt=true, continue_final_message=false,
//   add_special_tokens=false, chat_template_kwargs?, tools?, return_token_strs=false}
//   → {count, max_model_len, tokens, token_strs} (token_strs: HF convert_ids_to_tokens; null
//   unless asked);
// - detokenize {model?, tokens} → {prompt}.
import type { ServerResponse } from 'node:http';
import type { FrontContext } from '../index.ts';
import { readBody } from '../../http/body.ts';
import { isObject } from '../../core/json.ts';
import { TemplateError, type Tokenizer } from '../../tokenizer/index.ts';
import { chatMessages, contentString } from './messages.ts';
import { OpenAiError, type ServedModel } from './request.ts';
import { writeOpenAiError } from './index.ts';

const bad = (message: string, param: string | null = null) => new OpenAiError(400, message, param);

function flag(body: Record<string, unknown>, key: string, dflt: boolean): boolean {
  const v = body[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'boolean') throw bad(`${key} must be a boolean`, key);
  return v;
}

export function tokenizeBody(raw: unknown, lookup: (model: string | undefined) => ServedModel, contextLength: (model: string, tok: Tokenizer) => number | null): Record<string, unknown> {
  if (!isObject(raw)) throw bad('the body must be a JSON object');
  if (raw.model !== undefined && raw.model !== null && typeof raw.model !== 'string') throw bad('model must be a string', 'model');
  const { name, tokenizer: tok } = lookup((raw.model as string | null | undefined) ?? undefined);
  let tokens: number[];
  if (raw.messages !== undefined && raw.messages !== null) {
    const cont = flag(raw, 'continue_final_message', false);
    const addGen = flag(raw, 'add_generation_prompt', true);
    // vLLM TokenizeChatRequest.check_generation_prompt, in its words.
    if (cont && addGen && raw.add_generation_prompt === true) throw bad('Cannot set both `continue_final_message` and `add_generation_prompt` to True.');
    const kwargs = raw.chat_template_kwargs;
    if (kwargs !== undefined && kwargs !== null && !isObject(kwargs)) throw bad('chat_template_kwargs must be an object', 'chat_template_kwargs');
    // The messages as the chat front renders them, so the count is the prompt the worker sees.
    const msgs = chatMessages(raw.messages);
    let text: string;
    try {
      text = tok.applyChatTemplate(msgs, { addGenerationPrompt: addGen && !cont, tools: Array.isArray(raw.tools) ? raw.tools : null, extra: (kwargs as Record<string, unknown> | undefined) ?? undefined });
    } catch (err) {
      if (err instanceof TemplateError) throw bad(`the chat template failed: ${err.message}`, 'messages');
      throw err;
    }
    if (cont) {
      const last = msgs[msgs.length - 1]!;
      const content = contentString(last.content).trim();
      const at = content.length > 0 ? text.lastIndexOf(content) : -1;
      if (at >= 0) text = text.slice(0, at + content.length);
    }
    tokens = tok.encode(text, { addSpecialTokens: flag(raw, 'add_special_tokens', false) });
  } else {
    if (typeof raw.prompt !== 'string') throw bad('prompt: Field required (a string), or messages', 'prompt');
    tokens = tok.encode(raw.prompt, { addSpecialTokens: flag(raw, 'add_special_tokens', true) });
  }
  const strs = flag(raw, 'return_token_strs', false);
  return {
    count: tokens.length,
    max_model_len: contextLength(name, tok),
    tokens,
    token_strs: strs ? tokens.map((id) => tok.tokenString?.(id) ?? tok.tokenText(id)) : null,
  };
}

export function detokenizeBody(raw: unknown, lookup: (model: string | undefined) => ServedModel): Record<string, unknown> {
  if (!isObject(raw)) throw bad('the body must be a JSON object');
  if (raw.model !== undefined && raw.model !== null && typeof raw.model !== 'string') throw bad('model must be a string', 'model');
  const { tokenizer: tok } = lookup((raw.model as string | null | undefined) ?? undefined);
  const t = raw.tokens;
  if (!Array.isArray(t) || !t.every((x) => typeof x === 'number' && Number.isSafeInteger(x) && x >= 0)) throw bad('tokens: a list of non-negative token ids is required', 'tokens');
  for (const id of t as number[]) if (id >= tok.vocabSize) throw bad(`tokens holds token id ${id}, outside the vocabulary (0..${tok.vocabSize - 1})`, 'tokens');
  // vLLM's serving_tokenization detokenizes with the tokenizer's decode defaults (special tokens kept).
  return { prompt: tok.decode(t as number[], { skipSpecialTokens: false, cleanUpTokenizationSpaces: false }) };
}

export function addTokenizeRoutes(c: FrontContext, lookup: (model: string | undefined) => ServedModel, contextLength: (model: string, tok: Tokenizer) => number | null): void {
  const serve = (fn: (raw: unknown) => Record<string, unknown>) => async (req: import('node:http').IncomingMessage, res: ServerResponse) => {
    let raw: unknown;
    try {
      raw = JSON.parse((await readBody(req, c.config.maxBodyBytes, c.config.bodyTimeoutMs)).toString('utf8'));
    } catch (err) {
      const status = (err as { status?: number }).status ?? 400;
      return writeOpenAiError(res, status, err instanceof SyntaxError ? `the body is not JSON: ${err.message}` : (err as Error).message);
    }
    try {
      const text = JSON.stringify(fn(raw));
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
      res.end(text);
    } catch (err) {
      if (err instanceof OpenAiError) return writeOpenAiError(res, err.status, err.message, err.param, {}, err.type);
      throw err;
    }
  };
  c.routes.add('POST', '/tokenize', serve((raw) => tokenizeBody(raw, lookup, contextLength)), false);
  c.routes.add('POST', '/detokenize', serve((raw) => detokenizeBody(raw, lookup)), false);
}
