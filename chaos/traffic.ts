// The campaign's traffic: unit i is a pure function of (seed, i), so the same seed sends the
// same requests in the same order whatever the timing. A unit is usually one request; some are
// groups sent together: requests that share a correlation header (no body rid), and requests
// whose body rids share a prefix while one of them is cancelled. The mix covers what migration
// must get right (stream and unary, logprobs with and without top lists and prompt windows,
// min/stop/EOS rules, zero budgets), a share that must NOT migrate (stateful sampling, unresolved
// budget), and requests that are the client's own fault (ids beyond the vocabulary).
//
// Two wire formats: SGLang's `POST /generate` and vLLM's `POST /inference/v1/generate`. A campaign
// sends one of them, or both (`mixed`: unit i's format is a pure function of (seed, i), and an
// SGLang unit of a mixed campaign is the very unit an SGLang campaign sends at i). vLLM units
// mirror the SGLang mix where it applies: stream and unary, `logprobs` k, `stream_options` usage
// (none, final, continuous), `min_tokens`, `ignore_eos`, `stop_token_ids`, budgets >= 1 (vLLM
// refuses 0), cancels, stateful sampling that must not migrate (`seed` with temperature > 0,
// penalties, no `max_tokens`), ids beyond the vocabulary, and shared ids — for vLLM a shared
// `X-Request-Id` header, which overrides the body's `request_id` and becomes the logical id.

import { fmix32 } from '../sim/model.ts';
import { Rng } from './rng.ts';
import { DEFAULT_MODEL, runModel, type DecodeParams } from '../sim/model.ts';
import { budgetOf, decodeParams } from '../sim/vllm/model.ts';
import { resolveSampling } from '../sim/vllm/request.ts';
import { vllmReference } from '../sim/vllm/reference.ts';
import type { CampaignFormat, WireFormat } from './formats.ts';

export type TrafficKind = 'greedy' | 'sampling_seed' | 'frequency_penalty' | 'presence_penalty' | 'repetition_penalty' | 'unresolved_budget' | 'bad_request';

/**
 * Clients that must not hurt anyone else (docs/reliability.md, the campaign's clients):
 * - `unknown_key`: an SGLang request with a sampling_params key SGLang's SamplingParams does not
 *   have (a typo, or OpenAI's `max_tokens`): SGLang raises TypeError, which its stream branch does
 *   not catch; the client must get a clear error, and no worker may pay for it;
 * - `stream_interval`: an SGLang stream whose sampling_params.stream_interval spaces its frames
 *   near or beyond the router's inter-token deadline: it must finish exactly, unstalled;
 * - `never_read`: a stream whose client never reads its answer: the router must cut it after its
 *   client write timeout, and it must never hold other traffic back;
 * - `keep_alive`: short requests sent in bursts 4.8–5.2 s apart, so that the router's upstream
 *   connections sit idle about as long as uvicorn keeps them (timeout_keep_alive 5 s) before the
 *   next request to the same worker: none may fail.
 */
export type ClientKind = 'unknown_key' | 'stream_interval' | 'never_read' | 'keep_alive';
export const CLIENT_KINDS: readonly ClientKind[] = ['unknown_key', 'stream_interval', 'never_read', 'keep_alive'];

export { CAMPAIGN_FORMATS, GENERATE_PATH, type CampaignFormat, type WireFormat } from './formats.ts';

/**
 * vLLM usage a client must get: `none` (no usage anywhere), `final` (the `{choices: [], usage}`
 * chunk before [DONE]; a unary answer always carries usage), `continuous` (also on every chunk).
 */
export type UsageMode = 'none' | 'final' | 'continuous';

/** What a vLLM request asked of its answer's shape. */
export interface VllmShape {
  /** sampling_params.logprobs (k alternatives per token), or null. */
  logprobs: number | null;
  usage: UsageMode;
}

/** Several requests sent at once, judged together as well as one by one. */
export interface GroupInfo {
  kind: 'shared_header' | 'prefix_rids';
  /** The group's name: the shared header value, or the shortest of the rids. */
  name: string;
  size: number;
  /** This request's place in the group. */
  member: number;
  /** prefix_rids: the member whose client hangs up. */
  canceller?: number;
}

