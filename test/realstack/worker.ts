// Start and stop the FastAPI + uvicorn test worker (sglang_worker.py) from the tests: a real
// Python process on a port of its own choosing, killed for real (SIGKILL) when a test wants a
// worker to die mid-stream. The worker needs Debian's python3-fastapi, python3-uvicorn,
// python3-httptools and python3-h11 under /usr/bin/python3; `realStack()` says whether they are
// there and, if not, which line installs them.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** Debian's interpreter (BATON_REALSTACK_PYTHON overrides it: e.g. to see the skip path). */
export const PYTHON = process.env.BATON_REALSTACK_PYTHON || '/usr/bin/python3';
export const APT_LINE = 'apt-get install -y python3-fastapi python3-uvicorn python3-httptools python3-h11';
const SCRIPT = fileURLToPath(new URL('./sglang_worker.py', import.meta.url));

export type HttpImpl = 'h11' | 'httptools';

let checked: { ok: boolean; reason: string } | null = null;

/** Whether SGLang's HTTP stack can run here (once per process). */
export function realStack(): { ok: boolean; reason: string } {
  if (checked) return checked;
  if (!existsSync(PYTHON)) {
    checked = { ok: false, reason: `no ${PYTHON}; install the stack with: ${APT_LINE}` };
    return checked;
  }
  // The python on PATH may be another interpreter (pyenv): Debian's packages live under Debian's.
  const r = spawnSync(PYTHON, ['-c', 'import fastapi, uvicorn, httptools, h11, starlette'], { encoding: 'utf8', timeout: 30_000 });
  checked = r.status === 0 ? { ok: true, reason: '' } : { ok: false, reason: `${PYTHON} cannot import SGLang's HTTP stack (${(r.stderr || String(r.error)).trim().split('\n').at(-1)}); install it with: ${APT_LINE}` };
  return checked;
}

export interface WorkerOptions {
  http: HttpImpl;
  /** Time per generated token, and for prefill (ms). */
  tokenDelayMs?: number;
  streamInterval?: number;
  incremental?: boolean;
  preferred?: Record<string, unknown>;
  contextLength?: number;
}

export interface UvicornWorker {
  url: string;
  proc: ChildProcess;
  /** Everything the worker wrote (uvicorn's tracebacks land here). */
  output: string[];
  /** SIGKILL, and wait until the process is gone. */
  kill(): Promise<void>;
  /** SIGTERM (uvicorn's graceful shutdown), SIGKILL after 3 s. */
  stop(): Promise<void>;
}

export async function startUvicornWorker(opts: WorkerOptions): Promise<UvicornWorker> {
  const args = [SCRIPT, '--http', opts.http, '--port', '0', '--token-delay-ms', String(opts.tokenDelayMs ?? 5)];
  if (opts.streamInterval) args.push('--stream-interval', String(opts.streamInterval));
  if (opts.incremental) args.push('--incremental-streaming-output');
  if (opts.preferred) args.push('--preferred-sampling-params', JSON.stringify(opts.preferred));
  if (opts.contextLength) args.push('--context-length', String(opts.contextLength));
  const proc = spawn(PYTHON, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PYTHONUNBUFFERED: '1' } });
  const output: string[] = [];
  proc.stderr!.on('data', (d: Buffer) => output.push(d.toString()));
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`uvicorn worker did not start in 30 s: ${output.join('')}`)), 30_000);
    const rl = createInterface({ input: proc.stdout! });
    rl.on('line', (line) => {
      output.push(line + '\n');
      const m = /listening on (http:\/\/\S+)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`uvicorn worker exited (${code ?? signal}) before serving: ${output.join('')}`));
    });
  });
  const gone = () => proc.exitCode !== null || proc.signalCode !== null;
  return {
    url,
    proc,
    output,
    kill: async () => {
      if (!gone()) proc.kill('SIGKILL');
      await exited;
    },
    stop: async () => {
      if (gone()) return;
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(t);
    },
  };
}
