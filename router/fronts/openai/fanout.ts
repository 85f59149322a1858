// `n > 1` and lists of prompts (`/v1/completions`): one OpenAI request served as several logical
// requests, each a choice that migrates on its own, joined into one answer as vLLM joins its
// child requests (vllm/v1/engine/parallel_sampling.py ParentRequest; the serving code:
// completion/serving.py completion_stream_generator and request_output_to_completion_response,
// chat_completion/serving.py chat_completion_stream_generator and
// chat_completion_full_generator):
// - choice `index` = prompt_idx * n + i; a unary answer lists the choices by index;
// - a stream interleaves the choices' chunks as they come, each with its index, then one usage
//   chunk (with include_usage) and one [DONE] after the last choice finished;
// - usage: each prompt's tokens once (not n times), the completion tokens of every choice summed;
// - `seed`: choice i samples with seed + i (ParentRequest._get_child_sampling_params), so each
//   child is an ordinary seeded request (and migrates, or not, by the seeded request's rules).
// A failure of one choice fails the answer (vLLM's generator raises for the whole request): the
// others are cancelled.
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { ClientSink, type ErrorShapes } from '../../core/client-sink.ts';
import type { JsonObject } from '../../core/types.ts';
import type { OpenAiRequest } from './request.ts';

/** The logical requests of one OpenAI request: one per prompt and choice, in index order. */
export function splitChoices(oreq: OpenAiRequest, responseId: string): OpenAiRequest[] {
  const n = oreq.n ?? 1;
  const prompts = oreq.prompts ?? [{ ids: oreq.promptIds, text: oreq.promptText, maxTokens: oreq.maxTokens }];
  const out: OpenAiRequest[] = [];
  const created = Math.floor(Date.now() / 1000);
  for (const [p, prompt] of prompts.entries()) {
    for (let i = 0; i < n; i++) {
      const seed = oreq.sampling.seed;
      out.push({
        ...oreq,
        promptIds: prompt.ids,
        promptText: prompt.text,
        maxTokens: prompt.maxTokens,
        sampling: { ...oreq.sampling, seed: seed === null ? null : seed + i },
        n: 1,
        prompts: undefined,
        index: p * n + i,
        responseId,
        created,
      });
    }
  }
  return out;
}

/** True when the request is more than one logical request. */
export function fansOut(oreq: OpenAiRequest): boolean {
  return (oreq.n ?? 1) > 1 || (oreq.prompts?.length ?? 1) > 1;
}

interface Cancellable {
  cancel(): void;
}

/** The client's one answer, joined from the choices' sinks. */
export class ChoiceGroup {
  readonly sinks: ChoiceSink[];
  private lrs: Cancellable[] = [];
  private open: number;
  private failed = false;
  private readonly usages: (JsonObject | null)[];
  private readonly answers: (JsonObject | null)[];
  private readonly headers: Record<string, string>[] = [];

  constructor(
    readonly parent: ClientSink,
    res: ServerResponse,
    private readonly children: readonly OpenAiRequest[],
    /** Choices per prompt (`n`): choice k belongs to prompt floor(k / n). */
    private readonly perPrompt: number,
    headers: Record<string, string>,
    errors: ErrorShapes,
  ) {
    this.open = children.length;
    this.usages = children.map(() => null);
    this.answers = children.map(() => null);
    // The client's hang-up reaches every choice through one listener on the response (a sink
    // listens for 'close' on what it is given; n of them on the response itself would pass
    // Node's listener limit for n > 10).
    const closed = new EventEmitter();
    closed.setMaxListeners(0);
    res.once('close', () => closed.emit('close'));
    const stand = closed as unknown as ServerResponse;
    this.sinks = children.map((_, k) => new ChoiceSink(this, k, stand, parent.streaming, headers, errors));
  }

  /** The choices' logical requests, for cancelling the others when one fails. */
  attach(lrs: Cancellable[]): void {
    this.lrs = lrs;
  }

  cancel(k: number): void {
    this.lrs[k]?.cancel();
  }

  get isFailed(): boolean {
    return this.failed;
  }

  /** Choice k's usage chunk (its own stream's last): summed into the one the client gets. */
  usage(k: number, u: JsonObject): void {
    this.usages[k] = u;
  }

