// Fault markers: which of the host's marks count as faults (for "since the last fault"), and
// their labels. Pure.
import type { FaultKind, FaultMark } from '../../../host/contract.ts';

/** Marks that start an incident; restart, clear, undrain and add end one or are routine. */
export const FAULT_KINDS: ReadonlySet<FaultKind> = new Set<FaultKind>(['kill', 'hang', 'reset', 'reject', 'slow', 'drain', 'remove', 'down', 'router_lost']);

/**
 * The last fault: of the last burst of faults (marks within `burstMs` of each other, such as a
 * kill and the router noticing the worker is down), the first, which is when the incident began.
 */
export function lastFault(marks: readonly FaultMark[], burstMs = 2000): FaultMark | null {
  let i = marks.length - 1;
  while (i >= 0 && !FAULT_KINDS.has(marks[i]!.kind)) i--;
  if (i < 0) return null;
  let first = marks[i]!;
  for (let j = i - 1; j >= 0; j--) {
    const m = marks[j]!;
    if (first.t - m.t > burstMs) break;
    if (FAULT_KINDS.has(m.kind)) first = m;
  }
  return first;
}

export function faultLabel(m: FaultMark): string {
  const who = m.worker ?? m.url ?? '?';
  if (m.kind === 'router_lost') return `router ${who} lost${m.detail ? `: ${m.detail}` : ''}`;
  // A worker the router blamed is `benched` at once; the health check's verdict follows it.
  if (m.kind === 'down') return `${who} ${m.detail ?? 'down'}${m.verdict && m.verdict !== m.detail ? ` → ${m.verdict}` : ''}`;
  // Discovery's drain or removal says why, from the pod's status (OOMKilled, Evicted, deleted with grace).
  return m.source === 'router' && m.detail ? `${m.kind} ${who}: ${m.detail}` : `${m.kind} ${who}`;
}

/** Marks that land within `minGap` ms of each other drawn as one (a kill and the router noticing it). */
export interface MarkGroup {
  t: number;
  marks: FaultMark[];
  label: string;
  source: FaultMark['source'];
}

export function groupMarks(marks: readonly FaultMark[], minGap: number): MarkGroup[] {
  const sorted = [...marks].sort((a, b) => a.t - b.t);
  const groups: MarkGroup[] = [];
  for (const m of sorted) {
    const last = groups[groups.length - 1];
    if (last && m.t - last.marks[last.marks.length - 1]!.t <= minGap) {
      last.marks.push(m);
      last.label = `${last.label} · ${faultLabel(m)}`;
      if (m.source === 'dashboard') last.source = 'dashboard';
    } else {
      groups.push({ t: m.t, marks: [m], label: faultLabel(m), source: m.source });
    }
  }
  return groups;
}

/** Marks within [from, to]. */
export function marksIn(marks: readonly FaultMark[], from: number, to: number): FaultMark[] {
  return marks.filter((m) => m.t >= from && m.t <= to);
}

/**
 * What a marker is, which its colour says the same way on the time axis, the list and the
 * charts: `fault` breaks streams or a worker (kill, hang, reset, reject, a worker down, a router
 * lost: red), `degrade` takes capacity away without breaking what runs (slow, drain, remove:
 * orange), `recover` brings it back (restart, clear, undrain, add: green). Who made the mark (the
 * dashboard or the router) is the line's dash, not its colour.
 */
export type MarkTone = 'fault' | 'degrade' | 'recover';
export function markTone(kind: FaultKind): MarkTone {
  switch (kind) {
    case 'slow': case 'drain': case 'remove': return 'degrade';
    case 'restart': case 'clear': case 'undrain': case 'add': return 'recover';
    default: return 'fault';
  }
}
const SEVERITY: Record<MarkTone, number> = { recover: 0, degrade: 1, fault: 2 };
/** A group's tone: its most severe mark's. */
export function groupTone(marks: readonly FaultMark[]): MarkTone {
  return marks.map((m) => markTone(m.kind)).reduce<MarkTone>((a, b) => (SEVERITY[b] > SEVERITY[a] ? b : a), 'recover');
}
/** The CSS colour of a tone (styles.css defines --mark-* for each theme). */
export function toneColor(tone: MarkTone): string {
  return `var(--mark-${tone})`;
}
