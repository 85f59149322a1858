// The simulated language model: every next-token distribution is a pure function of the whole
// context (prompt + tokens generated so far), summarised by a 32-bit rolling hash. That is what
// makes migration testable: a continuation that replays the first k generated tokens as prompt
// lands in exactly the state the uninterrupted run was in, so it produces exactly the rest.
//
// Rules (documented in docs/simulator.md):
// - per state, a ranked candidate list c0, c1, ... with strictly decreasing logprobs; c0 is the
//   EOS token with probability 1/eosEvery (from the hash), otherwise no special token is ranked;
// - SGLang's default temperature is 1.0, so a request samples unless it asks for greedy decoding
//   (temperature < 1e-6 or top_k 1); every draw is still a pure function of the context state
//   (and of sampling_seed when given, and of the worker's weights), never of Math.random;
// - logit_bias shifts the biased ids' logits and renormalises; the ranking follows the new logits;
// - EOS and stop_token_ids are not allowed before min_new_tokens (SGLang's min-new-tokens penalizer);
//   with ignore_eos EOS may be chosen like any token, it just does not end the answer;
// - SGLang's finish order: budget first ({"type":"length"}), then stop tokens ({"type":"stop"}).
// - the worker's weights (model_path + weight_version) salt every state, so two workers that serve
//   different weights answer differently; the default weights ("baton-sim", "default") salt nothing.

import type { Script } from './script.ts';

export interface ModelConfig {
  vocabSize: number;
  /** The EOS the model emits. */
  eosTokenId: number;
  /** EOS ranks first in one state out of this many (0 = never). */
  eosEvery: number;
  /** Every id that ends a request as EOS does (a tokenizer's generation_config may list several). Default: [eosTokenId]. */
  eosTokenIds?: readonly number[];
  /**
   * The ids the model ranks besides EOS: a real tokenizer's non-special tokens (sim/vocab.ts
   * vocabularyFor). Default: 3 .. vocabSize − 1, the built-in vocabulary's non-special ids.
   */
  ordinaryIds?: Int32Array;
  /** A scripted model (sim/script.ts): a prompt a rule matches gets the rule's text. */
  script?: Script;
}

export const DEFAULT_MODEL: Readonly<ModelConfig> = Object.freeze({ vocabSize: 32000, eosTokenId: 2, eosEvery: 64 });

/** The model path and weight version a worker serves unless told otherwise. */
export const DEFAULT_MODEL_PATH = 'baton-sim';
export const DEFAULT_WEIGHT_VERSION = 'default';
/** The weights salt of the default weights: none, so the default model is the historical one. */
export const DEFAULT_WEIGHTS = 0;

/** Ids below this are special (unk, bos, eos) and are never ranked, except EOS as said above. */
const FIRST_ORDINARY_ID = 3;
/** Candidates a weighted draw chooses among. */
const SAMPLE_WIDTH = 8;
/** Candidates searched for a prompt token before it is given a tail logprob. */
const PROMPT_RANK_WIDTH = 20;

export type LengthFinish = { type: 'length'; length: number };
export type StopFinish = { type: 'stop'; matched: number | string };
export type AbortFinish = { type: 'abort'; message: string; status_code: number | null; err_type: string | null };
/** The finish reason of a request aborted while still queued: only type and message (tokenizer_manager.py _handle_abort_req). */
export type QueuedAbortFinish = { type: 'abort'; message: string };
export type FinishReason = LengthFinish | StopFinish | AbortFinish | QueuedAbortFinish;

/** One ranked alternative: [logprob, token id]. */
export type TopEntry = [number, number];

export interface DecodeParams {
  max_new_tokens: number;
  min_new_tokens?: number;
  ignore_eos?: boolean;
  stop_token_ids?: readonly number[];
  /** SGLang's default is 1.0 (absent means 1.0): the request samples. < 1e-6 is greedy. */
  temperature?: number;
  /** 1 is greedy; -1, 0 or absent: no limit (the draw still looks at the top 8 only). */
  top_k?: number;
  top_p?: number;
  min_p?: number;
  sampling_seed?: number;
  /** {"<token id>": bias}: added to that token's logit before ranking and sampling. */
  logit_bias?: Readonly<Record<string, number>>;
  top_logprobs_num?: number;
  /** Ids whose logprob is reported at every step (SGLang's token_ids_logprob). */
  token_ids_logprob?: readonly number[];
}