  /** Choice k's stream ended normally. */
  streamDone(k: number): void {
    this.usages[k] ??= null;
    if (--this.open > 0 || this.failed) return;
    const first = this.children[0]!;
    if (first.includeUsage) {
      const u = this.summed(this.usages);
      if (u) this.parent.writeChunk({ id: first.responseId, object: first.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion', created: this.created(), model: first.model, choices: [], usage: u });
    }
    this.parent.endStream();
  }

  private created(): number {
    return this.children[0]!.created ?? Math.floor(Date.now() / 1000);
  }

  /** Choice k's unary answer (one choice): the client's is written once every choice has one. */
  answer(k: number, body: JsonObject, headers: Record<string, string>): void {
    this.answers[k] = body;
    this.headers[k] = headers;
    if (--this.open > 0 || this.failed) return;
    const bodies = this.answers as JsonObject[];
    const out: JsonObject = { ...bodies[0]! };
    out.choices = bodies.map((b) => (b.choices as JsonObject[])[0]!);
    out.usage = this.summed(bodies.map((b) => b.usage as JsonObject));
    // The counts of the answer's attempts, over every choice.
    const sum = (h: string) => this.headers.reduce((a, x) => a + Number(x[h] ?? 0), 0);
    const extra: Record<string, string> = headers['x-baton-attempts'] !== undefined ? { 'x-baton-attempts': String(sum('x-baton-attempts')), 'x-baton-migrations': String(sum('x-baton-migrations')) } : {};
    this.parent.json(200, JSON.stringify(out), extra);
  }

  /**
   * The usage of the whole answer: every prompt's tokens once (choice k is prompt k / n's
   * choice k % n), the completion tokens summed; cached tokens as the first choice reported them
   * (vLLM reads num_cached_tokens off the first output).
   */
  private summed(us: readonly (JsonObject | null)[]): JsonObject | null {
    const n = this.perPrompt;
    let prompt = 0;
    let completion = 0;
    let details: unknown;
    for (const [k, u] of us.entries()) {
      if (!u) continue;
      if (k % n === 0) prompt += u.prompt_tokens as number;
      completion += u.completion_tokens as number;
      details ??= u.prompt_tokens_details;
    }
    const out: JsonObject = { prompt_tokens: prompt, total_tokens: prompt + completion, completion_tokens: completion };
    if (details !== undefined) out.prompt_tokens_details = details as JsonObject;
    return out;
  }

  /** One choice failed: the answer fails with its error, the other choices are cancelled. */
  fail(k: number, write: () => void): void {
    if (this.failed) return;
    this.failed = true;
    write();
    for (const [j, lr] of this.lrs.entries()) if (j !== k) lr.cancel();
  }
}

/**
 * One choice's sink: what its logical request and session write goes to the group (and through
 * it to the client's one sink), tagged with the choice's index by the session itself.
 */
export class ChoiceSink extends ClientSink {
  constructor(
    private readonly group: ChoiceGroup,
    private readonly k: number,
    /** Only its 'close' is listened to (ChoiceGroup's stand-in for the client's response). */
    res: ServerResponse,
    streaming: boolean,
    headers: Record<string, string>,
    private readonly shapes: ErrorShapes,
  ) {
    // The client's hang-up cancels this choice.
    super(res, streaming, headers, () => group.cancel(k), shapes, 0, false);
  }

  override writeRaw(data: Buffer | string): boolean {
    if (this.ended || this.group.isFailed) return true;
    const ok = this.group.parent.writeRaw(data);
    // A full socket pauses this choice's worker (this sink's feeder), until the client's drains.
    if (!ok) this.feeder?.clientFull();
    return ok;
  }

  override writeChunk(chunk: unknown): boolean {
    const c = chunk as JsonObject;
    // The choice's own usage chunk: summed into the answer's one, written after every choice.
    if (Array.isArray(c.choices) && c.choices.length === 0 && c.usage) {
      this.group.usage(this.k, c.usage as JsonObject);
      return true;
    }
    return super.writeChunk(chunk);
  }

  override onDrain(fn: () => void): void {
    this.group.parent.onDrain(fn);
  }

  override offerContentType(): void {}

  override endStream(): void {
    if (this.ended) return;
    this.ended = true;
    this.group.streamDone(this.k);
  }

  override endStreamWithError(frame: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.group.fail(this.k, () => this.group.parent.endStreamWithError(frame));
  }

  override json(status: number, body: string | Buffer, extraHeaders: Record<string, string> = {}): void {
    if (this.ended) return;
    this.ended = true;
    if (status === 200) {
      this.group.answer(this.k, JSON.parse(body.toString()) as JsonObject, extraHeaders);
      return;
    }
    const parent = this.group.parent;
    // An error after the stream started (another choice's chunks are out) goes in band.
    this.group.fail(this.k, () => (parent.started ? parent.endStreamWithError(JSON.parse(body.toString())) : parent.json(status, body, extraHeaders)));
  }

  override fail(status: number, message: string, type: string): void {
    if (this.group.parent.started) this.endStreamWithError(this.shapes.frame(status, message, type));
    else this.json(status, JSON.stringify(this.shapes.body(status, message, type)));
  }
}
