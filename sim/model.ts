// The simulated language model: every next-token distribution is a pure function of the whole
// context (prompt + tokens generated so far), summarised by a 32-bit rolling hash. That is what
// makes migration testable: a continuation that replays the first k generated tokens as prompt
// lands in exactly the state the uninterrupted run was in, so it produces exactly the rest.
//
// Rules (documented in docs/simulator.md):
// - per state, a ranked candidate list c0, c1, ... with strictly decreasing logprobs; c0 is the
//   EOS token with probability 1/eosEvery (from the hash), otherwise no special token is ranked;
// - deterministic (greedy: first allowed candidate) unless a temperature > 0 was asked for
//   explicitly; then a weighted draw among the top candidates, seeded by sampling_seed if given;
// - EOS and stop_token_ids are not allowed before min_new_tokens; EOS is never chosen with ignore_eos;
// - SGLang's finish order: budget first ({"type":"length"}), then stop tokens ({"type":"stop"}).

export interface ModelConfig {
  vocabSize: number;
  eosTokenId: number;
  /** EOS ranks first in one state out of this many (0 = never). */
  eosEvery: number;
}

export const DEFAULT_MODEL: Readonly<ModelConfig> = Object.freeze({ vocabSize: 32000, eosTokenId: 2, eosEvery: 64 });

/** Ids below this are special (unk, bos, eos) and are never ranked, except EOS as said above. */
const FIRST_ORDINARY_ID = 3;
/** Candidates a weighted draw chooses among. */
const SAMPLE_WIDTH = 8;
/** Candidates searched for a prompt token before it is given a tail logprob. */
const PROMPT_RANK_WIDTH = 20;

export type LengthFinish = { type: 'length'; length: number };
export type StopFinish = { type: 'stop'; matched: number | string };
export type AbortFinish = { type: 'abort'; message: string; status_code: number | null; err_type: string | null };
export type FinishReason = LengthFinish | StopFinish | AbortFinish;

/** One ranked alternative: [logprob, token id]. */
export type TopEntry = [number, number];

export interface DecodeParams {
  max_new_tokens: number;
  min_new_tokens?: number;
  ignore_eos?: boolean;
  stop_token_ids?: readonly number[];
  /** Only an explicit value > 0 samples; absent means deterministic. */
  temperature?: number;
  top_k?: number;
  sampling_seed?: number;
  top_logprobs_num?: number;
}

export interface Step {
  token: number;
  logprob: number;
  top: TopEntry[];
  /** Set on the step that ends the run. */
  finish: FinishReason | null;
}

export interface ModelOutput {
  output_ids: number[];
  output_logprobs: number[];
  output_top_logprobs: TopEntry[][];
  finish_reason: FinishReason;
}

export const INITIAL_STATE = 0x2545f491;

/** murmur3's finaliser: spreads a 32-bit value over all bits (also the chaos campaign's seed mix). */
export function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The context hash after appending one token. */
export function foldToken(state: number, token: number): number {
  return fmix32((state ^ fmix32((token + 0x61c88647) | 0)) >>> 0);
}

/** The context hash of a whole token sequence. */
export function contextState(tokens: readonly number[]): number {
  let s = INITIAL_STATE;
  for (let i = 0; i < tokens.length; i++) s = foldToken(s, tokens[i]!);
  return s;
}

// A second mixer for values derived from a state, so that no derived value coincides with the
// state that some next token would produce.
function derive(state: number, salt: number): number {
  return fmix32((Math.imul((state ^ salt) >>> 0, 0x27d4eb2d) + salt) >>> 0);
}

const SALT_P0 = 0x3c6ef372;
const SALT_Q = 0xa54ff53a;
const SALT_EOS = 0x510e527f;
const SALT_TAIL = 0x1f83d9ab;
const SALT_SEED = 0x5be0cd19;
const tokenSalt = (j: number) => (Math.imul(j + 1, 0x9e3779b9) ^ 0x6a09e667) >>> 0;

