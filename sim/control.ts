// The cluster's own control API over HTTP, for a dashboard or a script that did not start the
// cluster: list workers, kill and restart them, inject faults, read their stats.
//
//   GET  /workers                  -> [{index, url, port, pid, alive}]
//   POST /workers/:i/kill          -> 200 once the process has exited
//   POST /workers/:i/restart       -> 200 once it listens again (same port)
//   POST /workers/:i/fault  {kind, after_tokens?, interval_ms?}
//   GET  /workers/:i/stats         -> the worker's /_sim/stats
//   POST /workers/:i/cache_match {input_ids} -> {cached_tokens}: how much of the prefix the
//                                   worker's cache holds now (an oracle's view; LRU untouched)

import { createServer, type Server } from 'node:http';
import type { SimCluster } from './cluster.ts';
import { parseFault } from './faults.ts';

export interface ControlServer {
  url: string;
  close(): Promise<void>;
}

export async function startControlServer(cluster: SimCluster, port: number, host = '127.0.0.1'): Promise<ControlServer> {
  const server: Server = createServer((req, res) => {
    const reply = (status: number, body: unknown) => {
      const text = JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
    };
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0]!;
      const run = async (): Promise<unknown> => {
        if (path === '/workers' && req.method === 'GET') return cluster.workers();
        const m = /^\/workers\/(\d+)\/(kill|restart|fault|stats|cache_match)$/.exec(path);
        if (!m) throw Object.assign(new Error('Not Found'), { status: 404 });
        const i = Number(m[1]);
        const action = m[2]!;
        if (action === 'stats' && req.method === 'GET') return cluster.stats(i);
        if (req.method !== 'POST') throw Object.assign(new Error('Method Not Allowed'), { status: 405 });
        if (action === 'cache_match') {
          const ids = (JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as { input_ids?: unknown }).input_ids;
          if (!Array.isArray(ids) || !ids.every((t) => Number.isInteger(t))) throw new Error('input_ids must be a list of integers');
          return { cached_tokens: await cluster.cacheMatch(i, ids as number[]) };
        }
        if (action === 'kill') await cluster.kill(i);
        else if (action === 'restart') await cluster.restart(i);
        else await cluster.fault(i, parseFault(JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}')));
        return cluster.workers()[i];
      };
      run().then(
        (body) => reply(200, body),
        (err: Error & { status?: number }) => reply(err.status ?? 400, { error: { message: err.message } }),
      );
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address();
  const actual = typeof addr === 'object' && addr ? addr.port : port;
  return {
    url: `http://${host}:${actual}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
