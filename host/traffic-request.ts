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
  const agent = agentTurn(body.input_ids);
  if (agent !== null) return agentChat(body, agent);
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

/** Of the demo's chat requests, the share that are an agent's (with tools), in tenths. */
export const AGENT_TENTHS = 3;
const CITIES = ['Paris', 'Tokyo', 'Lima', 'Oslo', 'Nairobi', 'Quito'];

/** The get_weather tool the demo's agent requests offer (the simulated model calls it: host/sim-chat-script.json). */
export const WEATHER_TOOL = {
  type: 'function',
  function: {
    name: 'get_weather',
    // Not "weather in …": the script's rule matches the first such phrase of the prompt, tools included.
    description: 'The current weather for a city.',
    parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['city'] },
  },
};

/**
 * Whether a generated request goes out as an agent's turn, decided by its prompt ids (so a test
 * can pick one): `ask`, a question the model answers with a thought and a tool call; `answer`,
 * the turn after (the call and the tool's result sent back), answered with a thought and text.
 */
export function agentTurn(ids: readonly number[]): 'ask' | 'answer' | null {
  if (ids.length === 0 || ids[0]! % 10 < 10 - AGENT_TENTHS) return null;
  return (ids[1] ?? 0) % 2 === 0 ? 'ask' : 'answer';
}

/**
 * An agent's chat request: tools offered, and the simulated model's scripted answer (a thought,
 * then a call or the answer). Its budget leaves room for the whole script, and it stops at EOS:
 * cut short, a call would not parse.
 */
function agentChat(body: GeneratedRequest['body'], turn: 'ask' | 'answer'): Record<string, unknown> {
  const ids = body.input_ids;
  const city = CITIES[(ids[2] ?? 0) % CITIES.length]!;
  const ask = { role: 'user', content: `What is the weather in ${city}?` };
  const messages: Record<string, unknown>[] = turn === 'ask' ? [ask] : [
    ask,
    { role: 'assistant', content: null, tool_calls: [{ id: `call_${ids[3] ?? 0}`, type: 'function', function: { name: 'get_weather', arguments: JSON.stringify({ city, unit: 'celsius' }) } }] },
    { role: 'tool', tool_call_id: `call_${ids[3] ?? 0}`, content: `${10 + ((ids[4] ?? 0) % 20)} degrees and ${(ids[5] ?? 0) % 2 === 0 ? 'sunny' : 'raining'} in ${city}` },
  ];
  const out: Record<string, unknown> = {
    messages,
    tools: [WEATHER_TOOL],
    max_tokens: Math.max(Number(body.sampling_params.max_new_tokens), 200),
    temperature: 0,
    stream: body.stream,
  };
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
