// The output token ids of the most recent finished requests, for the dashboard's request view
// (token ids with the migration points marked). Bounded by count: a debugging aid, not a store.
// A ring of the last `capacity` added and a map by request id: adding one is two map operations,
// with no iterator to find the oldest.
import type { ChatView } from '../core/chat-view.ts';

export interface RequestOutput {
  request_id: string;
  output_ids: number[];
  /** Where each attempt's tokens start in output_ids, with the worker that produced them. */
  attempts: { attempt: number; worker: string; from_token: number; tokens: number }[];
  /**
   * Where Baton has the model's tokenizer: the text each output token added (incremental
   * detokenization, so a character split over tokens lands on the token that completes it).
   */
  token_text?: string[];
  /** A chat request's messages, tools and answer (reasoning, tool calls, finish), bounded. */
  chat?: ChatView;
}

export class RecentOutputs {
  private readonly map = new Map<string, RequestOutput>();
  /** The outputs in the order they were added, a ring: the oldest is overwritten (and forgotten). */
  private readonly ring: (RequestOutput | undefined)[];
  private next = 0;

  constructor(private readonly capacity: number) {
    this.ring = new Array(Math.max(0, capacity));
  }

  add(out: RequestOutput): void {
    if (this.capacity <= 0) return;
    const old = this.ring[this.next];
    // A request id seen again points at its newest output; the older one is forgotten with its slot.
    if (old !== undefined && this.map.get(old.request_id) === old) this.map.delete(old.request_id);
    this.ring[this.next] = out;
    this.next = this.next + 1 === this.capacity ? 0 : this.next + 1;
    this.map.set(out.request_id, out);
  }

  get(id: string): RequestOutput | undefined {
    return this.map.get(id);
  }
}
