// The four things a workload is run against, each (but direct) its own process on loopback: the
// bench only sends them HTTP and reads their CPU and memory from /proc.
import { mkdtempSync, mkdirSync, writeFileSync, chmodSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nginxConfig } from './nginx.ts';
import { BATON_BIN, BENCH_DIR, waitForLine, waitForMessage, waitForPort, type Proc, type ProcessGroup } from './processes.ts';

export type TargetName = 'direct' | 'bare' | 'nginx' | 'baton';

export const TARGET_LABELS: Record<TargetName, string> = {
  direct: 'direct',
  bare: 'bare Node proxy',
  nginx: 'nginx',
  baton: 'Baton',
};

export interface Target {
  name: TargetName;
  /** Where the load goes: the workers themselves (direct) or the proxy. */
  urls: string[];
  /** The proxy's process (nginx: its master; the workers are its children); null for direct. */
  proc: Proc | null;
  stop(): Promise<void>;
}

export function direct(workers: string[]): Target {
  return { name: 'direct', urls: workers, proc: null, stop: async () => undefined };
}

/** Both Node proxies carry the probe, and --expose-gc so it can measure memory after a full GC (only when asked). */
const PROBE = { preload: [join(BENCH_DIR, 'proxy-probe.ts')], nodeFlags: ['--expose-gc'] };

export async function startBare(group: ProcessGroup, workers: string[]): Promise<Target> {
  const proc = group.spawnNode('bare proxy', join(BENCH_DIR, 'bare-proxy.ts'), workers.flatMap((w) => ['--worker', w]), PROBE);
  const url = await waitForMessage(proc, (m) => (m as { type?: string; url?: string })?.type === 'listening' ? (m as { url: string }).url : undefined);
  return { name: 'bare', urls: [url], proc, stop: () => group.stop(proc) };
}

export async function startBaton(group: ProcessGroup, workers: string[], opts: { flags?: string[]; env?: NodeJS.ProcessEnv } = {}): Promise<Target> {
  const args = ['router', '--port', '0', ...workers.flatMap((w) => ['--worker', w]), ...(opts.flags ?? [])];
  const proc = group.spawnNode('baton router', BATON_BIN, args, { ...PROBE, env: opts.env, stdout: true });
  const url = await waitForLine(proc, (line) => /listening on (http:\/\/\S+)/.exec(line)?.[1]);
  return { name: 'baton', urls: [url], proc, stop: () => group.stop(proc) };
}

export async function startNginx(group: ProcessGroup, nginxPath: string, workers: string[], connections: number): Promise<Target> {
  const dir = mkdtempSync(join(tmpdir(), 'baton-bench-nginx-'));
  // The master may run as root and its workers as nobody: they must reach the temp paths.
  chmodSync(dir, 0o755);
  for (const d of ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, d), { mode: 0o777 });
  const port = await freePort();
  const conf = join(dir, 'nginx.conf');
  writeFileSync(conf, nginxConfig({ dir, port, upstreams: workers, workerConnections: connections }));
  const proc = group.spawn('nginx', nginxPath, ['-p', dir, '-c', conf, '-e', join(dir, 'error.log')]);
  try {
    await waitForPort(port, proc);
  } catch (err) {
    await group.stop(proc);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    name: 'nginx',
    urls: [`http://127.0.0.1:${port}`],
    proc,
    stop: async () => {
      // SIGTERM is nginx's fast shutdown (SIGQUIT would wait for open streams).
      await group.stop(proc);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A port free right now (nginx cannot listen on port 0 and tell us which it got). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}
