// The top of a V8 CPU profile (.cpuprofile, from `node --cpu-prof` or bench/pair.ts --profile):
// self and inclusive time per function, and self time per area (Baton's own code, undici, Node's
// HTTP, GC, the rest), as shares of the busy (non-idle) samples.
//
//   node --import tsx bench/profile-top.ts FILE.cpuprofile [N]
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileSummary {
  /** Busy time sampled, µs (idle excluded). */
  busyUs: number;
  idleUs: number;
  functions: { key: string; selfUs: number; totalUs: number }[];
  areas: { area: string; selfUs: number }[];
}

function shortUrl(url: string): string {
  const i = url.lastIndexOf('/node_modules/');
  if (i >= 0) return url.slice(i + '/node_modules/'.length);
  const r = url.search(/\/(router|bench|sim|cli)\//);
  if (r >= 0) return url.slice(r + 1);
  return url.replace(/^file:\/\//, '');
}

/** Which part of the process a frame belongs to. */
export function areaOf(f: CallFrame): string {
  const u = f.url;
  if (f.functionName === '(garbage collector)') return 'GC';
  if (f.functionName === '(program)') return '(program)';
  if (/\/router\//.test(u)) return 'Baton (router/)';
  if (/\/node_modules\/undici\//.test(u)) return 'undici';
  if (/\/node_modules\/prom-client\//.test(u)) return 'prom-client';
  if (/\/bench\//.test(u)) return 'bench probe';
  if (/^node:internal\/(http|_http)|^node:_http|^node:http/.test(u)) return 'node http';
  if (/^node:internal\/streams|^node:stream/.test(u)) return 'node streams';
  if (/^node:(internal\/)?net|^node:internal\/stream_base/.test(u)) return 'node net';
  if (u.startsWith('node:')) return 'node other';
  if (u === '') return `native: ${f.functionName || '(anonymous)'}`;
  return 'other JS';
}

export function summarizeProfile(file: string): ProfileSummary {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const n of p.nodes) byId.set(n.id, n);
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const key = (f: CallFrame) => `${f.functionName || '(anonymous)'} ${f.url ? `${shortUrl(f.url)}:${f.lineNumber + 1}` : '(native)'}`;
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  const areas = new Map<string, number>();
  let busy = 0;
  let idle = 0;
  // timeDeltas[i] is the time before sample i; the time a sample stands for is the next delta.
  for (let i = 0; i < p.samples.length; i++) {
    const dt = p.timeDeltas[i + 1] ?? 0;
    const node = byId.get(p.samples[i]!);
    if (!node) continue;
    if (node.callFrame.functionName === '(idle)') {
      idle += dt;
      continue;
    }
    busy += dt;
    const k = key(node.callFrame);
    self.set(k, (self.get(k) ?? 0) + dt);
    const area = areaOf(node.callFrame);
    areas.set(area, (areas.get(area) ?? 0) + dt);
    const seen = new Set<string>();
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      const n = byId.get(id)!;
      const kk = key(n.callFrame);
      if (seen.has(kk)) continue;
      seen.add(kk);
      total.set(kk, (total.get(kk) ?? 0) + dt);
    }
  }
  return {
    busyUs: busy,
    idleUs: idle,
    functions: [...self.keys()].map((k) => ({ key: k, selfUs: self.get(k)!, totalUs: total.get(k) ?? 0 })).sort((a, b) => b.selfUs - a.selfUs),
    areas: [...areas.entries()].map(([area, selfUs]) => ({ area, selfUs })).sort((a, b) => b.selfUs - a.selfUs),
  };
}

export function formatTop(s: ProfileSummary, n = 25): string {
  const pct = (us: number) => `${((us / s.busyUs) * 100).toFixed(1).padStart(5)} %`;
  const lines = [`busy ${(s.busyUs / 1e6).toFixed(2)} s sampled (idle ${(s.idleUs / 1e6).toFixed(2)} s); self time by area:`];
  for (const a of s.areas.slice(0, 14)) lines.push(`  ${pct(a.selfUs)}  ${a.area}`);
  lines.push(`top ${n} functions by self time (self, inclusive):`);
  for (const f of s.functions.slice(0, n)) lines.push(`  ${pct(f.selfUs)} ${pct(f.totalUs)}  ${f.key}`);
  return lines.join('\n');
}

/** Inclusive share of every function whose key matches `re` (e.g. /router\//), largest first. */
export function inclusiveMatching(s: ProfileSummary, re: RegExp, n = 30): string {
  const hits = s.functions.filter((f) => re.test(f.key)).sort((a, b) => b.totalUs - a.totalUs).slice(0, n);
  return hits.map((f) => `  ${((f.totalUs / s.busyUs) * 100).toFixed(1).padStart(5)} % incl  ${((f.selfUs / s.busyUs) * 100).toFixed(1).padStart(5)} % self  ${f.key}`).join('\n');
}

interface HeapNode {
  callFrame: CallFrame;
  selfSize: number;
  children: HeapNode[];
}

export interface HeapSummary {
  totalBytes: number;
  functions: { key: string; selfBytes: number; totalBytes: number }[];
}

/** A sampling heap profile (.heapprofile): bytes allocated per function, self and inclusive. */
export function summarizeHeapProfile(file: string): HeapSummary {
  const p = JSON.parse(readFileSync(file, 'utf8')) as { head: HeapNode };
  const key = (f: CallFrame) => `${f.functionName || '(anonymous)'} ${f.url ? `${shortUrl(f.url)}:${f.lineNumber + 1}` : '(native)'}`;
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  let all = 0;
  const walk = (n: HeapNode, stack: string[]): number => {
    const k = key(n.callFrame);
    let t = n.selfSize;
    self.set(k, (self.get(k) ?? 0) + n.selfSize);
    all += n.selfSize;
    for (const c of n.children) t += walk(c, [...stack, k]);
    if (!stack.includes(k)) total.set(k, (total.get(k) ?? 0) + t);
    return t;
  };
  walk(p.head, []);
  return {
    totalBytes: all,
    functions: [...self.keys()].map((k) => ({ key: k, selfBytes: self.get(k)!, totalBytes: total.get(k) ?? 0 })).sort((a, b) => b.selfBytes - a.selfBytes),
  };
}

export function formatHeapTop(s: HeapSummary, n = 30): string {
  const pct = (b: number) => `${((b / s.totalBytes) * 100).toFixed(1).padStart(5)} %`;
  const lines = [`${(s.totalBytes / 2 ** 20).toFixed(1)} MiB allocated (sampled); top ${n} functions by bytes allocated (self, inclusive):`];
  for (const f of s.functions.slice(0, n)) lines.push(`  ${pct(f.selfBytes)} ${pct(f.totalBytes)}  ${f.key}`);
  return lines.join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [file, n, match] = process.argv.slice(2);
  if (!file) {
    console.log('usage: node --import tsx bench/profile-top.ts FILE.cpuprofile [N] [REGEX for an inclusive listing]');
    process.exit(1);
  }
  if (file.endsWith('.heapprofile')) {
    console.log(formatHeapTop(summarizeHeapProfile(file), Number(n ?? 30)));
    process.exit(0);
  }
  const s = summarizeProfile(file);
  console.log(formatTop(s, Number(n ?? 25)));
  if (match) {
    console.log(`inclusive, functions matching /${match}/:`);
    console.log(inclusiveMatching(s, new RegExp(match)));
  }
}