export interface RequestSpec {
  /** The wire format: which endpoint of the router, which workers, which reference. */
  format: WireFormat;
  index: number;
  /** Unique per request in the campaign (records, progress, kept files). */
  key: string;
  /**
   * The logical id the router must use (meta_info.id / vLLM's `generate-tokens-<id>`, trace rows):
   * the body rid, or the shared header's value (SGLang: for a request that sends no rid; vLLM:
   * X-Request-Id, whatever the body's request_id says).
   */
  id: string;
  kind: TrafficKind;
  stream: boolean;
  body: Record<string, unknown>;
  /** Extra request headers (a shared correlation id). */
  headers?: Record<string, string>;
  group?: GroupInfo;
  /** Whether migration.md's admission rules admit this request. */
  admitted: boolean;
  /** The admission reason the router must record when it refuses. */
  reason: string | null;
  /**
   * What the worker model decodes with: the fault-free reference is runModel(prompt, decode)
   * (vLLM: vLLM's params as the simulated vLLM worker maps them; its reference is vllmReference).
   */
  prompt: number[];
  decode: DecodeParams;
  /** vLLM only: the answer's shape the client asked for. */
  vllm?: VllmShape;
  returnLogprob: boolean;
  logprobStartLen: number;
  topLogprobsNum: number;
  /** A client that hangs up after this many stream chunks (a cancel); undefined: reads to the end. */
  cancelAfterChunks?: number;
  /** bad_request: the prompt position holding an id beyond the vocabulary, and that id. */
  bad?: { position: number; token: number };
  /** Which of the campaign's special clients sends it (absent: ordinary traffic). */
  client?: ClientKind;
  /** unknown_key: the sampling_params key SGLang does not know. */
  unknownKey?: string;
  /** stream_interval: the value sent (tokens per frame). */
  streamInterval?: number;
}

/** SGLang's default budget when the request gives none (the simulated workers advertise none). */
export const WORKER_DEFAULT_MAX_NEW_TOKENS = 128;

/** What SGLang says, in band or in a 400, for input ids beyond the vocabulary. */
export const VOCAB_REFUSAL = /contains values greater than the vocab size/;
/** What the simulated vLLM worker says, in band or in a 400 ("Token id N is out of vocabulary"). */
export const VLLM_VOCAB_REFUSAL = /Token id \d+ is out of vocabulary/;

/** A format's refusal of ids beyond the vocabulary. */
export function vocabRefusal(format: WireFormat | undefined): RegExp {
  return format === 'vllm' ? VLLM_VOCAB_REFUSAL : VOCAB_REFUSAL;
}

/** The correlation headers a shared-header group uses (router/index.ts REQUEST_ID_HEADERS). */
export const SHARED_HEADERS = ['x-trace-id', 'x-correlation-id'] as const;

const NOT_ADMITTED: Record<Exclude<TrafficKind, 'greedy' | 'bad_request' | 'repetition_penalty'>, number> = {
  sampling_seed: 4,
  frequency_penalty: 3,
  presence_penalty: 1,
  unresolved_budget: 2,
};

/** vLLM's share of each reason (router/formats/vllm/admission.ts names them so). */
const VLLM_NOT_ADMITTED: Record<Exclude<TrafficKind, 'greedy' | 'bad_request'>, number> = {
  sampling_seed: 4,
  frequency_penalty: 2,
  presence_penalty: 1,
  repetition_penalty: 1,
  unresolved_budget: 2,
};

/** The correlation header a vLLM shared-id group uses: vLLM's own, which overrides request_id. */
export const VLLM_SHARED_HEADER = 'x-request-id';

/** The largest logprobs k a vLLM request asks for (the simulated worker allows 20). */
const VLLM_LOGPROBS = [0, 1, 2, 3, 5] as const;

export interface TrafficOptions {
  seed: number;
  /** Share of requests the router must refuse to migrate. */
  nonMigratableShare: number;
  /** Largest max_new_tokens asked for. */
  maxNewTokens: number;
  /** Share of stream requests whose client hangs up mid-stream. */
  cancelShare: number;
  /** Share of single requests that are the client's own fault (an id beyond the vocabulary). */
  badShare?: number;
  /** Share of units that are a group sharing a correlation header. */
  sharedHeaderShare?: number;
  /** Share of units that are a group of prefix-sharing rids, one of them cancelled. */
  prefixShare?: number;
  /** Which formats the traffic speaks (default sglang). */
  format?: CampaignFormat;
  /** Share of SGLang units that are an unknown-sampling-key request. */
  unknownKeyShare?: number;
  /** Share of SGLang units that are a stream_interval stream (only with streamIntervalTokens). */
  streamIntervalShare?: number;
  /**
   * stream_interval values to send, in tokens, lowest and highest: the campaign derives them from
   * its inter-token deadline and token interval. Absent: no stream_interval clients.
   */
  streamIntervalTokens?: readonly [number, number];
  /** Requests in each keep-alive burst. */
  keepAliveBurst?: number;
}

