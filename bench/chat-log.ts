// The chat answer log's row of `npm run bench` (`--only chat-log`): what keeping a chat request's
// answer for the dashboard (router/core/chat-view.ts ChatAnswerLog, fed by the OpenAI session
// with every chunk's reasoning, content and tool-call deltas) costs per chunk, against the frame
// the client gets for that chunk in the same run (router/fronts/openai/session.ts TextChunk, the
// fixed frame around most chunks' text). In process, no workers: the same scripted answer (a
// thought, text, a tool call whose arguments stream in pieces) fed to both, alternating which
// goes first, median of the rounds. Target: the log at most half the frame's cost.
import { ChatAnswerLog, type ChatView } from '../router/core/chat-view.ts';
import { TextChunk } from '../router/fronts/openai/session.ts';

export interface ChatLogBenchOptions {
  quick: boolean;
  say(line: string): void;
}

export interface ChatLogBenchResult {
  /** ns per chunk, median over rounds. */
  frameNs: number;
  logNs: number;
  ratio: number;
  rounds: number;
  chunksPerAnswer: number;
}

export const CHAT_LOG_TARGET = 0.5;

/** One answer's chunks as the session hands them to the log: [reasoning, content, call delta]. */
interface Piece { reasoning: string; content: string; call: { index: number; name: string | null; arguments: string } | null }

function script(): Piece[] {
  const out: Piece[] = [];
  const words = 'The user asks for the weather in Paris over the next days so I will call the weather tool with the city and the unit'.split(' ');
  for (const w of words) out.push({ reasoning: ` ${w}`, content: '', call: null });
  for (let i = 0; i < 3; i++) for (const w of words) out.push({ reasoning: '', content: ` ${w}`, call: null });
  out.push({ reasoning: '', content: '', call: { index: 0, name: 'get_weather', arguments: '' } });
  for (const a of ['{"city"', ': "Par', 'is", "', 'days": ', '3, "un', 'it": "c', 'elsius"', '}']) out.push({ reasoning: '', content: '', call: { index: 0, name: null, arguments: a } });
  return out;
}

const REQUEST: ChatView = {
  messages: [{ role: 'user', content: 'What is the weather in Paris for the next days?' }],
  messages_omitted: 0,
  tools: [{ name: 'get_weather', description: 'The weather in a city', parameters: '{"type":"object"}' }],
  tools_omitted: 0,
  tool_choice: 'auto',
  answer: { reasoning: '', content: '', tool_calls: [], finish_reason: null },
  clipped: false,
};

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** The chunks' frames, as the client gets them (one TextChunk per answer, as the session keeps one). */
function frames(pieces: readonly Piece[], answers: number): number {
  let bytes = 0;
  const head = { id: 'chatcmpl-0123456789abcdef', object: 'chat.completion.chunk', created: 1_796_000_000, model: 'sim/model' };
  for (let n = 0; n < answers; n++) {
    const text = new TextChunk(head, 'chat', true);
    const thought = new TextChunk(head, 'chat', true, 0, ['reasoning_content']);
    for (const p of pieces) bytes += (p.reasoning ? thought.json(p.reasoning) : text.json(p.content || (p.call?.arguments ?? ''))).length;
  }
  return bytes;
}

/** The same chunks into a log per answer, and the view the outputs ring keeps at its end. */
function logs(pieces: readonly Piece[], answers: number): number {
  let kept = 0;
  for (let n = 0; n < answers; n++) {
    const log = new ChatAnswerLog();
    for (const p of pieces) {
      log.addReasoning(p.reasoning);
      log.addContent(p.content);
      if (p.call) log.callDelta(p.call.index, p.call.name, p.call.arguments);
    }
    log.setFinish('tool_calls');
    kept += log.view(REQUEST).answer.content.length;
  }
  return kept;
}

function timeNs(f: () => number, chunks: number): { ns: number; sink: number } {
  const t0 = process.hrtime.bigint();
  const sink = f();
  return { ns: Number(process.hrtime.bigint() - t0) / chunks, sink };
}

export function runChatLogBench(o: ChatLogBenchOptions): ChatLogBenchResult {
  const pieces = script();
  const answers = o.quick ? 2000 : 5000;
  const rounds = o.quick ? 9 : 21;
  const chunks = pieces.length * answers;
  let sink = 0;
  // Warm-up: both paths optimized before any round counts.
  for (let i = 0; i < 3; i++) sink += frames(pieces, answers) + logs(pieces, answers);
  const frame: number[] = [];
  const log: number[] = [];
  for (let r = 0; r < rounds; r++) {
    // Alternate which goes first, so a box that gets busier midway shifts both alike.
    const order = r % 2 === 0 ? ['frame', 'log'] as const : ['log', 'frame'] as const;
    for (const which of order) {
      const m = which === 'frame' ? timeNs(() => frames(pieces, answers), chunks) : timeNs(() => logs(pieces, answers), chunks);
      sink += m.sink;
      (which === 'frame' ? frame : log).push(m.ns);
    }
  }
  const frameNs = median(frame);
  const logNs = median(log);
  const ratio = logNs / frameNs;
  o.say(`chat answer log per chunk: ${logNs.toFixed(0)} ns, the chunk's frame ${frameNs.toFixed(0)} ns (${ratio.toFixed(2)}x; ${sink > 0 ? 'ok' : 'nothing kept'})`);
  return { frameNs, logNs, ratio, rounds, chunksPerAnswer: pieces.length };
}

export function chatLogVerdicts(r: ChatLogBenchResult): string[] {
  return [`verdict: ${r.ratio <= CHAT_LOG_TARGET ? 'met   ' : 'MISSED'}  ${'OpenAI'.padEnd(9)} chat answer log per chunk vs the chunk's frame: ${r.ratio.toFixed(2)}x (target <= ${CHAT_LOG_TARGET}x)`];
}

export function chatLogTable(r: ChatLogBenchResult): string {
  return [
    '### OpenAI front: the chat answer log per chunk',
    '',
    `One scripted answer of ${r.chunksPerAnswer} chunks (a thought, text, a streamed tool call), in process, median of ${r.rounds} alternating rounds.`,
    '',
    '| per chunk | ns | vs the frame |',
    '|---|---:|---:|',
    `| the chunk's frame (\`TextChunk.json\`) | ${r.frameNs.toFixed(0)} | 1.00x |`,
    `| the chat answer log (\`ChatAnswerLog\`, and its view at the end) | ${r.logNs.toFixed(0)} | ${r.ratio.toFixed(2)}x |`,
  ].join('\n');
}
