// The SO_REUSEPORT spawner (Node >= 22.12 and 23.1+, where `net.Server.listen` takes `reusePort`):
// independent processes, each binding the port with SO_REUSEPORT, so that the kernel spreads
// connections and no connection passes through the primary. A reload's new process binds the port
// beside the old one. Every process must bind the same port: port 0 becomes a free one first.
import { fork } from 'node:child_process';
import { createServer } from 'node:net';
import { ENTRY, childOf, replicaEnv, type Spawner } from './spawner.ts';

export function reusePortSpawner(): Spawner {
  return {
    mode: 'reuseport',
    port: async (host, configured) => (configured === 0 ? freePort(host) : configured),
    spawn(spec, events) {
      const cp = fork(ENTRY, [], { env: replicaEnv({ ...spec, reusePort: true }), serialization: 'advanced', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      return childOf({
        pid: cp.pid,
        send: (m, written) => void cp.send(m, written),
        kill: (sig) => void cp.kill(sig),
        onMessage: (f) => void cp.on('message', f),
        onExit: (f) => void cp.on('exit', f),
      }, spec.identity.epoch, events);
    },
  };
}

async function freePort(host: string): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', reject);
    probe.listen({ port: 0, host }, () => resolve());
  });
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}
