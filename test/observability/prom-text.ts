// A small, strict parser of the Prometheus text exposition format (version 0.0.4), enough to
// hold /metrics to the format: every sample line must parse, belong to a family announced by
// # TYPE (or be an untyped family), carry well-formed labels, and a float value. It throws on
// anything else, so a malformed exposition fails the test rather than being skipped over.

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: MetricType;
  help: string | null;
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set<MetricType>(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

export class PromParseError extends Error {
  constructor(line: number, message: string) {
    super(`line ${line}: ${message}`);
  }
}

function parseValue(text: string, line: number): number {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new PromParseError(line, `bad value '${text}'`);
  return Number(text);
}

function unescapeLabel(s: string, line: number): string {
  return s.replace(/\\(.)/g, (_m, c: string) => {
    if (c === 'n') return '\n';
    if (c === '\\' || c === '"') return c;
    throw new PromParseError(line, `bad escape \\${c} in a label value`);
  });
}

/** Parses `{a="x",b="y"}` starting at text[i] === '{'; returns the labels and the index after '}'. */
function parseLabels(text: string, start: number, line: number): [Record<string, string>, number] {
  const labels: Record<string, string> = {};
  let i = start + 1;
  for (;;) {
    while (text[i] === ' ') i++;
    if (text[i] === '}') return [labels, i + 1];
    const eq = text.indexOf('=', i);
    if (eq < 0) throw new PromParseError(line, 'label without =');
    const name = text.slice(i, eq).trim();
    if (!LABEL_NAME.test(name)) throw new PromParseError(line, `bad label name '${name}'`);
    if (name in labels) throw new PromParseError(line, `label '${name}' twice`);
    if (text[eq + 1] !== '"') throw new PromParseError(line, 'label value must be quoted');
    let j = eq + 2;
    let raw = '';
    for (; j < text.length && text[j] !== '"'; j++) {
      if (text[j] === '\\') raw += text[j++]!;
      raw += text[j]!;
    }
    if (j >= text.length) throw new PromParseError(line, 'unterminated label value');
    labels[name] = unescapeLabel(raw, line);
    i = j + 1;
    if (text[i] === ',') i++;
    else if (text[i] !== '}') throw new PromParseError(line, `expected , or } after label '${name}'`);
  }
}

/** The family a sample name belongs to (histogram and summary samples have suffixes). */
function familyOf(name: string, families: Map<string, Family>): Family | undefined {
  const direct = families.get(name);
  if (direct) return direct;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!name.endsWith(suffix)) continue;
    const f = families.get(name.slice(0, -suffix.length));
    if (f && (f.type === 'histogram' || f.type === 'summary')) return f;
  }
  return undefined;
}

export function parsePrometheusText(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  lines.forEach((raw, idx) => {
    const n = idx + 1;
    const line = raw.trimEnd();
    if (line === '') return;
    if (line.startsWith('#')) {
      const m = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s+(.*))?$/.exec(line);
      if (!m) return; // a plain comment
      const [, kw, name, rest = ''] = m;
      if (!NAME.test(name!)) throw new PromParseError(n, `bad metric name '${name}'`);
      let f = families.get(name!);
      if (kw === 'TYPE') {
        if (!TYPES.has(rest as MetricType)) throw new PromParseError(n, `bad type '${rest}'`);
        if (f && f.samples.length > 0) throw new PromParseError(n, `TYPE of ${name} after its samples`);
        if (f && f.type !== 'untyped') throw new PromParseError(n, `TYPE of ${name} twice`);
        if (!f) families.set(name!, (f = { name: name!, type: rest as MetricType, help: null, samples: [] }));
        else f.type = rest as MetricType;
      } else {
        if (!f) families.set(name!, (f = { name: name!, type: 'untyped', help: null, samples: [] }));
        f.help = rest;
      }
      return;
    }
    const nameEnd = line.search(/[{ ]/);
    if (nameEnd <= 0) throw new PromParseError(n, `not a sample: '${line}'`);
    const name = line.slice(0, nameEnd);
    if (!NAME.test(name)) throw new PromParseError(n, `bad metric name '${name}'`);
    let labels: Record<string, string> = {};
    let i = nameEnd;
    if (line[i] === '{') [labels, i] = parseLabels(line, i, n);
    const parts = line.slice(i).trim().split(/\s+/);
    if (parts.length < 1 || parts.length > 2 || parts[0] === '') throw new PromParseError(n, `expected 'value [timestamp]' in '${line}'`);
    const value = parseValue(parts[0]!, n);
    if (parts[1] !== undefined && !/^-?\d+$/.test(parts[1])) throw new PromParseError(n, `bad timestamp '${parts[1]}'`);
    let f = familyOf(name, families);
    if (!f) families.set(name, (f = { name, type: 'untyped', help: null, samples: [] }));
    if (f.type === 'histogram' && name.endsWith('_bucket') && labels.le === undefined) throw new PromParseError(n, `${name} without le`);
    f.samples.push({ name, labels, value });
  });
  for (const f of families.values()) if (f.type === 'histogram') checkHistogram(f);
  return families;
}

/** Buckets cumulative and ending in +Inf equal to _count, per label set. */
function checkHistogram(f: Family): void {
  const series = new Map<string, { buckets: [number, number][]; count?: number }>();
  for (const s of f.samples) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    const entry = series.get(key) ?? { buckets: [] };
    series.set(key, entry);
    if (s.name.endsWith('_bucket')) entry.buckets.push([parseValue(le!, 0), s.value]);
    else if (s.name.endsWith('_count')) entry.count = s.value;
  }
  for (const [key, e] of series) {
    const sorted = [...e.buckets].sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < sorted.length; i++) {
      if (sorted[i]![1] < sorted[i - 1]![1]) throw new Error(`${f.name}${key}: buckets not cumulative`);
    }
    const inf = sorted[sorted.length - 1];
    if (!inf || inf[0] !== Infinity) throw new Error(`${f.name}${key}: no +Inf bucket`);
    if (e.count !== inf[1]) throw new Error(`${f.name}${key}: +Inf bucket ${inf[1]} != _count ${e.count}`);
  }
}

/** Sum of a family's plain samples (not _bucket/_sum/_count), optionally matching labels. */
export function total(families: Map<string, Family>, name: string, match: Record<string, string> = {}): number {
  const f = families.get(name);
  if (!f) throw new Error(`no metric ${name}`);
  return f.samples
    .filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/** A histogram's _count, optionally matching labels. */
export function histogramCount(families: Map<string, Family>, name: string, match: Record<string, string> = {}): number {
  const f = families.get(name);
  if (!f || f.type !== 'histogram') throw new Error(`no histogram ${name}`);
  return f.samples
    .filter((s) => s.name === `${name}_count` && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}
