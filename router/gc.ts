// How the router's process scavenges (V8's young-generation GC), a process-wide V8 flag set when
// a router starts.
//
// V8 scavenges on the main thread plus helper threads by default. A router's scavenges are small
// (a few hundred KiB outlive each one: the requests in flight), and it runs beside its load: on a
// busy host the helpers wait for a CPU the workers hold, and with the router pinned to one CPU
// they take turns on it with the main thread. Scavenging on the main thread alone cost 3-7 % less
// CPU per W1 request where CPUs were short and the same where they were not (docs/benchmarks.md,
// "GC: serial scavenges"). `parallel` keeps V8's default, for a
// router with idle cores of its own.
//
// `--parallel-scavenge` is safe to change after start: V8 reads it at every scavenge to size the
// scavenge's tasks (`ScavengerCollector::NumberOfScavengeTasks`, src/heap/scavenger.cc: "if
// (!v8_flags.parallel_scavenge) return 1;"), and V8's own tests turn it off at run time.
// `--single-threaded-gc`, which also stops concurrent marking, crashes V8 when set at run time.
import { setFlagsFromString } from 'node:v8';

export const GC_SCAVENGE_MODES = ['serial', 'parallel'] as const;
export type GcScavenge = (typeof GC_SCAVENGE_MODES)[number];

export function applyGcScavenge(mode: GcScavenge): void {
  setFlagsFromString(mode === 'serial' ? '--no-parallel-scavenge' : '--parallel-scavenge');
}
