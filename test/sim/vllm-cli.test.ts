// `baton sim --format vllm` as a user runs it: real processes speaking vLLM's generate API, the
// vLLM-only flags, and one-line refusals of flags that belong to the other format.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, getJson, openSse, pidAlive, postJson } from './helpers.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = 'bin/baton.js';

const spawned: ChildProcess[] = [];
afterEach(() => {
  for (const p of spawned.splice(0)) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
});

async function startSim(args: string[], count: number) {
  const proc = spawn(process.execPath, [BIN, 'sim', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  spawned.push(proc);
  let out = '';
  proc.stdout!.setEncoding('utf8').on('data', (t: string) => (out += t));
  proc.stderr!.setEncoding('utf8').on('data', (t: string) => (out += t));
  const workers = await eventually(
    () => {
      if (proc.exitCode !== null) throw new Error(`baton sim exited early:\n${out}`);
      const found = [...out.matchAll(/\(pid (\d+)\) listening on (http:\/\/127\.0\.0\.1:\d+)/g)].map((m) => ({ pid: Number(m[1]), url: m[2]! }));
      return found.length >= count ? found : undefined;
    },
    60_000,
    'worker URLs',
  );
  return { proc, workers };
}

const exited = (p: ChildProcess) => new Promise<number | null>((r) => (p.exitCode !== null ? r(p.exitCode) : p.once('exit', (code) => r(code))));

describe('baton sim --format vllm', () => {
  it('serves vLLM generate with the vLLM flags, and SIGTERM leaves nothing behind', async () => {
    const sim = await startSim(
      ['--format', 'vllm', '--workers', '2', '--port', '0', '--max-model-len', '64', '--legacy-logprobs', '--enable-prompt-tokens-details', '--model-path', 'm1'],
      2,
    );
    const url = sim.workers[1]!.url;
    const models = (await getJson(url + '/v1/models')).body as { data: { id: string; owned_by: string; max_model_len: number }[] };
    expect(models.data[0]).toMatchObject({ id: 'm1', owned_by: 'vllm', max_model_len: 64 });
    const s = await openSse(url + '/inference/v1/generate', { token_ids: [1, 2, 3], stream: true, stream_options: { include_usage: true }, sampling_params: { logprobs: 1, temperature: 0 } });
    expect((await s.ended).sawDone).toBe(true);
    const chunks = s.chunks() as { choices: { token_ids: number[]; logprobs: { content: { token: string }[] } | null }[]; usage: Record<string, unknown> | null }[];
    expect(chunks[0]!.choices[0]!.logprobs!.content[0]!.token).toMatch(/^token_id:/);
    expect(chunks.at(-1)!.usage).toMatchObject({ prompt_tokens: 3, prompt_tokens_details: { cached_tokens: 0 } });
    expect((await postJson(url + '/abort_requests', { request_ids: [] })).status).toBe(200);
    sim.proc.kill('SIGTERM');
    expect(await exited(sim.proc)).toBe(0);
    await eventually(() => (sim.workers.every((w) => !pidAlive(w.pid)) ? true : undefined), 20_000, 'workers to exit');
  }, 90_000);

  for (const bad of [
    ['--format', 'tgi'],
    ['--format', 'vllm', '--incremental'],
    ['--format', 'vllm', '--legacy-errors'],
    ['--max-model-len', '64'],
    ['--legacy-logprobs'],
    ['--format', 'vllm', '--scheduling-policy', 'lifo'],
    ['--format', 'vllm', '--max-model-len', '1'],
  ]) {
    it(`refuses ${bad.join(' ')} with one line and exit code 2`, () => {
      const r = spawnSync(process.execPath, [BIN, 'sim', ...bad], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
      expect(r.status).toBe(2);
      const lines = r.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^baton sim: /);
    }, 60_000);
  }

  it('--help lists --format and the vLLM flags', () => {
    const r = spawnSync(process.execPath, [BIN, 'sim', '--help'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(0);
    for (const flag of ['--format sglang|vllm', '--max-model-len', '--max-logprobs', '--legacy-logprobs', '--legacy-generate', '--legacy-abort', '--enable-scale-out', '--enable-prompt-tokens-details', '--scheduling-policy']) {
      expect(r.stdout).toContain(flag);
    }
  }, 60_000);

  it('one worker process: sim/worker-main.ts --format vllm', async () => {
    const proc = spawn(process.execPath, ['--import', 'tsx', 'sim/worker-main.ts', '--format', 'vllm', '--port', '0', '--page-size', '4'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    spawned.push(proc);
    let out = '';
    proc.stdout!.setEncoding('utf8').on('data', (t: string) => (out += t));
    const url = await eventually(() => /listening on (http:\/\/\S+)/.exec(out)?.[1], 60_000, 'listening');
    expect((await fetch(url + '/health')).status).toBe(200);
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'sim/worker-main.ts', '--format', 'vllm', '--text'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(2);
    expect(r.stderr.trim()).toMatch(/^baton sim worker: --text is an SGLang worker option/);
  }, 90_000);
});