export const TRAFFIC_DEFAULTS = { badShare: 0.02, sharedHeaderShare: 0.015, prefixShare: 0.015, unknownKeyShare: 0.02, streamIntervalShare: 0.02, keepAliveBurst: 12 } as const;

/** The format of unit i: the campaign's, or in a mixed campaign a seeded half of the units each. */
export function unitFormat(o: TrafficOptions, index: number): WireFormat {
  const f = o.format ?? 'sglang';
  if (f !== 'mixed') return f;
  return new Rng(o.seed, fmix32((index + 1) ^ 0x6d1f0a77)).chance(0.5) ? 'vllm' : 'sglang';
}

/** Unit i: one request, or a group sent together. */
export function planUnit(o: TrafficOptions, index: number): RequestSpec[] {
  return planFormatUnit(unitFormat(o, index) === 'vllm' ? VLLM_TRAFFIC : SGLANG_TRAFFIC, o, index);
}

/** Single request i of an SGLang campaign (also the basis of group members). */
export function planRequest(o: TrafficOptions, index: number): RequestSpec {
  return planFormatRequest(SGLANG_TRAFFIC, o, index);
}

/** Unit i of vLLM traffic: one request, or a group sent together (shared X-Request-Id, prefix ids). */
export function planVllmUnit(o: TrafficOptions, index: number): RequestSpec[] {
  return planFormatUnit(VLLM_TRAFFIC, o, index);
}

/** Single vLLM request i: the body's request_id is its logical id. */
export function planVllmRequest(o: TrafficOptions, index: number): RequestSpec {
  return planFormatRequest(VLLM_TRAFFIC, o, index);
}

/**
 * What SGLang and vLLM traffic differ in. Units, single requests and both kinds of group are
 * planned once, below, for either format: each plan makes the same draws in the same order for
 * both, and each format's salts keep its seeds replaying the requests they always did.
 */
interface TrafficFormat {
  /** Request i's id is `chaos-<seed>-<tag><i>`; a shared-header group's name `<tag>trace-<seed>-<i>`. */
  tag: '' | 'v';
  /** Salts of the seeded draws: unit i's kind, request i, a shared-header member, a prefix member. */
  salt: { unit: number; request: number; shared: number; prefix: number };
  /**
   * The body's keys: the request's own id (the logical id unless a header overrides it), its
   * prompt, and in sampling_params its budget and its minimum.
   */
  keys: { id: 'rid' | 'request_id'; prompt: 'input_ids' | 'token_ids'; budget: 'max_new_tokens' | 'max_tokens'; min: 'min_new_tokens' | 'min_tokens' };
  /** A non-migratable request's reason, drawn with the format's shares. */
  drawReason: (rng: Rng) => TrafficKind;
  /** A special client's request that takes unit i instead (SGLang), or null. */
  special?: (o: TrafficOptions, index: number) => RequestSpec | null;
  /** A request's body and reference, once its stream mode and prompt are drawn. */
  request: (o: TrafficOptions, rng: Rng, s: Shape, stream: boolean, prompt: number[]) => RequestSpec;
  /** A shared-header group's header: drawn, or the format's own. */
  sharedHeader: (rng: Rng) => string;
  /** What else a shared-header member sends (vLLM: a body request_id the header overrides). */
  sharedMember?: (spec: RequestSpec, r: Rng, name: string, member: number) => void;
  /** Brings the request's reference (spec.decode) in line with its changed sampling_params (runLong). */
  redecode: (spec: RequestSpec, n: number) => void;
}

function planFormatUnit(f: TrafficFormat, o: TrafficOptions, index: number): RequestSpec[] {
  const special = f.special?.(o, index);
  if (special) return [special];
  const rng = new Rng(o.seed, fmix32((index + 1) ^ f.salt.unit));
  const shared = o.sharedHeaderShare ?? TRAFFIC_DEFAULTS.sharedHeaderShare;
  const prefix = o.prefixShare ?? TRAFFIC_DEFAULTS.prefixShare;
  const u = rng.float();
  if (u < shared) return planSharedHeader(f, o, index, rng);
  if (u < shared + prefix) return planPrefixIds(f, o, index, rng);
  return [planFormatRequest(f, o, index)];
}

