// One replica: a full router (router/index.ts startRouter) on the shared port and on its own
// loopback port, with a line to the primary over IPC (identity.ts ReplicaLink). It drains on
// SIGTERM as a lone router does, and exits when the primary is gone (the IPC channel closes).
import { startRouter, type RouterHandle } from '../index.ts';
import { ConfigError } from '../config-error.ts';
import type { ReplicaLink, ReplicaList, ReplicaSync } from './identity.ts';
import type { FromPrimary, FromReplica, ReplicaSpec } from './ipc.ts';
import type { ReplicaOutcome, WorkerWrite } from '../http/worker-writes.ts';
import { surviveClosedLogPipe } from '../log-pipe.ts';

const ASK_TIMEOUT_MS = 5_000;
/** A worker write's answer from the primary: it waits up to 3 s for each replica (share.ts). */
const WRITE_TIMEOUT_MS = 10_000;

// A replica writes to the primary's stdout and stderr: the same pipe, lost the same way.
surviveClosedLogPipe();

const spec = JSON.parse(process.env.BATON_REPLICA_SPEC ?? 'null') as ReplicaSpec | null;
if (!spec || typeof process.send !== 'function') throw new Error('a replica is started by the primary of `baton router --replicas N`');

const send = (m: FromReplica) => void process.send!(m);
let metricsJson: (() => Promise<unknown[]>) | null = null;
let n = 0;
const asked = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();

function ask(what: 'replicas' | 'metrics'): Promise<unknown> {
  const k = ++n;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      asked.delete(k);
      reject(new Error(`no answer within ${ASK_TIMEOUT_MS} ms`));
    }, ASK_TIMEOUT_MS);
    asked.set(k, {
      resolve: (v) => { clearTimeout(timer); resolve(v); },
      reject: (e) => { clearTimeout(timer); reject(e); },
    });
    send({ t: 'ask', n: k, what });
  });
}

/**
 * The other replicas' worker writes, applied one at a time in the order the primary sent them
 * (an add is awaited: its probe): first the ones made before this process synced, then each new
 * one as it comes.
 */
let sync: ReplicaSync | null = null;
let synced: (() => void) | null = null;
let applying: Promise<void> = Promise.resolve();
function applyInTurn(s: ReplicaSync, m: Extract<FromPrimary, { t: 'writes' | 'apply' }>): void {
  applying = applying.then(async () => {
    if (m.t === 'apply') {
      const error = await s.apply(m.op).catch((err: Error) => err.message);
      send({ t: 'applied', n: m.n, error });
      return;
    }
    for (const op of m.ops) {
      const error = await s.apply(op).catch((err: Error) => err.message);
      if (error !== null) console.error(`replica ${spec!.identity.index}: a worker write made before it started did not apply (${op.op} ${'url' in op ? op.url : ''}): ${error}`);
    }
    synced?.();
  });
}
const writeAnswers = new Map<number, { resolve(v: ReplicaOutcome[]): void; reject(e: Error): void }>();

process.on('message', (m: FromPrimary) => {
  if (m.t === 'prefixes') {
    sync?.learnPrefixes(m.batch);
  } else if (m.t === 'writes' || m.t === 'apply') {
    if (sync) applyInTurn(sync, m);
  } else if (m.t === 'written') {
    writeAnswers.get(m.n)?.resolve(m.outcomes);
  } else if (m.t === 'answer') {
    const a = asked.get(m.n);
    asked.delete(m.n);
    if (m.error !== undefined) a?.reject(new Error(m.error));
    else a?.resolve(m.body);
  } else if (m.t === 'collect' && metricsJson) {
    void metricsJson().then((metrics) => send({ t: 'metrics', n: m.n, metrics }));
  } else if (m.t === 'retire') {
    void retire();
  } else if (m.t === 'own-port') {
    const listen = m.listen;
    void Promise.resolve(router?.ownPort!(listen)).then(
      () => send({ t: 'own-port', listening: listen }),
      (err: Error) => send({ t: 'own-port', listening: !listen, error: err.message }),
    );
  }
});

