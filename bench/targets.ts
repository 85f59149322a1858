// The four things a workload is run against, each (but direct) its own process on loopback: the
// bench only sends them HTTP and reads their CPU and memory from /proc.
import { mkdtempSync, mkdirSync, writeFileSync, chmodSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nginxConfig } from './nginx.ts';
import { BATON_BIN, BENCH_DIR, waitForLine, waitForMessage, waitForPort, type Proc, type ProcessGroup } from './processes.ts';

/**
 * The cost of tracing, in W1 and W2: two more Baton processes, `baton_otel` exporting
 * OpenTelemetry traces and `baton_otel_off` not, started and warmed alike; each round they take
 * one run's load together, every other request each (a paired run).
 */
export type TargetName = 'direct' | 'bare' | 'nginx' | 'baton' | 'baton_otel' | 'baton_otel_off' | BatonRefName;

/**
 * Baton built from another commit (`--compare-ref`, bench/ref-build.ts): `baton@<short sha>`, a
 * second Baton target in the SGLang rounds of W1 and W2, so that two builds' ratios come from the
 * same run against the same bare proxy and nginx.
 */
export type BatonRefName = `baton@${string}`;

export function isBatonRef(t: TargetName): t is BatonRefName {
  return t.startsWith('baton@');
}

/**
 * A target's tag in its request ids: its name, but for another Baton build `b` + 4 hex, as long
 * as `baton` and of the characters a request id keeps unescaped (router/migration/rid.ts), so
 * that both builds route ids of the same length and shape.
 */
export function ridTag(t: TargetName): string {
  return isBatonRef(t) ? `b${t.slice('baton@'.length, 'baton@'.length + 4)}` : t;
}

/**
 * A round's order with the Baton builds (this checkout's and `--compare-ref`'s) in their places
 * but, every other round, in reverse order among themselves: no build always runs right after
 * another.
 */
export function alternateBuilds<T extends { name: TargetName }>(order: T[], round: number): T[] {
  if (round % 2 === 1) return order;
  const isBuild = (t: T) => t.name === 'baton' || isBatonRef(t.name);
  const builds = order.filter(isBuild).reverse();
  let k = 0;
  return order.map((t) => (isBuild(t) ? builds[k++]! : t));
}

/** How a target is named in the tables: TARGET_LABELS, and `Baton@<sha>` for another build. */
export function targetLabel(t: TargetName): string {
  return isBatonRef(t) ? `Baton@${t.slice('baton@'.length)}` : TARGET_LABELS[t];
}

export const TARGET_LABELS: Record<Exclude<TargetName, BatonRefName>, string> = {
  direct: 'direct',
  bare: 'bare Node proxy',
  nginx: 'nginx',
  baton: 'Baton',
  baton_otel: 'Baton, OTLP on (paired)',
  baton_otel_off: 'Baton, OTLP off (paired)',
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

/** `nodeFlags`: Node flags of its own (bench/pair.ts --bare-node-flag). */
export async function startBare(group: ProcessGroup, workers: string[], nodeFlags: string[] = []): Promise<Target> {
  const proc = group.spawnNode('bare proxy', join(BENCH_DIR, 'bare-proxy.ts'), workers.flatMap((w) => ['--worker', w]), { ...PROBE, nodeFlags: [...PROBE.nodeFlags, ...nodeFlags] });
  const url = await waitForMessage(proc, (m) => (m as { type?: string; url?: string })?.type === 'listening' ? (m as { url: string }).url : undefined);
  return { name: 'bare', urls: [url], proc, stop: () => group.stop(proc) };
}

/** `bin`: another build's bin/baton.js (`--compare-ref`); this checkout's by default. */
export async function startBaton(group: ProcessGroup, workers: string[], opts: { flags?: string[]; env?: NodeJS.ProcessEnv; bin?: string; nodeFlags?: string[] } = {}): Promise<Target> {
  // The router's cost beside a bare proxy is measured with least_inflight, so that it does not
  // move with the default policy (cache_aware); cache_aware's own cost is bench/cache.ts's table.
  const policy = opts.flags?.includes('--policy') ? [] : ['--policy', 'least_inflight'];
  const args = ['router', '--port', '0', ...workers.flatMap((w) => ['--worker', w]), ...policy, ...(opts.flags ?? [])];
  const proc = group.spawnNode('baton router', opts.bin ?? BATON_BIN, args, { ...PROBE, nodeFlags: [...PROBE.nodeFlags, ...(opts.nodeFlags ?? [])], env: opts.env, stdout: true });
  const url = await waitForLine(proc, (line) => /listening on (http:\/\/\S+)/.exec(line)?.[1]);
  return { name: 'baton', urls: [url], proc, stop: () => group.stop(proc) };
}

/**
 * Baton with OTLP export on (every request sampled, the SDK's default batching) to `otlp`, a
 * receiver on loopback that decodes what it gets (bench/otlp-receiver.ts).
 */
export async function startBatonOtel(group: ProcessGroup, workers: string[], otlp: string): Promise<Target> {
  const env = { OTEL_SDK_DISABLED: 'false', OTEL_TRACES_EXPORTER: 'otlp', OTEL_TRACES_SAMPLER: 'parentbased_always_on', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' };
  const t = await startBaton(group, workers, { flags: ['--otlp-endpoint', otlp], env });
  return { ...t, name: 'baton_otel' };
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