function planFormatRequest(f: TrafficFormat, o: TrafficOptions, index: number): RequestSpec {
  const rng = new Rng(o.seed, fmix32((index + 1) ^ f.salt.request));
  const id = `chaos-${o.seed}-${f.tag}${index}`;
  const kind: TrafficKind = rng.chance(o.nonMigratableShare) ? f.drawReason(rng) : 'greedy';
  const spec = build(f, o, rng, { index, key: id, kind, promptLength: null });
  spec.body[f.keys.id] = id;
  // Drawn last, so that the rest of request i is what it was before bad requests existed. SGLang
  // refuses it; the simulated vLLM worker refuses it in the engine's input processor: in band on a
  // stream (after the 200), a 400 on a unary request ("Token id N is out of vocabulary").
  if (kind === 'greedy' && rng.chance(o.badShare ?? TRAFFIC_DEFAULTS.badShare)) {
    const position = rng.int(0, spec.prompt.length - 1);
    const token = rng.int(DEFAULT_MODEL.vocabSize, DEFAULT_MODEL.vocabSize + 5000);
    const ids = [...spec.prompt];
    ids[position] = token;
    spec.body[f.keys.prompt] = ids;
    spec.kind = 'bad_request';
    spec.bad = { position, token };
    // A refusal has no stream to hang up on.
    delete spec.cancelAfterChunks;
  }
  return spec;
}

/**
 * Several concurrent requests with the same correlation header: the router takes the header as
 * their logical id, but each must get its own answer. SGLang: x-trace-id / x-correlation-id and no
 * body rid. vLLM: X-Request-Id, which vLLM takes over the body's request_id (serving.py
 * `_base_request_id`); most members also send a body request_id of their own, which must then
 * appear nowhere (not in frames, not in trace rows). Prompt lengths differ, so the verifier can
 * tell their trace rows apart (prompt_tokens, and prompt_tokens_sent − replayed_tokens on attempt
 * rows).
 */
function planSharedHeader(f: TrafficFormat, o: TrafficOptions, index: number, rng: Rng): RequestSpec[] {
  const size = rng.int(2, 4);
  const header = f.sharedHeader(rng);
  const name = `${f.tag}trace-${o.seed}-${index}`;
  const lengths = distinct(rng, size, 1, 48);
  return lengths.map((promptLength, member) => {
    const r = new Rng(o.seed, fmix32(((index + 1) * 8 + member) ^ f.salt.shared));
    const spec = build(f, o, r, { index, key: `${name}.${member}`, kind: 'greedy', promptLength });
    delete spec.cancelAfterChunks;
    f.sharedMember?.(spec, r, name, member);
    spec.id = name;
    spec.headers = { [header]: name };
    spec.group = { kind: 'shared_header', name, size, member };
    return spec;
  });
}

/**
 * Requests with body ids `<base>-job-1`, `<base>-job-10` (and `<base>-job-100`) in flight
 * together, all streaming; one client (most often the shortest id's, which is a prefix of the
 * others) hangs up after a few chunks. SGLang's /abort_request aborts every rid that starts with
 * the given one (vLLM's abort_requests takes exact ids): the others must finish exactly. They ask
 * for long answers, so that they are still running when the cancel comes.
 */
function planPrefixIds(f: TrafficFormat, o: TrafficOptions, index: number, rng: Rng): RequestSpec[] {
  const size = rng.int(2, 3);
  const base = `chaos-${o.seed}-${f.tag}${index}-job`;
  const canceller = rng.chance(0.7) ? 0 : rng.int(1, size - 1);
  const lengths = distinct(rng, size, 1, 48);
  return lengths.map((promptLength, member) => {
    const r = new Rng(o.seed, fmix32(((index + 1) * 8 + member) ^ f.salt.prefix));
    const rid = `${base}-1${'0'.repeat(member)}`;
    const spec = build(f, o, r, { index, key: rid, kind: 'greedy', promptLength, stream: true });
    spec.id = rid;
    spec.body[f.keys.id] = rid;
    spec.group = { kind: 'prefix_rids', name: `${base}-1`, size, member, canceller };
    // Long enough that every member is still running when the cancel comes: at least 48 tokens.
    runLong(f, spec, Math.max(48, o.maxNewTokens));
    if (member === canceller) spec.cancelAfterChunks = r.int(1, 4);
    else delete spec.cancelAfterChunks;
    return spec;
  });
}

/** Makes a request run a budget of n tokens to its end: no EOS, no stop token, no minimum. */
function runLong(f: TrafficFormat, spec: RequestSpec, n: number): void {
  const sp = spec.body.sampling_params as Record<string, unknown>;
  sp[f.keys.budget] = n;
  sp.ignore_eos = true;
  delete sp.stop_token_ids;
  delete sp[f.keys.min];
  f.redecode(spec, n);
}

