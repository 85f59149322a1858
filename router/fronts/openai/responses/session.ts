// One `POST /v1/responses` request's side of the migration loop: the chat session's token path
// (one IncrementalDecoder over every attempt's tokens, stop strings, the router's output parsers
// over the logical text, so a migration point is just another split) rendered as Responses output
// items and typed stream events, in the order and shapes of vLLM's simple (non-Harmony) stream
// (vllm/entrypoints/openai/responses/simple_streaming_events.py process_simple_stream): a reasoning
// item (`response.reasoning_text.delta`), a message item (`response.output_text.delta`), then one
// function_call item per call (`response.function_call_arguments.delta`), each opened with
// `response.output_item.added` (+ `response.content_part.added`) and closed with its `.done`
// events; `response.created` and `response.in_progress` first, `response.completed` last (also for
// an `incomplete` response, as vLLM sends it), every event numbered by `sequence_number`.
//
// The thought is also the reasoning item's one summary part (`summary: [{type: "summary_text"}]`,
// `response.reasoning_summary_part.added`, `response.reasoning_summary_text.delta`/`.done`,
// `response.reasoning_summary_part.done`, beside each reasoning_text event): vLLM and SGLang leave
// `summary` empty, but Vercel's @ai-sdk/openai and LangChain's ChatOpenAI read only the summary
// (OpenAI's reasoning models show nothing else), so without it their users see no thought. A
// model served here has no hidden thought to summarise: its summary is the whole thought.
import type { Failure } from '../../../core/failure.ts';
import { IncrementalDecoder, StopMatcher } from '../../../tokenizer/index.ts';
import type { ClientSink } from '../../../core/client-sink.ts';
import type { AttemptHost, AttemptSpec, FormatAttempt, FormatSession, JsonObject, TokenFinish, TokenLogprob, TokenWorker, WorkerView } from '../../../core/types.ts';
import { OpenAiAttempt, openAiError, type TokenAbsorber } from '../session.ts';
import { ChatParser, type ParseOut } from '../../../parsers/index.ts';
import { forcedToolCalls } from '../forced-tools.ts';
import type { ResponsesRequest } from './request.ts';
import type { ResponseStore } from './store.ts';

type Item =
  | { type: 'reasoning'; id: string; text: string }
  | { type: 'message'; id: string; text: string }
  | { type: 'function_call'; id: string; index: number; call_id: string; name: string; arguments: string };

type End = { reason: 'stop' | 'length' | 'abort' };

export class ResponsesSession implements FormatSession, TokenAbsorber {
  ids: number[] = [];
  cachedTokens: number | null = null;
  readonly sawText = false;
  readonly canFinishLocally = true;
  readonly rendersOwnText = true;
  attemptHeaders: Record<string, string> = {};
  readonly responseId: string;
  private readonly createdAt: number;
  private readonly decoder: IncrementalDecoder;
  private readonly matcher: StopMatcher | null;
  private readonly parser: ChatParser | null;
  private readonly pieces: string[] = [];
  private produced = 0;
  /** Output tokens up to the end of the thought (usage.output_tokens_details.reasoning_tokens). */
  private reasoningTokens = 0;
  private thinking: boolean;
  /** A forced tool_choice's whole answer (read into calls at the end: forced-tools.ts). */
  private forcedText = '';
  private readonly items: Item[] = [];
  /** The item still receiving deltas (the last of `items`), or null. */
  private open: Item | null = null;
  /** Whitespace-only text not yet in a message: dropped before a call, as vLLM does. */
  private heldSpace = '';
  private seq = 0;
  private begun = false;
  private ended = false;

  constructor(
    readonly req: ResponsesRequest,
    private readonly worker: TokenWorker,
    private readonly info: { id: string; budget: number | null; startedAt: number },
    readonly sink: ClientSink,
    private readonly store: ResponseStore | null,
  ) {
    const chat = req.chat;
    this.decoder = new IncrementalDecoder(chat.tokenizer, { skipSpecialTokens: chat.skipSpecialTokens, spacesBetweenSpecialTokens: chat.spacesBetweenSpecialTokens, cleanUpTokenizationSpaces: false });
    this.matcher = chat.stops.length > 0 ? new StopMatcher(chat.stops, { includeStop: chat.includeStopStr }) : null;
    this.parser = chat.parsing ? new ChatParser(chat.parsing, false) : null;
    this.thinking = chat.parsing?.reasoning != null;
    this.responseId = `resp_${req.key}`;
    this.createdAt = Math.floor(info.startedAt / 1000);
  }

