// The Kubernetes API as the discovery sources use it: a GET of a collection and a watch of it,
// authenticated from a kubeconfig (KUBECONFIG, ~/.kube/config, or in-cluster: @kubernetes/client-node's
// KubeConfig.loadFromDefault).
//
// The requests themselves are made here with node:http(s) and the agent and headers the library
// builds (KubeConfig.applyToHTTPSOptions), not with its Watch class, because in 1.4.0 that class
// (dist/watch.js, Watch.watch):
//  - returns its AbortController only once the response head has come, so a watch whose server
//    accepted the connection and never answered cannot be aborted;
//  - sets a 30 s AbortSignal.timeout and overwrites it on the next line, so no timeout fires;
//  - keeps only the status code of a refused watch, dropping the Status body that names the
//    missing RBAC verb.
import http from 'node:http';
import https from 'node:https';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';

/** A failed request: the HTTP status (0: no response), the Status reason and message when the server sent one. */
export class K8sApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly reason: string | undefined,
    /** A transport error code (ECONNREFUSED, ECONNRESET, ...), when the request never got an answer. */
    readonly code: string | undefined,
  ) {
    super(message);
  }
}

export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: K8sObject;
}

export interface K8sObject {
  kind?: string;
  apiVersion?: string;
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string; labels?: Record<string, string>; annotations?: Record<string, string>; deletionTimestamp?: string; deletionGracePeriodSeconds?: number };
  [k: string]: unknown;
}

export interface K8sList {
  metadata?: { resourceVersion?: string };
  items?: K8sObject[];
}

export interface K8sClient {
  /** The API server's address, for messages. */
  readonly server: string;
  list(path: string, query: Record<string, string>, signal: AbortSignal): Promise<K8sList>;
  /**
   * Open a watch; `onEvent` gets each line's event, `onBytes` each chunk (the watchdog's sign of
   * life). Resolves when the server ends the stream, rejects on a refused watch or a broken one.
   */
  watch(path: string, query: Record<string, string>, signal: AbortSignal, onEvent: (e: WatchEvent) => void, onBytes?: () => void): Promise<void>;
}

/** A client from a kubeconfig; `kc` defaults to KubeConfig.loadFromDefault(). */
export async function clientFromKubeConfig(kc?: KubeConfig): Promise<K8sClient> {
  if (!kc) {
    // Without any of these, loadFromDefault quietly points at http://localhost:8080 and every
    // request fails with a TLS complaint: say what is missing instead.
    const home = process.env.HOME ?? process.env.USERPROFILE ?? '';
    if (!process.env.KUBECONFIG && !(home && existsSync(join(home, '.kube', 'config'))) && !process.env.KUBERNETES_SERVICE_HOST) {
      throw new Error('no kubeconfig: KUBECONFIG is unset, ~/.kube/config does not exist, and this is not a pod (KUBERNETES_SERVICE_HOST is unset)');
    }
    const { KubeConfig } = await import('@kubernetes/client-node');
    kc = new KubeConfig();
    kc.loadFromDefault();
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig: no current cluster (set KUBECONFIG, or run in a pod with a service account)');
  const server = cluster.server.replace(/\/+$/, '');
  const config = kc;
  // The library refuses plain http unless insecure-skip-tls-verify is set: check once, here.
  await config.applyToHTTPSOptions({}).catch((err: Error) => {
    throw new Error(`kubeconfig cluster ${server}: ${err.message}`);
  });
  // Options are rebuilt per request: an in-cluster or exec-plugin token rotates.
  async function open(path: string, query: Record<string, string>, signal: AbortSignal): Promise<http.IncomingMessage> {
    const opts: https.RequestOptions = {};
    await config.applyToHTTPSOptions(opts);
    const url = new URL(server + path);
    for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
    const mod = url.protocol === 'https:' ? https : http;
    return new Promise((resolve, reject) => {
      const req = mod.request(url, { ...opts, method: 'GET', headers: { ...(opts.headers ?? {}), accept: 'application/json' }, signal }, (res) => {
        if (res.statusCode === 200) return resolve(res);
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => { if (body.length < 65536) body += c; });
        res.on('end', () => reject(statusError(res.statusCode ?? 0, body)));
        res.on('error', (e) => reject(transportError(e)));
      });
      req.on('error', (e) => reject(transportError(e)));
      req.end();
    });
  }
  return {
    server,
    async list(path, query, signal) {
      const res = await open(path, query, signal);
      const text = await new Promise<string>((resolve, reject) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => { body += c; });
        res.on('end', () => resolve(body));
        res.on('error', (e) => reject(transportError(e)));
        res.on('aborted', () => reject(new K8sApiError('list: connection closed mid-body', 0, undefined, 'ECONNRESET')));
      });
      try {
        return JSON.parse(text) as K8sList;
      } catch {
        throw new K8sApiError(`list ${path}: the answer is not JSON`, 200, undefined, undefined);
      }
    },
    async watch(path, query, signal, onEvent, onBytes) {
      const res = await open(path, { ...query, watch: 'true' }, signal);
      await new Promise<void>((resolve, reject) => {
        let buf = '';
        let failed = false;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          onBytes?.();
          buf += chunk;
          for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
            const line = buf.slice(0, nl).trim();
            buf = buf.slice(nl + 1);
            if (line === '') continue;
            let ev: WatchEvent;
            try {
              ev = JSON.parse(line) as WatchEvent;
            } catch {
              failed = true;
              res.destroy();
              return reject(new K8sApiError('watch: a line that is not JSON', 200, undefined, undefined));
            }
            try {
              onEvent(ev);
            } catch (err) {
              failed = true;
              res.destroy();
              return reject(err);
            }
          }
        });
        res.on('end', () => { if (!failed) resolve(); });
        res.on('aborted', () => { if (!failed) { failed = true; reject(new K8sApiError('watch: connection reset', 0, undefined, 'ECONNRESET')); } });
        res.on('error', (e) => { if (!failed) { failed = true; reject(transportError(e)); } });
      });
    },
  };
}

function statusError(status: number, body: string): K8sApiError {
  let reason: string | undefined;
  let message = `HTTP ${status}`;
  try {
    const s = JSON.parse(body) as { reason?: string; message?: string };
    reason = s.reason;
    if (s.message) message = s.message;
  } catch {
    if (body.trim()) message = `HTTP ${status}: ${body.trim().slice(0, 200)}`;
  }
  return new K8sApiError(message, status, reason, undefined);
}

function transportError(e: Error): K8sApiError {
  if (e instanceof K8sApiError) return e;
  const code = (e as NodeJS.ErrnoException).code ?? (e.name === 'AbortError' ? 'ABORT_ERR' : undefined);
  return new K8sApiError(e.message, 0, undefined, code);
}