/** A request of format f: stream mode and prompt drawn first, the format's body, then a cancel. */
function build(f: TrafficFormat, o: TrafficOptions, rng: Rng, s: Shape): RequestSpec {
  const drawnStream = rng.chance(0.6);
  const stream = s.stream ?? drawnStream;
  const drawnLength = rng.int(1, 48);
  const prompt = Array.from({ length: s.promptLength ?? drawnLength }, () => rng.int(3, DEFAULT_MODEL.vocabSize - 1));
  const spec = f.request(o, rng, s, stream, prompt);
  if (stream && rng.chance(o.cancelShare)) spec.cancelAfterChunks = rng.int(1, 8);
  return spec;
}
// --- the special clients -----------------------------------------------------------------------

/**
 * sampling_params keys SGLang's SamplingParams has no field for (python/sglang/srt/sampling/
 * sampling_params.py; `SamplingParams(**sampling_params)` in tokenizer_manager.py raises
 * TypeError for any of them): OpenAI's and vLLM's names, and typos.
 */
export const UNKNOWN_SAMPLING_KEYS = ['max_tokens', 'max_completion_tokens', 'seed', 'temprature', 'max_new_token', 'presense_penalty', 'stop_sequences'] as const;

/**
 * A draw of its own decides whether SGLang unit i is a special client's request, so every other
 * unit of a seed is the unit it was before these clients existed.
 */
function planClientUnit(o: TrafficOptions, index: number): RequestSpec | null {
  const rng = new Rng(o.seed, fmix32((index + 1) ^ 0x4b1d2a97));
  const u = rng.float();
  const unknown = o.unknownKeyShare ?? TRAFFIC_DEFAULTS.unknownKeyShare;
  const interval = o.streamIntervalTokens ? (o.streamIntervalShare ?? TRAFFIC_DEFAULTS.streamIntervalShare) : 0;
  if (u < unknown) return planUnknownKey(o, index, rng);
  if (u < unknown + interval) return planStreamInterval(o, index, rng);
  return null;
}

/**
 * A request whose sampling_params hold one key SGLang does not know: either OpenAI's habit (its
 * budget as `max_tokens` / `max_completion_tokens` instead of `max_new_tokens`) or a key added
 * beside valid ones. Streams and unary requests alike; never cancelled (there is nothing to read).
 */
function planUnknownKey(o: TrafficOptions, index: number, rng: Rng): RequestSpec {
  const id = `chaos-${o.seed}-${index}-uk`;
  const spec = build(SGLANG_TRAFFIC, o, rng, { index, key: id, kind: 'greedy', promptLength: null });
  spec.body.rid = id;
  delete spec.cancelAfterChunks;
  const key = rng.pick(UNKNOWN_SAMPLING_KEYS);
  const sp = spec.body.sampling_params as Record<string, unknown>;
  const budget = sp.max_new_tokens as number;
  if ((key === 'max_tokens' || key === 'max_completion_tokens') && rng.chance(0.5)) {
    // OpenAI's habit: the budget under OpenAI's name only.
    delete sp.max_new_tokens;
    spec.decode.max_new_tokens = WORKER_DEFAULT_MAX_NEW_TOKENS;
    spec.kind = 'unresolved_budget';
    spec.admitted = false;
    spec.reason = 'unresolved_budget';
  }
  sp[key] = key === 'seed' ? rng.int(1, 1_000_000) : key === 'temprature' ? 0.7 : key === 'presense_penalty' ? 0.5 : key === 'stop_sequences' ? ['\n\n'] : budget;
  spec.client = 'unknown_key';
  spec.unknownKey = key;
  return spec;
}

/**
 * A stream with `sampling_params.stream_interval` from `streamIntervalTokens`: SGLang sends the
 * first token at once, then a frame every stream_interval tokens (scheduler_output_processor_mixin
 * .py stream_output_generation: `len(output_ids) % stream_interval == 1`), so its frames come
 * about stream_interval × the token interval apart. 1–3 such gaps, no early end (ignore_eos, no
 * stop token, no min), never cancelled.
 */
function planStreamInterval(o: TrafficOptions, index: number, rng: Rng): RequestSpec {
  const id = `chaos-${o.seed}-${index}-si`;
  const spec = build(SGLANG_TRAFFIC, o, rng, { index, key: id, kind: 'greedy', promptLength: null, stream: true });
  spec.body.rid = id;
  delete spec.cancelAfterChunks;
  const [lo, hi] = o.streamIntervalTokens!;
  const interval = rng.int(lo, hi);
  const n = interval * rng.int(1, 3) + 1;
  runLong(SGLANG_TRAFFIC, spec, n);
  (spec.body.sampling_params as Record<string, unknown>).stream_interval = interval;
  spec.client = 'stream_interval';
  spec.streamInterval = interval;
  return spec;
}