export interface Step {
  token: number;
  logprob: number;
  top: TopEntry[];
  /** The logprobs of `token_ids_logprob`, in its order (empty when not asked for). */
  idsLogprobs: number[];
  /** Set on the step that ends the run. */
  finish: FinishReason | null;
}

export interface ModelOutput {
  output_ids: number[];
  output_logprobs: number[];
  output_top_logprobs: TopEntry[][];
  /** Per step, the logprobs of `token_ids_logprob` (empty lists when not asked for). */
  output_ids_logprobs: number[][];
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

/**
 * The salt of a worker's weights: 0 (no salt) for the default ("baton-sim", "default"), otherwise
 * a non-zero 32-bit hash of model path and weight version. Pass it to runModel / Decoder /
 * promptLogprobs to compute what a worker serving those weights answers.
 */
export function weightsSalt(modelPath: string, weightVersion: string): number {
  if (modelPath === DEFAULT_MODEL_PATH && weightVersion === DEFAULT_WEIGHT_VERSION) return DEFAULT_WEIGHTS;
  // FNV-1a over the UTF-16 code units of "path\0version", then mixed.
  const key = `${modelPath}\u0000${weightVersion}`;
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return fmix32(h >>> 0) || 1;
}

/** The state the model reads: the context hash, salted by the weights (unchanged for the default weights). */
const salted = (state: number, weights: number) => (weights === DEFAULT_WEIGHTS ? state : fmix32((state ^ weights) >>> 0));

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
/** The draw of a request without sampling_seed. */
const SALT_DRAW = 0x9b05688c;
const tokenSalt = (j: number) => (Math.imul(j + 1, 0x9e3779b9) ^ 0x6a09e667) >>> 0;

const unit = (h: number) => h / 4294967296;
/** Shared by every step that reports no token_ids_logprob (never mutated). */
const NO_IDS: number[] = [];

/** Logprobs are rounded so that they survive any JSON round trip (and a Python one) unchanged. */
export const roundLogprob = (x: number) => Math.round(x * 1e6) / 1e6;

/** A ranked next-token distribution: candidate j's id and logprob, any token's logprob. */
interface Distribution {
  id(j: number): number;
  logprob(j: number): number;
  top(n: number): TopEntry[];
  logprobOf(token: number): number;
}

/**
 * The ranked candidates of one context state, computed lazily: most steps need only c0.
 * p(c0) in [0.5, 0.95]; the rest of the mass decays geometrically, so the list is a plausible
 * (sub-)distribution and strictly decreasing even after rounding.
 */
class Ranking implements Distribution {
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

  /** Unrounded, for the biased distribution's arithmetic. */
  rawLogprob(j: number): number {
    return j === 0 ? this.lnP0 : this.lnRest + (j - 1) * this.lnQ;
  }

  logprob(j: number): number {
    return roundLogprob(this.rawLogprob(j));
  }

  id(j: number): number {
    while (this.ids.length <= j) this.ids.push(this.pick(this.ids.length));
    return this.ids[j]!;
  }

  private pick(j: number): number {
    const { eosEvery, eosTokenId, vocabSize, ordinaryIds } = this.cfg;
    if (j === 0 && eosEvery > 0 && derive(this.state, SALT_EOS) % eosEvery === 0) return eosTokenId;
    if (ordinaryIds) {
      let k = derive(this.state, tokenSalt(j)) % ordinaryIds.length;
      while (this.ids.includes(ordinaryIds[k]!)) k = (k + 1) % ordinaryIds.length;
      return ordinaryIds[k]!;
    }
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

  /** Unrounded logprob of any token, ranked or not; unranked ones sit below every ranked one. */
  rawLogprobOf(token: number): number {
    for (let j = 0; j < PROMPT_RANK_WIDTH; j++) if (this.id(j) === token) return this.rawLogprob(j);
    const floor = this.lnRest + (PROMPT_RANK_WIDTH - 1) * this.lnQ;
    return floor - 1 - 8 * unit(derive(this.state, (SALT_TAIL ^ token) >>> 0));
  }

  logprobOf(token: number): number {
    return roundLogprob(this.rawLogprobOf(token));
  }
}

/**
 * A ranking under logit_bias: every biased token's logit moves by its bias, the distribution is
 * renormalised (the base ranking sums to 1, so log Z = log(1 + Σ (e^(l+b) − e^l)) over the biased
 * ids), and candidates are re-ranked by the new logprobs (ties keep the base order). The first
 * PROMPT_RANK_WIDTH base candidates and every biased id are ranked explicitly; deeper base
 * candidates follow in base order.
 */
class BiasedRanking implements Distribution {
  private readonly list: { id: number; lp: number }[];
  private readonly biased: ReadonlyMap<number, number>;
  private readonly lnZ: number;
  private nextBase: number;