const unit = (h: number) => h / 4294967296;

/** Logprobs are rounded so that they survive any JSON round trip (and a Python one) unchanged. */
export const roundLogprob = (x: number) => Math.round(x * 1e6) / 1e6;

/**
 * The ranked candidates of one context state, computed lazily: most steps need only c0.
 * p(c0) in [0.5, 0.95]; the rest of the mass decays geometrically, so the list is a plausible
 * (sub-)distribution and strictly decreasing even after rounding.
 */
class Ranking {
  private readonly ids: number[] = [];
  private readonly lnP0: number;
  private readonly lnRest: number;
  private readonly lnQ: number;

  constructor(private readonly state: number, private readonly cfg: ModelConfig) {
    const p0 = 0.5 + 0.45 * unit(derive(state, SALT_P0));
    const q = 0.3 + 0.4 * unit(derive(state, SALT_Q));
    this.lnP0 = Math.log(p0);
    this.lnRest = Math.log(1 - p0) + Math.log(1 - q);
    this.lnQ = Math.log(q);
  }

  logprob(j: number): number {
    return roundLogprob(j === 0 ? this.lnP0 : this.lnRest + (j - 1) * this.lnQ);
  }

  id(j: number): number {
    while (this.ids.length <= j) this.ids.push(this.pick(this.ids.length));
    return this.ids[j]!;
  }

  private pick(j: number): number {
    const { eosEvery, eosTokenId, vocabSize } = this.cfg;
    if (j === 0 && eosEvery > 0 && derive(this.state, SALT_EOS) % eosEvery === 0) return eosTokenId;
    const span = vocabSize - FIRST_ORDINARY_ID;
    let id = FIRST_ORDINARY_ID + (derive(this.state, tokenSalt(j)) % span);
    // Probe past earlier candidates so the list has no duplicates.
    while (this.ids.includes(id)) id = FIRST_ORDINARY_ID + ((id - FIRST_ORDINARY_ID + 1) % span);
    return id;
  }

  top(n: number): TopEntry[] {
    const out: TopEntry[] = new Array(n);
    for (let j = 0; j < n; j++) out[j] = [this.logprob(j), this.id(j)];
    return out;
  }

  /** The logprob of any token, ranked or not; unranked ones sit below every ranked one. */
  logprobOf(token: number): number {
    for (let j = 0; j < PROMPT_RANK_WIDTH; j++) if (this.id(j) === token) return this.logprob(j);
    const floor = this.lnRest + (PROMPT_RANK_WIDTH - 1) * this.lnQ;
    return roundLogprob(floor - 1 - 8 * unit(derive(this.state, (SALT_TAIL ^ token) >>> 0)));
  }
}

/** True when the request asked for random sampling; everything else decodes deterministically. */
export function samples(p: DecodeParams): boolean {
  return p.temperature !== undefined && p.temperature >= 1e-6 && p.top_k !== 1;
}

/** Step-by-step decoding of one request, O(1) per step (plus the top list asked for). */
export class Decoder {
  private state: number;
  private produced = 0;
  private done: FinishReason | null = null;
  private readonly stopIds: ReadonlySet<number>;
  private readonly minNew: number;
  private readonly topN: number;
  private readonly seedSalt: number | null;

  constructor(prompt: readonly number[] | number, private readonly p: DecodeParams, private readonly cfg: ModelConfig = DEFAULT_MODEL) {
    this.state = typeof prompt === 'number' ? prompt : contextState(prompt);
    this.stopIds = new Set(p.stop_token_ids ?? []);
    this.minNew = p.min_new_tokens ?? 0;
    this.topN = p.top_logprobs_num ?? 0;
    this.seedSalt = p.sampling_seed === undefined ? null : fmix32((p.sampling_seed ^ SALT_SEED) >>> 0);
    if (p.max_new_tokens <= 0) this.done = { type: 'length', length: Math.max(0, p.max_new_tokens) };
  }

