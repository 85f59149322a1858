// The Node floor: the least a pass-through proxy on undici can do. No parsing, no retries, no
// telemetry; request and response bodies are streamed through as they come, round-robin over
// the workers. Whatever Baton costs above this is the price of what it does above this.
// Its own process: `node --import tsx bench/bare-proxy.ts --worker URL ...`; tells the bench its
// URL over IPC and exits when the bench goes away.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';

const { values } = parseArgs({ options: { port: { type: 'string', default: '0' }, worker: { type: 'string', multiple: true, default: [] } } });
const pools = values.worker.map((url) => new Pool(url, { connections: 4096, pipelining: 1, headersTimeout: 0, bodyTimeout: 0 }));
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host']);
let next = 0;

const server = createServer((req, res) => {
  const pool = pools[next++ % pools.length]!;
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && !HOP_BY_HOP.has(k)) headers[k] = v;
  pool
    .stream({ path: req.url ?? '/', method: req.method as 'POST', headers, body: req }, ({ statusCode, headers: up }) => {
      const out: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(up)) if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v;
      res.writeHead(statusCode, out);
      return res;
    })
    .catch(() => {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    });
});
server.keepAliveTimeout = 65_000;
server.listen(Number(values.port), '127.0.0.1', () => {
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  process.send?.({ type: 'listening', url });
});
process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