  constructor(private readonly base: Ranking, bias: ReadonlyMap<number, number>, width: number) {
    this.biased = bias;
    let extra = 0;
    const raw = new Map<number, number>();
    for (const [id, b] of bias) {
      const l = base.rawLogprobOf(id);
      raw.set(id, l + b);
      extra += Math.exp(l + b) - Math.exp(l);
    }
    // Guard: a distribution whose whole mass was biased away keeps its base normaliser.
    this.lnZ = 1 + extra > 1e-300 ? Math.log(1 + extra) : 0;
    const entries: { id: number; lp: number; order: number }[] = [];
    const depth = Math.max(PROMPT_RANK_WIDTH, width);
    for (let j = 0; j < depth; j++) {
      const id = base.id(j);
      if (!bias.has(id)) entries.push({ id, lp: base.rawLogprob(j) - this.lnZ, order: j });
    }
    for (const [id, l] of raw) entries.push({ id, lp: l - this.lnZ, order: depth + entries.length });
    entries.sort((a, b) => b.lp - a.lp || a.order - b.order);
    this.list = entries.map(({ id, lp }) => ({ id, lp }));
    this.nextBase = depth;
  }

  private grow(j: number): void {
    while (this.list.length <= j) {
      const id = this.base.id(this.nextBase);
      if (!this.biased.has(id)) this.list.push({ id, lp: this.base.rawLogprob(this.nextBase) - this.lnZ });
      this.nextBase++;
    }
  }

  id(j: number): number {
    this.grow(j);
    return this.list[j]!.id;
  }

  logprob(j: number): number {
    this.grow(j);
    return roundLogprob(this.list[j]!.lp);
  }

  top(n: number): TopEntry[] {
    const out: TopEntry[] = new Array(n);
    for (let j = 0; j < n; j++) out[j] = [this.logprob(j), this.id(j)];
    return out;
  }

  logprobOf(token: number): number {
    const b = this.biased.get(token) ?? 0;
    return roundLogprob(this.base.rawLogprobOf(token) + b - this.lnZ);
  }
}

/** The logit_bias of a request as id → bias (keys validated by the request parser). */
function biasMap(bias: Readonly<Record<string, number>> | undefined): ReadonlyMap<number, number> | null {
  if (!bias) return null;
  const m = new Map<number, number>();
  for (const [k, v] of Object.entries(bias)) if (typeof v === 'number' && Number.isFinite(v) && v !== 0) m.set(Number(k), v);
  return m.size > 0 ? m : null;
}

/** The request's temperature as SGLang reads it: absent means 1.0. */
const temperatureOf = (p: DecodeParams) => p.temperature ?? 1.0;

/** True when the request samples: SGLang's default (temperature 1.0) does; < 1e-6 or top_k 1 is greedy. */
export function samples(p: DecodeParams): boolean {
  return temperatureOf(p) >= 1e-6 && p.top_k !== 1;
}

/** Step-by-step decoding of one request, O(1) per step (plus the top list asked for). */
export class Decoder {
  private state: number;
  private produced = 0;
  private done: FinishReason | null = null;
  private readonly stopIds: ReadonlySet<number>;
  private readonly minNew: number;
  private readonly topN: number;
  private readonly drawSalt: number;
  private readonly bias: ReadonlyMap<number, number> | null;
  private readonly idsLogprob: readonly number[];
  /** Extra EOS ids beyond cfg.eosTokenId (null: just that one, the common case). */
  private readonly otherEos: ReadonlySet<number> | null;
  /** The script's ids for this prompt and the next one to emit (null: the hash model). */
  private readonly scripted: { ids: readonly number[]; pos: number } | null;

