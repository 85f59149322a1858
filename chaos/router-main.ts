// The router under test, in its own process: `node --expose-gc --import tsx chaos/router-main.ts`.
// Its own process so that its memory is its own (the campaign's client holds thousands of answers
// and references, which would swamp a heap measured in-process), so that gc() can be forced
// before each sample, and so that a router crash is seen as a crash instead of taking the campaign
// down with it. The configuration (with the admin token) arrives over IPC, never on the command
// line, where any user of the machine could read it.

import { startRouter, type RouterHandle } from '../router/index.ts';
import type { RouterConfig } from '../router/config.ts';

export type ToRouter =
  | { type: 'start'; config: Partial<RouterConfig> }
  | { type: 'memory'; seq: number }
  | { type: 'stop' };

export type FromRouter =
  | { type: 'listening'; url: string }
  | { type: 'error'; message: string }
  | { type: 'memory'; seq: number; heapUsed: number; rss: number; external: number; arrayBuffers: number }
  | { type: 'stopped' };

const send = (m: FromRouter) => process.send?.(m);
let router: RouterHandle | null = null;

process.on('message', (m: ToRouter) => {
  if (m.type === 'start') {
    startRouter(m.config).then(
      (r) => {
        router = r;
        send({ type: 'listening', url: r.url });
      },
      (err: Error) => send({ type: 'error', message: err.message }),
    );
  } else if (m.type === 'memory') {
    // Collect first: the question is what the router still holds, not what it has yet to free.
    (globalThis as { gc?: () => void }).gc?.();
    const u = process.memoryUsage();
    send({ type: 'memory', seq: m.seq, heapUsed: u.heapUsed, rss: u.rss, external: u.external, arrayBuffers: u.arrayBuffers });
  } else if (m.type === 'stop') {
    void (router?.close() ?? Promise.resolve()).finally(() => {
      send({ type: 'stopped' });
      process.exit(0);
    });
  }
});
// The campaign died or closed the channel: leave no router behind.
process.on('disconnect', () => process.exit(0));
