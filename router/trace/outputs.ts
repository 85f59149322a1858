// The output token ids of the most recent finished requests, for the dashboard's request view
// (token ids with the migration points marked). Bounded by count: a debugging aid, not a store.
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
}

export class RecentOutputs {
  private readonly map = new Map<string, RequestOutput>();

  constructor(private readonly capacity: number) {}

  add(out: RequestOutput): void {
    if (this.capacity <= 0) return;
    this.map.delete(out.request_id);
    this.map.set(out.request_id, out);
    if (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value!);
  }

  get(id: string): RequestOutput | undefined {
    return this.map.get(id);
  }
}