  constructor(
    prompt: readonly number[] | number,
    private readonly p: DecodeParams,
    private readonly cfg: ModelConfig = DEFAULT_MODEL,
    private weights: number = DEFAULT_WEIGHTS,
  ) {
    this.state = typeof prompt === 'number' ? prompt : contextState(prompt);
    this.stopIds = new Set(p.stop_token_ids ?? []);
    this.minNew = p.min_new_tokens ?? 0;
    this.topN = p.top_logprobs_num ?? 0;
    this.drawSalt = p.sampling_seed === undefined ? SALT_DRAW : fmix32((p.sampling_seed ^ SALT_SEED) >>> 0);
    this.bias = biasMap(p.logit_bias);
    this.idsLogprob = p.token_ids_logprob ?? [];
    const others = (cfg.eosTokenIds ?? []).filter((id) => id !== cfg.eosTokenId);
    this.otherEos = others.length > 0 ? new Set(others) : null;
    const c = cfg.script !== undefined && typeof prompt !== 'number' ? cfg.script.continuation(prompt) : null;
    this.scripted = c === null ? null : { ids: c.ids, pos: c.pos };
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

  /** New weights from the next step on (a live weight update of the worker). */
  setWeights(weights: number): void {
    this.weights = weights;
  }

  next(): Step {
    if (this.done) throw new Error('decoder already finished');
    const s = salted(this.state, this.weights);
    const base = new Ranking(s, this.cfg);
    const dist: Distribution = this.bias ? new BiasedRanking(base, this.bias, Math.max(SAMPLE_WIDTH, this.topN)) : base;
    const sc = this.scripted;
    let token: number;
    let logprob: number;
    if (sc !== null && sc.pos < sc.ids.length) {
      // The script's next token, whatever the ranking: its logprob is the ranking's for it.
      token = sc.ids[sc.pos++]!;
      logprob = dist.logprobOf(token);
    } else {
      const j = samples(this.p) ? this.draw(dist, s) : this.firstAllowed(dist);
      token = dist.id(j);
      logprob = dist.logprob(j);
    }
    const step: Step = {
      token,
      logprob,
      top: this.topN > 0 ? dist.top(this.topN) : [],
      idsLogprobs: this.idsLogprob.length > 0 ? this.idsLogprob.map((id) => dist.logprobOf(id)) : NO_IDS,
      finish: null,
    };
    this.produced++;
    this.state = foldToken(this.state, token);
    if (this.produced >= this.p.max_new_tokens) step.finish = { type: 'length', length: this.p.max_new_tokens };
    else if (this.stopIds.has(token)) step.finish = { type: 'stop', matched: token };
    else if (this.isEos(token) && !this.p.ignore_eos) step.finish = { type: 'stop', matched: token };
    this.done = step.finish;
    return step;
  }

  /**
   * Takes `token` as the next one without sampling it (a P/D decode leg goes on from the token its
   * prefill sampled, decode.py pop_transferred); returns the finish it brings, as next() would.
   */
  adopt(token: number): FinishReason | null {
    if (this.done) return this.done;
    const sc = this.scripted;
    if (sc !== null && sc.pos < sc.ids.length) sc.pos++;
    this.produced++;
    this.state = foldToken(this.state, token);
    let finish: FinishReason | null = null;
    if (this.produced >= this.p.max_new_tokens) finish = { type: 'length', length: this.p.max_new_tokens };
    else if (this.stopIds.has(token)) finish = { type: 'stop', matched: token };
    else if (this.isEos(token) && !this.p.ignore_eos) finish = { type: 'stop', matched: token };
    this.done = finish;
    return finish;
  }

  private isEos(id: number): boolean {
    return id === this.cfg.eosTokenId || (this.otherEos !== null && this.otherEos.has(id));
  }

  private allowed(id: number): boolean {
    const early = this.produced < this.minNew;
    if (early && this.isEos(id)) return false;
    return !(early && this.stopIds.has(id));
  }

  private firstAllowed(r: Distribution): number {
    for (let j = 0; ; j++) if (this.allowed(r.id(j))) return j;
  }

  /**
   * A weighted draw among the top candidates: top_k (at most 8), then top_p (the smallest prefix
   * whose probability reaches top_p) and min_p (p >= min_p * p(first allowed)), weights p^(1/T).
   * u is a pure function of the salted state and of sampling_seed (a fixed salt without one).
   */
  private draw(r: Distribution, state: number): number {
    const t = temperatureOf(this.p);
    const k = this.p.top_k !== undefined && this.p.top_k > 0 ? Math.min(this.p.top_k, SAMPLE_WIDTH) : SAMPLE_WIDTH;
    const topP = this.p.top_p ?? 1;
    const minP = this.p.min_p ?? 0;
    const picks: number[] = [];
    const weights: number[] = [];
    let total = 0;
    let mass = 0;
    let pMax = -1;
    for (let j = 0; j < k && mass < topP; j++) {
      if (!this.allowed(r.id(j))) continue;
      const p = Math.exp(r.logprob(j));
      if (pMax < 0) pMax = p;
      mass += p;
      if (p < minP * pMax) break;
      const w = Math.exp(r.logprob(j) / t);
      picks.push(j);
      weights.push(w);
      total += w;
    }
    if (picks.length === 0 || !(total > 0)) return this.firstAllowed(r);
    const u = unit(derive(state, this.drawSalt));
    let acc = 0;
    for (let i = 0; i < picks.length; i++) {
      acc += weights[i]! / total;
      if (u < acc) return picks[i]!;
    }
    return picks[picks.length - 1]!;
  }
}

/** The whole uninterrupted answer: the reference the tests and the oracle compare against. */
export function runModel(prompt: readonly number[], params: DecodeParams, cfg: ModelConfig = DEFAULT_MODEL, weights: number = DEFAULT_WEIGHTS): ModelOutput {
  const d = new Decoder(prompt, params, cfg, weights);
  const out: ModelOutput = {
    output_ids: [],
    output_logprobs: [],
    output_top_logprobs: [],
    output_ids_logprobs: [],
    finish_reason: d.finish ?? { type: 'length', length: 0 },
  };
  while (!d.finish) {
    const s = d.next();
    out.output_ids.push(s.token);
    out.output_logprobs.push(s.logprob);
    out.output_top_logprobs.push(s.top);
    out.output_ids_logprobs.push(s.idsLogprobs);
    if (s.finish) out.finish_reason = s.finish;
  }
  return out;
}

export interface PromptLogprobs {
  /** One per prompt position from `start`; the first is null, as SGLang reports it. */
  logprobs: (number | null)[];
  /** Same positions; null first, then the top `topN` alternatives at each position. */
  tops: (TopEntry[] | null)[];
  /** Same positions; null first, then the logprobs of `tokenIds` (in their order) at each position. */
  ids: (number[] | null)[];
}

/**
 * Logprobs of the prompt's own tokens from position `start` on, each given its prefix (a start
 * equal to the prompt length gives empty lists). Prompt logprobs ignore logit_bias: SGLang applies
 * the bias when sampling, not to the prompt's logits.
 */
export function promptLogprobs(
  prompt: readonly number[],
  start: number,
  topN: number,
  cfg: ModelConfig = DEFAULT_MODEL,
  weights: number = DEFAULT_WEIGHTS,
  tokenIds: readonly number[] = [],
): PromptLogprobs {
  const out: PromptLogprobs = { logprobs: [], tops: [], ids: [] };
  let s = INITIAL_STATE;
  for (let j = 0; j < prompt.length; j++) {
    if (j > start) {
      const r = new Ranking(salted(s, weights), cfg);
      out.logprobs.push(r.logprobOf(prompt[j]!));
      out.tops.push(topN > 0 ? r.top(topN) : null);
      out.ids.push(tokenIds.length > 0 ? tokenIds.map((id) => r.logprobOf(id)) : null);
    } else if (j === start) {
      out.logprobs.push(null);
      out.tops.push(null);
      out.ids.push(null);
    }
    s = foldToken(s, prompt[j]!);
  }
  return out;
}
