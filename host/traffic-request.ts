// One generated /generate request body. Pure, so the mix (stream share, non-migratable share,
// sizes) is testable without a server.
import type { TrafficSettings } from './contract.ts';

export interface GeneratedRequest {
  body: {
    input_ids: number[];
    sampling_params: Record<string, number | boolean>;
    stream: boolean;
  };
  migratable: boolean;
}

const VOCAB = 32000;
const IGNORE_EOS_SHARE = 0.75;

function uniformInt(random: () => number, min: number, max: number): number {
  return min + Math.floor(random() * (max - min + 1));
}

/**
 * The same request in vLLM's token-in/token-out shape (POST /inference/v1/generate): vLLM's
 * names for the budget, the minimum and the seed; everything else is shared.
 */
export function toVllm(body: GeneratedRequest['body']): { token_ids: number[]; sampling_params: Record<string, number | boolean>; stream: boolean } {
  const sp: Record<string, number | boolean> = {};
  for (const [k, v] of Object.entries(body.sampling_params)) {
    if (k === 'max_new_tokens') sp.max_tokens = v;
    else if (k === 'min_new_tokens') sp.min_tokens = v;
    else if (k === 'sampling_seed') sp.seed = v;
    else sp[k] = v;
  }
  return { token_ids: body.input_ids, sampling_params: sp, stream: body.stream };
}

const WORDS = 'migrate token stream worker router answer exact budget replay model cluster latency prefill decode cache'.split(' ');

/**
 * The same request as an OpenAI chat completion (the OpenAI front, docs/openai.md): a user
 * message of about as many words as the prompt had ids, the same budget, temperature and seed.
 */
export function toOpenAiChat(body: GeneratedRequest['body']): Record<string, unknown> {
  const sp = body.sampling_params;
  const words = body.input_ids.map((id) => WORDS[id % WORDS.length]).join(' ');
  const out: Record<string, unknown> = {
    messages: [{ role: 'user', content: `Request: ${words}` }],
    max_tokens: sp.max_new_tokens,
    temperature: sp.temperature,
    stream: body.stream,
  };
  if (sp.ignore_eos) out.ignore_eos = true;
  if (sp.sampling_seed !== undefined) out.seed = sp.sampling_seed;
  if (sp.frequency_penalty !== undefined) out.frequency_penalty = sp.frequency_penalty;
  if (body.stream) out.stream_options = { include_usage: true };
  return out;
}

export function generateRequest(settings: TrafficSettings, random: () => number): GeneratedRequest {
  const promptLength = uniformInt(random, settings.promptMin, settings.promptMax);
  const input_ids = Array.from({ length: promptLength }, () => uniformInt(random, 1, VOCAB - 1));
  const max_new_tokens = uniformInt(random, settings.budgetMin, settings.budgetMax);
  const stream = random() < settings.streamShare;
  const migratable = !(random() < settings.nonMigratableShare);
  // Non-migratable traffic uses stateful sampling that token-only workers still accept (a text
  // prompt or stop strings would be refused with a 400 by a --skip-tokenizer-init worker).
  const sampling_params: Record<string, number | boolean> = migratable
    ? { max_new_tokens, temperature: 0 }
    : random() < 0.5
      ? { max_new_tokens, temperature: 0.7, sampling_seed: uniformInt(random, 1, 1_000_000) }
      : { max_new_tokens, temperature: 0, frequency_penalty: 0.5 };
  // Most requests run to their budget, so budget bars fill and a kill lands mid-stream; the
  // rest may stop at EOS like real traffic.
  if (random() < IGNORE_EOS_SHARE) sampling_params.ignore_eos = true;
  return { body: { input_ids, sampling_params, stream }, migratable };
}
