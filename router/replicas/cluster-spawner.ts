// The node:cluster spawner (Node 20), with SCHED_NONE: the replicas accept on the one listening
// socket the primary shares with them. Not node:cluster's round-robin default on Linux: there the
// primary accepts and hands each connection over IPC, and a connection handed to a replica that has
// just died is never answered nor closed (the handoff waits for a reply that never comes: the
// client hangs). With SCHED_NONE the kernel resets what the dead process had accepted and keeps
// the rest in the accept queue for the survivors, and no connection passes through the primary.
//
// A reload's new process joins the shared port: node:cluster's `queryServer`
// (lib/internal/cluster/primary.js) hands it the existing SharedHandle for the same address, port
// and listen index, which stays open while any replica holds it.
import cluster from 'node:cluster';
import { ENTRY, childOf, replicaEnv, type Spawner } from './spawner.ts';

export function clusterSpawner(): Spawner {
  cluster.schedulingPolicy = cluster.SCHED_NONE;
  cluster.setupPrimary({ exec: ENTRY, args: [], serialization: 'advanced' });
  return {
    mode: 'cluster',
    port: async (_host, configured) => configured,
    spawn(spec, events) {
      const w = cluster.fork(replicaEnv({ ...spec, reusePort: false }));
      return childOf({
        pid: w.process.pid,
        send: (m, written) => void w.send(m, undefined, undefined, written),
        kill: (sig) => void w.process.kill(sig),
        onMessage: (f) => void w.on('message', f),
        onExit: (f) => void w.on('exit', f),
      }, spec.identity.epoch, events);
    },
  };
}
