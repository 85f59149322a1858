// A pass-through HTTP proxy in front of one worker that records the trace headers of every
// generate call it forwards: what the worker itself received. When the worker dies mid-answer,
// the proxy's client connection is cut too, so the router sees the broken stream it would see.
import { Agent, createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  path: string;
  rid: string | null;
  traceparent: string | null;
  tracestate: string | null;
}

export class RecordingProxy {
  readonly received: Received[] = [];
  private server!: Server;
  private readonly agent = new Agent({ keepAlive: true });
  url = '';
  port = 0;

  constructor(private readonly upstream: string) {}

  async start(): Promise<this> {
    this.server = createServer((req, res) => this.forward(req, res));
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as AddressInfo).port;
    this.url = `http://127.0.0.1:${this.port}`;
    return this;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    this.agent.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  private forward(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.method === 'POST' && (req.url === '/generate' || req.url === '/inference/v1/generate')) {
        let rid: string | null = null;
        try {
          const j = JSON.parse(body.toString('utf8')) as { rid?: unknown; request_id?: unknown };
          rid = typeof j.rid === 'string' ? j.rid : typeof j.request_id === 'string' ? j.request_id : null;
        } catch {
          // Not JSON: recorded without a rid.
        }
        const h = (name: string) => (typeof req.headers[name] === 'string' ? (req.headers[name] as string) : null);
        this.received.push({ path: req.url, rid, traceparent: h('traceparent'), tracestate: h('tracestate') });
      }
      const headers = { ...req.headers };
      delete headers.connection;
      delete headers['keep-alive'];
      const u = new URL(this.upstream);
      const up = request({ host: u.hostname, port: u.port, method: req.method, path: req.url, headers, agent: this.agent }, (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.on('data', (c: Buffer) => res.write(c));
        upRes.on('end', () => res.end());
        upRes.on('error', () => res.destroy());
        upRes.on('close', () => {
          if (!upRes.complete) res.destroy();
        });
      });
      up.on('error', () => {
        if (res.headersSent) res.destroy();
        else res.writeHead(502, { 'content-type': 'text/plain' }).end('upstream unreachable');
      });
      up.end(body);
    });
  }
}