const link: ReplicaLink = {
  identity: spec.identity,
  ownPort: spec.ownPort,
  reusePort: spec.reusePort,
  list: async () => (await ask('replicas')) as ReplicaList,
  aggregatedMetrics: async () => (await ask('metrics')) as string,
  up: (url, ownUrl, startedAt, metrics) => {
    metricsJson = metrics;
    send({ t: 'up', url, ownUrl, startedAt, pid: process.pid });
  },
  attach: async (s) => {
    sync = s;
    let timer: NodeJS.Timeout | undefined;
    const done = new Promise<boolean>((resolve) => {
      synced = () => resolve(true);
      timer = setTimeout(() => resolve(false), ASK_TIMEOUT_MS);
    });
    send({ t: 'sync' });
    // A reload runs new replica code under the primary as it started: an older primary does not
    // answer `sync`, and the replica serves without the writes made before it.
    if (!(await done)) console.error(`replica ${spec.identity.index}: the primary did not answer within ${ASK_TIMEOUT_MS} ms with the worker writes made on the shared port; serving without them`);
    clearTimeout(timer);
  },
  write: (op: WorkerWrite) => {
    const k = ++n;
    return new Promise<ReplicaOutcome[]>((resolve, reject) => {
      const timer = setTimeout(() => done(() => reject(new Error(`no answer within ${WRITE_TIMEOUT_MS} ms`))), WRITE_TIMEOUT_MS);
      const done = (f: () => void) => {
        clearTimeout(timer);
        writeAnswers.delete(k);
        f();
      };
      writeAnswers.set(k, { resolve: (v) => done(() => resolve(v)), reject: (e) => done(() => reject(e)) });
      send({ t: 'write', n: k, op });
    });
  },
  sharePrefixes: (batch, written) => {
    // Queued even when send() answers false (a backlog): the channel writes it, then `written`.
    try {
      process.send!({ t: 'prefixes', batch } satisfies FromReplica, () => written());
    } catch {
      // the channel has closed: the replica is ending
    }
  },
};

let router: RouterHandle | null = null;
let ending = false;
async function end(how: 'drain' | 'close'): Promise<void> {
  if (ending) return;
  ending = true;
  if (router) await (how === 'drain' ? router.shutdown!() : router.close()).catch(() => undefined);
  process.exit(0);
}
process.on('SIGTERM', () => void end('drain'));

/**
 * A reload has replaced this replica (reload.ts `replace`): leave the shared port first, unlike
 * SIGTERM's drain, which keeps accepting (a pod's Service still sends connections for a while).
 * Here the new replica is listening already, and what waits in the accept queue is its to take.
 * Then the connections end (their requests finish, idle keep-alive ones time out), up to the
 * grace period; then a drain as on SIGTERM for what is left (the own port).
 */
async function retire(): Promise<void> {
  if (ending || !router) return;
  ending = true;
  const grace = spec!.config.shutdownGraceMs;
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([router.stopAccepting!(), new Promise<void>((resolve) => (timer = setTimeout(resolve, grace)))]);
  clearTimeout(timer);
  await router.shutdown!(Math.max(0, grace - (Date.now() - started))).catch(() => undefined);
  process.exit(0);
}
process.on('SIGINT', () => void end('close'));
// The primary is gone (killed, or exited): nothing would restart or aggregate; end too.
process.on('disconnect', () => void end('close'));

try {
  router = await startRouter(spec.config, { replica: link });
} catch (err) {
  const e = err as NodeJS.ErrnoException;
  const usage = err instanceof ConfigError || e.code === 'EADDRINUSE' || /^(invalid )?worker URL/.test(e.message ?? '');
  const message = e.code === 'EADDRINUSE' ? `port ${spec.config.port} on ${spec.config.host} is already in use` : e.message;
  process.send({ t: 'fatal', message, usage } satisfies FromReplica, () => process.exit(1));
}