/** Never-reading client k: when it opens its stream (ms after the previous one), and the stream. */
export interface NeverReaderPlan {
  gapMs: number;
  spec: RequestSpec;
}

/**
 * Never-reading client k: an SGLang stream whose every frame is large (the whole prompt's
 * logprobs with 5 alternatives each, which SGLang sends again in every chunk), so that a few
 * frames fill the socket buffers and the router's writes to the client block at once; a budget
 * far beyond what can be written (ignore_eos). Its client reads the response head and nothing
 * more. Opened 3–5 s after the previous one.
 */
export function planNeverReader(o: TrafficOptions, k: number): NeverReaderPlan {
  const rng = new Rng(o.seed, fmix32((k + 1) ^ 0x6e7652d1));
  const id = `chaos-${o.seed}-nr${k}`;
  const prompt = Array.from({ length: 600 }, () => rng.int(3, DEFAULT_MODEL.vocabSize - 1));
  const n = 2000;
  const body = { rid: id, input_ids: prompt, stream: true, return_logprob: true, logprob_start_len: 0, top_logprobs_num: 5, sampling_params: { max_new_tokens: n, ignore_eos: true, temperature: 0 } };
  const spec: RequestSpec = {
    format: 'sglang', index: -1 - k, key: id, id, kind: 'greedy', stream: true, body, admitted: true, reason: null, prompt,
    decode: { max_new_tokens: n, top_k: 1, temperature: 0, ignore_eos: true, top_logprobs_num: 5 },
    returnLogprob: true, logprobStartLen: 0, topLogprobsNum: 5, client: 'never_read',
  };
  return { gapMs: rng.int(3000, 5000), spec };
}

/** uvicorn's timeout_keep_alive as SGLang launches it (http_server.py launch_server: `timeout_keep_alive=5`). */
export const UVICORN_KEEP_ALIVE_MS = 5000;

/** Keep-alive burst k: how long after the previous burst ended it starts, and its requests. */
export interface KeepAliveBurstPlan {
  gapMs: number;
  specs: RequestSpec[];
}

/**
 * Keep-alive burst k: `keepAliveBurst` short unary requests (1–4 tokens) sent together 4.8–5.2 s
 * after the previous burst ended. A burst needs more upstream connections than the steady traffic
 * keeps busy, so the next burst finds on each worker connections idle since the last one: about
 * uvicorn's keep-alive limit, on either side of it. In a mixed campaign, members alternate formats.
 */
export function planKeepAliveBurst(o: TrafficOptions, k: number): KeepAliveBurstPlan {
  const rng = new Rng(o.seed, fmix32((k + 1) ^ 0x3a11ce55));
  const gapMs = rng.int(UVICORN_KEEP_ALIVE_MS - 200, UVICORN_KEEP_ALIVE_MS + 200);
  const size = o.keepAliveBurst ?? TRAFFIC_DEFAULTS.keepAliveBurst;
  const fmt = o.format ?? 'sglang';
  const specs = Array.from({ length: size }, (_, j) => {
    const r = new Rng(o.seed, fmix32(((k + 1) * 64 + j) ^ 0x1f2e3d4c));
    const format: WireFormat = fmt === 'mixed' ? (j % 2 === 0 ? 'sglang' : 'vllm') : fmt;
    const key = `chaos-${o.seed}-ka${k}.${j}`;
    const f = TRAFFIC_FORMATS[format];
    const spec = build(f, { ...o, maxNewTokens: 4, cancelShare: 0 }, r, { index: -1 - k, key, kind: 'greedy', promptLength: null, stream: false });
    spec.body[f.keys.id] = key;
    spec.client = 'keep_alive';
    return spec;
  });
  return { gapMs, specs };
}

function distinct(rng: Rng, n: number, lo: number, hi: number): number[] {
  const out: number[] = [];
  while (out.length < n) {
    const x = rng.int(lo, hi);
    if (!out.includes(x)) out.push(x);
  }
  return out;
}

interface Shape {
  index: number;
  key: string;
  kind: TrafficKind;
  /** A fixed prompt length (group members), else drawn. */
  promptLength: number | null;
  /** Force streaming (else drawn). */
  stream?: boolean;
}