  get budget(): number | null {
    return this.info.budget;
  }

  tokenTexts(): string[] {
    return this.pieces.slice(0, this.ids.length);
  }

  attempt(spec: AttemptSpec, worker: WorkerView, host: AttemptHost, _forwardRaw: boolean, headers: Record<string, string>): OpenAiAttempt {
    this.attemptHeaders = headers;
    return new OpenAiAttempt(this, spec, host, this.worker.reader(worker));
  }

  commit(fa: FormatAttempt): void {
    for (const id of (fa as OpenAiAttempt).ids) this.ids.push(id);
  }

  // --- the token path ---------------------------------------------------------------------------

  absorb(a: OpenAiAttempt, ids: readonly number[], _logprobs: readonly TokenLogprob[] | null): boolean {
    for (let i = 0; i < ids.length; i++) {
      a.ids.push(ids[i]!);
      this.produced++;
      const piece = this.decoder.pushOne(ids[i]!);
      this.pieces.push(piece);
      if (this.matcher === null) {
        this.feed(piece);
        if (this.thinking) this.reasoningTokens++;
        continue;
      }
      const { emit, stop } = this.matcher.push(piece, this.produced > this.req.chat.minTokens);
      this.feed(emit);
      if (this.thinking) this.reasoningTokens++;
      if (stop !== null) {
        this.finishWith({ reason: 'stop' });
        return true;
      }
    }
    return false;
  }

  /** One token's text: through the parsers, into the output items (and events, streaming). */
  private feed(text: string): void {
    if (this.req.chat.forcedTools) {
      this.forcedText += text;
      return;
    }
    if (this.parser === null) {
      if (text.length > 0) this.content(text);
      return;
    }
    this.apply(this.parser.push(text));
  }

  private apply(o: ParseOut): void {
    if (o.reasoning.length > 0) this.reasoning(o.reasoning);
    if (o.content.length > 0) this.content(o.content);
    for (const d of o.calls) this.call(d.index, d.id, d.name, d.arguments);
    if (this.thinking && (o.content.length > 0 || o.calls.length > 0)) this.thinking = false;
  }

  // --- output items and their events ------------------------------------------------------------

  private event(type: string, fields: JsonObject): void {
    if (!this.sink.streaming) return;
    if (!this.begun) this.begin();
    const e: JsonObject = { type, sequence_number: this.seq++, ...fields };
    this.sink.writeRaw(`event: ${type}\ndata: ${JSON.stringify(e)}\n\n`);
  }

  private begin(): void {
    this.begun = true;
    this.event('response.created', { response: this.response('in_progress', false) });
    this.event('response.in_progress', { response: this.response('in_progress', false) });
  }

  private openItem(item: Item): void {
    this.close();
    this.items.push(item);
    this.open = item;
    const output_index = this.items.length - 1;
    if (item.type === 'function_call') {
      this.event('response.output_item.added', { output_index, item: { id: item.id, type: 'function_call', call_id: item.call_id, name: item.name, arguments: '', status: 'in_progress' } });
      return;
    }
    const part: JsonObject = item.type === 'reasoning' ? { type: 'reasoning_text', text: '' } : { type: 'output_text', text: '', annotations: [], logprobs: [] };
    this.event('response.output_item.added', { output_index, item: item.type === 'reasoning' ? { id: item.id, type: 'reasoning', summary: [], status: 'in_progress' } : { id: item.id, type: 'message', role: 'assistant', content: [], status: 'in_progress' } });
    this.event('response.content_part.added', { item_id: item.id, output_index, content_index: 0, part });
    if (item.type === 'reasoning') this.event('response.reasoning_summary_part.added', { item_id: item.id, output_index, summary_index: 0, part: { type: 'summary_text', text: '' } });
  }

