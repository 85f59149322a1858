// A replica process of `baton router --replicas N` (a spawner, router/replicas/cluster-spawner.ts
// or reuseport-spawner.ts, forks this file): tsx's loader, as bin/baton.js, then the replica.
import { register } from 'tsx/esm/api';

register();
await import('./replica-main.ts');