/** An SGLang `/generate` request: its body and the reference it decodes with. */
function sglangRequest(o: TrafficOptions, rng: Rng, s: Shape, stream: boolean, prompt: number[]): RequestSpec {
  const kind = s.kind;

  const sampling: Record<string, unknown> = {};
  // A budget of 0 is legal and must end without a token; keep it rare.
  const maxNew = rng.chance(0.02) ? 0 : rng.int(1, o.maxNewTokens);
  const decode: DecodeParams = { max_new_tokens: maxNew, top_k: -1 };
  if (kind === 'unresolved_budget') decode.max_new_tokens = WORKER_DEFAULT_MAX_NEW_TOKENS;
  else sampling.max_new_tokens = maxNew;

  if (kind === 'greedy') {
    if (rng.chance(0.2)) {
      // Explicit greedy, as clients often write it; the worker turns it into top_k = 1.
      sampling.temperature = 0;
      decode.temperature = 0;
      decode.top_k = 1;
    }
    if (rng.chance(0.15) && maxNew > 1) {
      const min = rng.int(1, maxNew);
      sampling.min_new_tokens = min;
      decode.min_new_tokens = min;
    }
    if (rng.chance(0.1)) {
      sampling.ignore_eos = true;
      decode.ignore_eos = true;
    }
    if (rng.chance(0.15) && maxNew > 2) {
      // A stop token the uninterrupted run really meets, so a stop finish straddles migrations.
      const free = runModel(prompt, { ...decode, ignore_eos: true });
      const stop = free.output_ids[rng.int(1, free.output_ids.length - 1)]!;
      sampling.stop_token_ids = [stop];
      decode.stop_token_ids = [stop];
    }
  } else if (kind === 'sampling_seed') {
    const t = Math.round((0.3 + rng.float()) * 100) / 100;
    const seed = rng.int(1, 1_000_000);
    sampling.temperature = t;
    sampling.sampling_seed = seed;
    decode.temperature = t;
    decode.sampling_seed = seed;
  } else if (kind === 'frequency_penalty' || kind === 'presence_penalty') {
    // The simulated model ignores penalties, so the reference is the plain run; what matters is
    // that the router treats the request as stateful and never continues it.
    sampling[kind] = Math.round((0.1 + rng.float()) * 100) / 100;
  }

  const returnLogprob = rng.chance(0.4);
  const topLogprobsNum = returnLogprob && rng.chance(0.5) ? rng.int(1, 3) : 0;
  // A prompt window from an earlier position: the continuation's window (which would cover the
  // replayed tokens) must never reach the client.
  const logprobStartLen = returnLogprob && rng.chance(0.3) ? rng.int(0, prompt.length - 1) : -1;
  const body: Record<string, unknown> = { input_ids: prompt, sampling_params: sampling, stream };
  if (returnLogprob) {
    body.return_logprob = true;
    if (topLogprobsNum > 0) body.top_logprobs_num = topLogprobsNum;
    if (logprobStartLen >= 0) body.logprob_start_len = logprobStartLen;
  }
  decode.top_logprobs_num = topLogprobsNum;
  const admitted = kind === 'greedy' || kind === 'bad_request';
  return { format: 'sglang', index: s.index, key: s.key, id: s.key, kind, stream, body, admitted, reason: admitted ? null : kind, prompt, decode, returnLogprob, logprobStartLen, topLogprobsNum };
}

const SGLANG_TRAFFIC: TrafficFormat = {
  special: planClientUnit,
  tag: '',
  salt: { unit: 0x7a3c5e11, request: 0, shared: 0x3b9ac9ff, prefix: 0x1e3779b1 },
  keys: { id: 'rid', prompt: 'input_ids', budget: 'max_new_tokens', min: 'min_new_tokens' },
  drawReason: (rng) => rng.weighted(NOT_ADMITTED),
  request: sglangRequest,
  sharedHeader: (rng) => rng.pick(SHARED_HEADERS),
  redecode(spec, n) {
    spec.decode.max_new_tokens = n;
    spec.decode.ignore_eos = true;
    delete spec.decode.stop_token_ids;
    delete spec.decode.min_new_tokens;
  },
};

// --- vLLM ------------------------------------------------------------------------------------

/** The simulated vLLM worker's context length (its default --max-model-len). */
export const VLLM_MAX_MODEL_LEN = 32768;

/** What the simulated vLLM worker decodes a request with (sim/vllm/model.ts decodeParams). */
export function vllmDecode(prompt: readonly number[], sp: Record<string, unknown>): DecodeParams {
  const resolved = resolveSampling(sp, prompt.length, { maxModelLen: VLLM_MAX_MODEL_LEN });
  return decodeParams(resolved, budgetOf(resolved.max_tokens, prompt.length, VLLM_MAX_MODEL_LEN));
}