  private itemId(prefix: string): string {
    return `${prefix}_${this.req.key}_${this.items.length}`;
  }

  private reasoning(text: string): void {
    if (this.open?.type !== 'reasoning') this.openItem({ type: 'reasoning', id: this.itemId('rs'), text: '' });
    const item = this.open!;
    (item as { text: string }).text += text;
    if (!this.sink.streaming) return;
    // The same piece twice (reasoning_text and summary), on the per-token path: written as the
    // frames event() would make, with the text escaped once and no object built per event.
    const head = `"item_id":"${item.id}","output_index":${this.items.length - 1}`;
    const delta = JSON.stringify(text);
    this.sink.writeRaw(`event: response.reasoning_text.delta\ndata: {"type":"response.reasoning_text.delta","sequence_number":${this.seq++},${head},"content_index":0,"delta":${delta}}\n\n`
      + `event: response.reasoning_summary_text.delta\ndata: {"type":"response.reasoning_summary_text.delta","sequence_number":${this.seq++},${head},"summary_index":0,"delta":${delta}}\n\n`);
  }

  private content(text: string): void {
    if (this.open?.type !== 'message') {
      // vLLM keeps whitespace-only text before a message opens (maybe_important_output_text_spaces).
      if (text.trim().length === 0) {
        this.heldSpace += text;
        return;
      }
      text = this.heldSpace + text;
      this.heldSpace = '';
      this.openItem({ type: 'message', id: this.itemId('msg'), text: '' });
    }
    const item = this.open!;
    (item as { text: string }).text += text;
    this.event('response.output_text.delta', { item_id: item.id, output_index: this.items.length - 1, content_index: 0, delta: text, logprobs: [] });
  }

  private call(index: number, id: string | null, name: string | null, args: string): void {
    if (name !== null) {
      this.heldSpace = '';
      this.openItem({ type: 'function_call', id: this.itemId('fc'), index, call_id: id ?? `call_${this.info.id}_${index}`, name, arguments: '' });
    }
    const item = this.open;
    if (item?.type !== 'function_call' || item.index !== index || args.length === 0) return;
    item.arguments += args;
    this.event('response.function_call_arguments.delta', { item_id: item.id, output_index: this.items.length - 1, delta: args });
  }

  /** The open item's `.done` events. */
  private close(): void {
    const item = this.open;
    if (item === null) return;
    this.open = null;
    const output_index = this.items.length - 1;
    if (item.type === 'function_call') {
      this.event('response.function_call_arguments.done', { item_id: item.id, output_index, arguments: item.arguments, name: item.name });
    } else if (item.type === 'reasoning') {
      this.event('response.reasoning_text.done', { item_id: item.id, output_index, content_index: 0, text: item.text });
      this.event('response.content_part.done', { item_id: item.id, output_index, content_index: 0, part: { type: 'reasoning_text', text: item.text } });
      this.event('response.reasoning_summary_text.done', { item_id: item.id, output_index, summary_index: 0, text: item.text });
      this.event('response.reasoning_summary_part.done', { item_id: item.id, output_index, summary_index: 0, part: { type: 'summary_text', text: item.text } });
    } else {
      this.event('response.output_text.done', { item_id: item.id, output_index, content_index: 0, text: item.text, logprobs: [] });
      this.event('response.content_part.done', { item_id: item.id, output_index, content_index: 0, part: { type: 'output_text', text: item.text, annotations: [] } });
    }
    this.event('response.output_item.done', { output_index, item: this.itemJson(item) });
  }

