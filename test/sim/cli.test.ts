// `baton sim` as a user runs it: a real process tree, real signals.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, openSse, pidAlive } from './helpers.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = 'bin/baton.js';

interface Running {
  proc: ChildProcess;
  workers: { pid: number; url: string }[];
  output: () => string;
}

const spawned: ChildProcess[] = [];
afterEach(() => {
  for (const p of spawned.splice(0)) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
});

async function startSim(args: string[]): Promise<Running> {
  const proc = spawn(process.execPath, [BIN, 'sim', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  spawned.push(proc);
  let out = '';
  proc.stdout!.setEncoding('utf8').on('data', (t: string) => (out += t));
  proc.stderr!.setEncoding('utf8').on('data', (t: string) => (out += t));
  const count = Number(args[args.indexOf('--workers') + 1]);
  const workers = await eventually(
    () => {
      if (proc.exitCode !== null) throw new Error(`baton sim exited early:\n${out}`);
      const found = [...out.matchAll(/\(pid (\d+)\) listening on (http:\/\/127\.0\.0\.1:\d+)/g)].map((m) => ({ pid: Number(m[1]), url: m[2]! }));
      return found.length >= count ? found : undefined;
    },
    60_000,
    'worker URLs',
  );
  return { proc, workers, output: () => out };
}

const exited = (p: ChildProcess) => new Promise<number | null>((r) => (p.exitCode !== null ? r(p.exitCode) : p.once('exit', (code) => r(code))));

describe('baton sim', () => {
  it('prints one URL per worker, serves SGLang streams, and leaves nothing behind on SIGTERM', async () => {
    const sim = await startSim(['--workers', '2', '--port', '0']);
    expect(sim.workers).toHaveLength(2);
    expect(sim.output().split('\n').filter((l) => l.includes('listening on http://127.0.0.1:'))).toHaveLength(2);
    // At the default pace (as fast as possible) it says how to make streams watchable.
    await eventually(() => (sim.output().includes('hint: ') && sim.output().includes('--token-interval-ms') ? true : undefined), 10_000, 'the pace hint');
    const s = await openSse(`${sim.workers[0]!.url}/generate`, { input_ids: [1, 2, 3], stream: true, sampling_params: { max_new_tokens: 8 } });
    expect((await s.ended).sawDone).toBe(true);
    expect(s.frames.at(-1)!.data).toBe('[DONE]');
    sim.proc.kill('SIGTERM');
    expect(await exited(sim.proc)).toBe(0);
    await eventually(() => (sim.workers.every((w) => !pidAlive(w.pid)) ? true : undefined), 20_000, 'workers to exit');
  }, 90_000);

  it('leaves no orphan when the manager itself is killed with SIGKILL', async () => {
    const sim = await startSim(['--workers', '2', '--port', '0']);
    sim.proc.kill('SIGKILL');
    await exited(sim.proc);
    await eventually(() => (sim.workers.every((w) => !pidAlive(w.pid)) ? true : undefined), 20_000, 'orphaned workers to exit');
  }, 90_000);

  it('a killed worker breaks its open streams while the manager keeps running', async () => {
    const sim = await startSim(['--workers', '1', '--port', '0', '--token-interval-ms', '10']);
    const s = await openSse(`${sim.workers[0]!.url}/generate`, { input_ids: [1, 2, 3], stream: true, sampling_params: { max_new_tokens: 20_000, ignore_eos: true } });
    await s.waitFrames(3);
    expect(sim.output()).not.toContain('hint: ');
    process.kill(sim.workers[0]!.pid, 'SIGKILL');
    expect((await s.ended).sawDone).toBe(false);
    await eventually(() => (sim.output().includes('exited (SIGKILL)') ? true : undefined), 20_000, 'the exit report');
    expect(sim.proc.exitCode).toBeNull();
    sim.proc.kill('SIGINT');
    expect(await exited(sim.proc)).toBe(0);
  }, 90_000);

  it('--prefill 1 --decode 1: a P/D pair, each line naming its role and the prefill its bootstrap port', async () => {
    const proc = spawn(process.execPath, [BIN, 'sim', '--prefill', '1', '--decode', '1', '--port', '0'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    spawned.push(proc);
    let out = '';
    proc.stdout!.setEncoding('utf8').on('data', (t: string) => (out += t));
    const lines = await eventually(() => {
      const ls = out.split('\n').filter((l) => l.includes('listening on'));
      return ls.length >= 2 ? ls : undefined;
    }, 60_000, 'two workers');
    expect(lines[0]).toMatch(/^worker 0 \(pid \d+\) listening on http:\/\/127\.0\.0\.1:\d+ \(prefill, bootstrap port \d+\)$/);
    expect(lines[1]).toMatch(/^worker 1 \(pid \d+\) listening on http:\/\/127\.0\.0\.1:\d+ \(decode\)$/);
    const port = Number(/bootstrap port (\d+)/.exec(lines[0]!)![1]);
    expect(await (await fetch(`http://127.0.0.1:${port}/health`)).text()).toBe('OK');
    proc.kill('SIGTERM');
    expect(await exited(proc)).toBe(0);
  }, 90_000);

  for (const bad of [['--bogus'], ['--workers', '0'], ['--workers', 'two'], ['--port', '-1'], ['--page-size', '0'], ['--weight-version', ''], ['--disaggregation-mode', 'both'], ['--prefill', '1', '--workers', '2'], ['--prefill', '0'], ['--decode', '1', '--format', 'vllm']]) {
    it(`refuses ${bad.join(' ')} with one line and exit code 2`, () => {
      const r = spawnSync(process.execPath, [BIN, 'sim', ...bad], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
      expect(r.status).toBe(2);
      const lines = r.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^baton sim: /);
    }, 60_000);
  }

  it('--help prints the options', () => {
    const r = spawnSync(process.execPath, [BIN, 'sim', '--help'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('--workers N');
    expect(r.stdout).toContain('--token-interval-ms');
    for (const flag of ['--legacy-errors', '--enable-custom-logit-processor', '--enable-return-hidden-states', '--page-size', '--model-path', '--weight-version']) {
      expect(r.stdout).toContain(flag);
    }
  }, 60_000);
});