/** Unit i of vLLM traffic: one request, or a group sent together (shared X-Request-Id, prefix ids). */
/** A vLLM `/inference/v1/generate` request: its body and the reference it decodes with. */
function vllmRequest(o: TrafficOptions, rng: Rng, s: Shape, stream: boolean, prompt: number[]): RequestSpec {
  const kind = s.kind;

  const sp: Record<string, unknown> = {};
  // vLLM refuses max_tokens < 1 (SamplingParams._verify_args).
  const maxTokens = rng.int(1, o.maxNewTokens);
  // Without max_tokens the server grants max_model_len − prompt: served, but not admitted.
  if (kind !== 'unresolved_budget') sp.max_tokens = maxTokens;

  if (kind === 'greedy') {
    if (rng.chance(0.2)) sp.temperature = 0;
    if (rng.chance(0.15) && maxTokens > 1) sp.min_tokens = rng.int(1, maxTokens);
    if (rng.chance(0.1)) sp.ignore_eos = true;
    if (rng.chance(0.15) && maxTokens > 2) {
      // A stop token the uninterrupted run really meets (vLLM checks it once min_tokens is reached).
      const free = vllmReference(prompt, { ...sp, ignore_eos: true }).token_ids;
      sp.stop_token_ids = [free[rng.int(1, free.length - 1)]!];
    }
  } else if (kind === 'sampling_seed') {
    sp.temperature = Math.round((0.3 + rng.float()) * 100) / 100;
    sp.seed = rng.int(1, 1_000_000);
  } else if (kind === 'frequency_penalty' || kind === 'presence_penalty') {
    // The simulated model ignores penalties; what matters is that the router never continues them.
    sp[kind] = Math.round((0.1 + rng.float()) * 100) / 100;
  } else if (kind === 'repetition_penalty') {
    sp.repetition_penalty = Math.round((1.05 + rng.float() * 0.5) * 100) / 100;
  }

  const logprobs = rng.chance(0.4) ? rng.pick(VLLM_LOGPROBS) : null;
  if (logprobs !== null) sp.logprobs = logprobs;
  // A stream's usage: none, a final usage chunk, or usage on every chunk too. `continuous_usage_stats`
  // alone asks for nothing (vLLM: continuous usage only together with include_usage).
  const usageDraw = rng.weighted({ none: 3, final: 3, continuous: 3, continuous_alone: 1 });
  const body: Record<string, unknown> = { token_ids: prompt, sampling_params: sp };
  // vLLM's default is unary: some unary clients say so, some leave it out.
  const explicitStream = rng.chance(0.5);
  if (stream || explicitStream) body.stream = stream;
  let usage: UsageMode = 'final';
  if (stream) {
    if (usageDraw === 'final') body.stream_options = { include_usage: true };
    else if (usageDraw === 'continuous') body.stream_options = { include_usage: true, continuous_usage_stats: true };
    else if (usageDraw === 'continuous_alone') body.stream_options = { continuous_usage_stats: true };
    usage = usageDraw === 'final' || usageDraw === 'continuous' ? usageDraw : 'none';
  }
  const admitted = kind === 'greedy' || kind === 'bad_request';
  return {
    format: 'vllm',
    index: s.index,
    key: s.key,
    id: s.key,
    kind,
    stream,
    body,
    admitted,
    reason: admitted ? null : kind,
    prompt,
    decode: vllmDecode(prompt, sp),
    returnLogprob: logprobs !== null,
    logprobStartLen: -1,
    topLogprobsNum: logprobs ?? 0,
    vllm: { logprobs, usage },
  };
}

const VLLM_TRAFFIC: TrafficFormat = {
  tag: 'v',
  salt: { unit: 0x2c1b3e5d, request: 0x0f1e2d3c, shared: 0x5a17c0de, prefix: 0x7e3779b1 },
  keys: { id: 'request_id', prompt: 'token_ids', budget: 'max_tokens', min: 'min_tokens' },
  drawReason: (rng) => rng.weighted(VLLM_NOT_ADMITTED),
  request: vllmRequest,
  sharedHeader: () => VLLM_SHARED_HEADER,
  sharedMember(spec, r, name, member) {
    if (r.chance(0.7)) spec.body.request_id = `${name}.body-${member}`;
  },
  redecode: (spec) => {
    spec.decode = vllmDecode(spec.prompt, spec.body.sampling_params as Record<string, unknown>);
  },
};

const TRAFFIC_FORMATS: Record<WireFormat, TrafficFormat> = { sglang: SGLANG_TRAFFIC, vllm: VLLM_TRAFFIC };