  private itemJson(item: Item): JsonObject {
    switch (item.type) {
      case 'reasoning':
        return { id: item.id, type: 'reasoning', summary: [{ type: 'summary_text', text: item.text }], content: [{ type: 'reasoning_text', text: item.text }], status: 'completed' };
      case 'message':
        return { id: item.id, type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: item.text, annotations: [], logprobs: [] }] };
      case 'function_call':
        return { id: item.id, type: 'function_call', call_id: item.call_id, name: item.name, arguments: item.arguments, status: 'completed' };
    }
  }

  // --- the end ----------------------------------------------------------------------------------

  finishFromWorker(f: TokenFinish): void {
    this.finishWith(this.drain() ?? { reason: f.reason });
  }

  finishLocally(headers: Record<string, string>): void {
    this.attemptHeaders = headers;
    this.finishWith(this.drain() ?? { reason: 'length' });
  }

  finishAborted(headers: Record<string, string>): void {
    this.attemptHeaders = headers;
    this.drain();
    this.finishWith({ reason: 'abort' });
  }

  passThrough(_a: FormatAttempt, failure: Failure): void {
    const err = openAiError(failure.status, failure.message, failure.status === 404 ? 'NotFoundError' : 'BadRequestError');
    if (this.sink.streaming && this.sink.started) this.sink.endStreamWithError(err);
    else this.sink.json(failure.status, JSON.stringify(err));
  }

  /** The decoder's and the matcher's held-back text; a stop string it completes ends the answer. */
  private drain(): End | null {
    const rest = this.decoder.flush();
    if (this.matcher === null) {
      this.feed(rest);
      return null;
    }
    const { emit, stop } = this.matcher.push(rest, this.produced > this.req.chat.minTokens);
    this.feed(emit);
    if (stop !== null) return { reason: 'stop' };
    this.feed(this.matcher.flush());
    return null;
  }

  private finishWith(end: End): void {
    if (this.ended) return;
    this.ended = true;
    if (this.parser !== null) this.apply(this.parser.finish());
    if (this.req.chat.forcedTools) {
      const calls = forcedToolCalls(this.forcedText);
      if (calls === null) this.content(this.forcedText);
      else calls.forEach((c, i) => this.call(i, c.id, c.name, c.arguments));
    }
    this.close();
    const status = end.reason === 'length' ? 'incomplete' : end.reason === 'abort' ? 'cancelled' : 'completed';
    const text = JSON.stringify(this.response(status, true));
    // Stored before it is answered: a client that sends its next step the moment it has this
    // answer finds it.
    if (this.req.store) this.store?.put(this.responseId, text, JSON.stringify(this.req.input));
    if (this.sink.streaming) {
      if (!this.begun) this.begin();
      this.sink.writeRaw(`event: response.completed\ndata: {"type":"response.completed","sequence_number":${this.seq++},"response":${text}}\n\n`);
      this.sink.endStream();
      return;
    }
    this.sink.json(200, text, this.attemptHeaders);
  }

  private usage(): JsonObject {
    const input = this.req.chat.promptIds.length;
    return {
      input_tokens: input,
      input_tokens_details: { cached_tokens: this.cachedTokens === null ? 0 : Math.min(this.cachedTokens, input) },
      output_tokens: this.produced,
      output_tokens_details: { reasoning_tokens: this.reasoningTokens },
      total_tokens: input + this.produced,
    };
  }

  /** The Response object (vLLM's ResponsesResponse.from_request), with the output so far when `full`. */
  private response(status: string, full: boolean): JsonObject {
    const e = this.req.echo;
    const s = this.req.chat.sampling;
    return {
      id: this.responseId,
      object: 'response',
      created_at: this.createdAt,
      status,
      background: false,
      error: null,
      incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
      instructions: e.instructions,
      max_output_tokens: e.max_output_tokens ?? this.info.budget,
      max_tool_calls: null,
      metadata: e.metadata ?? {},
      model: this.req.chat.model,
      output: full ? this.items.map((i) => this.itemJson(i)) : [],
      parallel_tool_calls: e.parallel_tool_calls,
      previous_response_id: this.req.previousResponseId,
      reasoning: e.reasoning,
      service_tier: 'auto',
      store: this.req.store,
      temperature: s.temperature,
      text: e.text,
      tool_choice: e.tool_choice as JsonObject,
      tools: e.tools as JsonObject[],
      top_logprobs: 0,
      top_p: s.top_p,
      truncation: e.truncation,
      usage: full ? this.usage() : null,
      user: e.user,
    };
  }
}