  /** The context hash so far (prompt + generated). */
  get contextHash(): number {
    return this.state;
  }

  get generated(): number {
    return this.produced;
  }

  get finish(): FinishReason | null {
    return this.done;
  }

  next(): Step {
    if (this.done) throw new Error('decoder already finished');
    const ranking = new Ranking(this.state, this.cfg);
    const j = samples(this.p) ? this.draw(ranking) : this.firstAllowed(ranking);
    const token = ranking.id(j);
    const step: Step = { token, logprob: ranking.logprob(j), top: this.topN > 0 ? ranking.top(this.topN) : [], finish: null };
    this.produced++;
    this.state = foldToken(this.state, token);
    if (this.produced >= this.p.max_new_tokens) step.finish = { type: 'length', length: this.p.max_new_tokens };
    else if (this.stopIds.has(token)) step.finish = { type: 'stop', matched: token };
    else if (token === this.cfg.eosTokenId && !this.p.ignore_eos) step.finish = { type: 'stop', matched: token };
    this.done = step.finish;
    return step;
  }

  private allowed(id: number): boolean {
    const early = this.produced < this.minNew;
    if (id === this.cfg.eosTokenId && (early || this.p.ignore_eos)) return false;
    return !(early && this.stopIds.has(id));
  }

  private firstAllowed(r: Ranking): number {
    for (let j = 0; ; j++) if (this.allowed(r.id(j))) return j;
  }

  private draw(r: Ranking): number {
    const t = this.p.temperature!;
    const width = Math.min(SAMPLE_WIDTH, this.p.top_k !== undefined && this.p.top_k > 0 ? this.p.top_k : SAMPLE_WIDTH);
    const weights: number[] = [];
    let total = 0;
    for (let j = 0; j < width; j++) {
      const w = this.allowed(r.id(j)) ? Math.exp(r.logprob(j) / t) : 0;
      weights.push(w);
      total += w;
    }
    if (total === 0) return this.firstAllowed(r);
    const u = this.seedSalt === null ? Math.random() : unit(derive(this.state, this.seedSalt));
    let acc = 0;
    for (let j = 0; j < width; j++) {
      acc += weights[j]! / total;
      if (u < acc) return j;
    }
    return this.firstAllowed(r);
  }
}

/** The whole uninterrupted answer: the reference the tests and the oracle compare against. */
export function runModel(prompt: readonly number[], params: DecodeParams, cfg: ModelConfig = DEFAULT_MODEL): ModelOutput {
  const d = new Decoder(prompt, params, cfg);
  const out: ModelOutput = { output_ids: [], output_logprobs: [], output_top_logprobs: [], finish_reason: d.finish ?? { type: 'length', length: 0 } };
  while (!d.finish) {
    const s = d.next();
    out.output_ids.push(s.token);
    out.output_logprobs.push(s.logprob);
    out.output_top_logprobs.push(s.top);
    if (s.finish) out.finish_reason = s.finish;
  }
  return out;
}

export interface PromptLogprobs {
  /** One per prompt position from `start`; the first is null, as SGLang reports it. */
  logprobs: (number | null)[];
  /** Same positions; null first, then the top `topN` alternatives at each position. */
  tops: (TopEntry[] | null)[];
}

/** Logprobs of the prompt's own tokens from position `start` on, each given its prefix. */
export function promptLogprobs(prompt: readonly number[], start: number, topN: number, cfg: ModelConfig = DEFAULT_MODEL): PromptLogprobs {
  const out: PromptLogprobs = { logprobs: [], tops: [] };
  let s = INITIAL_STATE;
  for (let j = 0; j < prompt.length; j++) {
    if (j > start) {
      const r = new Ranking(s, cfg);
      out.logprobs.push(r.logprobOf(prompt[j]!));
      out.tops.push(topN > 0 ? r.top(topN) : null);
    } else if (j === start) {
      out.logprobs.push(null);
      out.tops.push(null);
    }
    s = foldToken(s, prompt[j]!);
  }
  return out;
}
