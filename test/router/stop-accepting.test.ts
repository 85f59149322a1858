// A replica retiring in a reload stops accepting but lets its open connections finish
// (router/http/server.ts stopAccepting; docs/replicas.md, "Reload"): a new connection is refused,
// a response in flight completes, a request that still arrives on a kept-alive connection is
// served and answered `Connection: close`, and the call resolves once the last connection ends.
import { afterEach, describe, expect, it } from 'vitest';
import { Agent, createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { stopAccepting } from '../../router/http/server.ts';

let server: Server | null = null;
afterEach(() => {
  server?.closeAllConnections();
  server?.close();
  server = null;
});

function get(port: number, path: string, agent: Agent | false): Promise<{ status: number; connection: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path, agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }));
    }).on('error', reject).end();
  });
}

describe('stopAccepting', () => {
  it('refuses new connections, serves the open ones to the end, and resolves when they are gone', async () => {
    let release!: () => void;
    const slowGate = new Promise<void>((resolve) => (release = resolve));
    let arrived!: () => void;
    const slowArrived = new Promise<void>((resolve) => (arrived = resolve));
    server = createServer((req, res) => {
      if (req.url === '/slow') {
        arrived();
        void slowGate.then(() => res.end('slow done'));
      } else res.end('ok');
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', () => resolve()));
    const port = (server.address() as AddressInfo).port;
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      // A kept-alive connection, idle now; and a slow response in flight on another.
      expect(await get(port, '/', agent)).toMatchObject({ status: 200, connection: 'keep-alive' });
      const slow = get(port, '/slow', false);
      await slowArrived;

      let ended = false;
      const left = stopAccepting(server).then(() => (ended = true));
      await expect(get(port, '/', false)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      // The idle kept-alive connection was not closed under the client: its next request is served.
      expect(await get(port, '/', agent)).toEqual({ status: 200, connection: 'close', body: 'ok' });
      expect(ended).toBe(false);
      release();
      expect(await slow).toMatchObject({ status: 200, body: 'slow done' });
      await left;
      expect(ended).toBe(true);
    } finally {
      agent.destroy();
    }
  });
});
