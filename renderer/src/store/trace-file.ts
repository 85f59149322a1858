// Trace files read in the page: the JSON Lines and CSV that Baton exports (`baton traces`, the
// Traces view's Export, a router's --trace-file), with or without the ISO time columns. Pure,
// so the Node tests and the page share it. The inverse (rows → file text) serves exports of a
// file opened offline.
import type { TraceRow } from '../../../router/trace/row.ts';
import type { BatonEvent } from '../../../router/events/types.ts';
import type { ContextWorker, FaultMark, TraceFileContext } from '../../../host/contract.ts';
import { CONTEXT_KIND, contextRecord } from '../../../host/export-query.ts';

export type TraceFileFormat = 'jsonl' | 'csv';

export interface ParsedTraceFile {
  rows: TraceRow[];
  /** Non-blank lines (or CSV records) that were not trace rows. */
  skipped: number;
  /** The first problem met, for the message shown when nothing could be read. */
  firstError: string | null;
  format: TraceFileFormat;
  /** The file's context record (workers, colours, fault markers), null in files that predate it. */
  context: TraceFileContext | null;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/**
 * A context record as read from a file: what is well-formed is kept, the rest dropped (a file
 * edited by hand still opens; it just draws less).
 */
const INFLIGHT_TYPES = new Set(['request_admitted', 'attempt_started', 'first_token', 'progress']);

/** An event of a request running at the export, well-formed enough for the reducer. */
function isInflightEvent(e: unknown): e is BatonEvent {
  if (!isObj(e) || typeof e.type !== 'string' || !INFLIGHT_TYPES.has(e.type) || typeof e.t !== 'number' || typeof e.request_id !== 'string') return false;
  if (e.type === 'attempt_started') return typeof e.attempt === 'number' && typeof e.worker === 'string';
  if (e.type === 'first_token') return typeof e.attempt === 'number' && typeof e.ttft_ms === 'number';
  if (e.type === 'progress') return typeof e.attempt === 'number' && typeof e.tokens === 'number' && typeof e.completion_tokens === 'number';
  return typeof e.admitted === 'boolean';
}

export function readContext(value: unknown): TraceFileContext | null {
  if (!isObj(value) || value.kind !== CONTEXT_KIND) return null;
  const workers: ContextWorker[] = [];
  for (const w of Array.isArray(value.workers) ? value.workers : []) {
    if (!isObj(w) || typeof w.id !== 'string' || typeof w.url !== 'string') continue;
    const format = w.format === 'sglang' || w.format === 'vllm' ? w.format : null;
    const color = typeof w.color === 'string' && /^#[0-9a-f]{6}$/i.test(w.color) ? w.color : '';
    workers.push({ id: w.id, url: w.url, format, model_path: str(w.model_path), color, ...(isObj(w.discovery) ? { discovery: w.discovery as unknown as ContextWorker['discovery'] } : {}) });
  }
  const faults: FaultMark[] = [];
  for (const m of Array.isArray(value.faults) ? value.faults : []) {
    if (!isObj(m) || typeof m.t !== 'number' || typeof m.kind !== 'string') continue;
    faults.push({
      t: m.t, kind: m.kind as FaultMark['kind'], worker: str(m.worker), url: str(m.url),
      source: m.source === 'dashboard' ? 'dashboard' : 'router', detail: str(m.detail),
    });
  }
  return {
    kind: CONTEXT_KIND, version: 1,
    exported_at: typeof value.exported_at === 'number' ? value.exported_at : 0,
    workers, faults,
    inflight: (Array.isArray(value.inflight) ? value.inflight : []).filter(isInflightEvent),
    ...(Array.isArray(value.incidents) ? { incidents: value.incidents } : {}),
  };
}

const NUMBER_COLUMNS = new Set([
  'attempt', 'started_at', 'ended_at', 'ttft_ms', 'prompt_tokens_sent', 'replayed_tokens', 'tokens', 'budget_before', 'budget_after',
  'cached_tokens', 'attempts', 'migrations', 'prompt_tokens', 'completion_tokens', 'duration_ms', 'max_new_tokens',
  'placement_prefix', 'client_status', 'prefill_ended_at',
]);
const BOOLEAN_COLUMNS = new Set(['admitted', 'stream']);
const ATTEMPT_ONLY = new Set(['attempt', 'rid', 'worker', 'ttft_ms', 'prompt_tokens_sent', 'replayed_tokens', 'tokens', 'budget_before', 'budget_after', 'error_kind', 'error_evidence', 'placement_prefix', 'placement_reason', ...'prefill_worker decode_worker bootstrap_room failed_leg prefill_ended_at'.split(' ')]);
/**
 * Columns only some attempts have (P/D, docs/pd.md): blank means absent, not null (a null
 * `prefill_ended_at`, a leg closed with its attempt, is drawn as an absent one: the whole bar).
 */
const ABSENT_WHEN_BLANK = new Set(['prefill_worker', 'decode_worker', 'bootstrap_room', 'failed_leg', 'prefill_ended_at']);
const REQUEST_ONLY = new Set(['attempts', 'migrations', 'admitted', 'admission_reason', 'prompt_tokens', 'completion_tokens', 'duration_ms', 'stream', 'max_new_tokens', 'client_error', 'client_status']);

export function detectFormat(name: string, text: string): TraceFileFormat {
  if (/\.csv$/i.test(name)) return 'csv';
  if (/\.jsonl?$|\.ndjson$/i.test(name)) return 'jsonl';
  return text.trimStart().startsWith('{') ? 'jsonl' : 'csv';
}

/** Keeps what a trace row is and drops what only an export adds (the `_iso` twins of the times). */
function asRow(value: unknown): TraceRow | string {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'not an object';
  const o = value as Record<string, unknown>;
  if (o.kind !== 'attempt' && o.kind !== 'request') return `kind is ${JSON.stringify(o.kind)}, not attempt or request`;
  if (typeof o.request_id !== 'string') return 'no request_id';
  if (typeof o.started_at !== 'number' || typeof o.ended_at !== 'number') return 'no started_at / ended_at';
  if (o.kind === 'attempt' && (typeof o.attempt !== 'number' || typeof o.worker !== 'string')) return 'an attempt row without attempt / worker';
  const row: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (!k.endsWith('_iso')) row[k] = v;
  return row as unknown as TraceRow;
}

export function parseJsonl(text: string): ParsedTraceFile {
  const rows: TraceRow[] = [];
  let skipped = 0;
  let firstError: string | null = null;
  let context: TraceFileContext | null = null;
  let start = 0;
  let line = 0;
  while (start <= text.length) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    line++;
    const raw = text.slice(start, end).trim();
    start = end + 1;
    if (raw === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch {
      skipped++;
      firstError ??= `line ${line}: not JSON`;
      continue;
    }
    const ctx = readContext(value);
    if (ctx) {
      context = ctx;
      continue;
    }
    const row = asRow(value);
    if (typeof row === 'string') {
      skipped++;
      firstError ??= `line ${line}: ${row}`;
    } else {
      rows.push(row);
    }
  }
  return { rows, skipped, firstError, format: 'jsonl', context };
}

/**
 * RFC 4180 records: fields separated by commas, quoted with double quotes ("" inside), newlines
 * allowed inside quotes. Each field remembers whether it was quoted: an unquoted empty field is
 * null (or a field of the other row kind), a quoted one the empty string.
 */
export function csvRecords(text: string): { value: string; quoted: boolean }[][] {
  const records: { value: string; quoted: boolean }[][] = [];
  let record: { value: string; quoted: boolean }[] = [];
  let i = 0;
  const n = text.length;
  if (text.charCodeAt(0) === 0xfeff) i = 1;
  while (i < n) {
    let value = '';
    let quoted = false;
    if (text[i] === '"') {
      quoted = true;
      i++;
      for (;;) {
        const q = text.indexOf('"', i);
        if (q < 0) {
          value += text.slice(i);
          i = n;
          break;
        }
        value += text.slice(i, q);
        if (text[q + 1] === '"') {
          value += '"';
          i = q + 2;
        } else {
          i = q + 1;
          break;
        }
      }
    } else {
      let j = i;
      while (j < n && text[j] !== ',' && text[j] !== '\n' && text[j] !== '\r') j++;
      value = text.slice(i, j);
      i = j;
    }
    record.push({ value, quoted });
    if (text[i] === ',') {
      i++;
      if (i >= n) record.push({ value: '', quoted: false });
      continue;
    }
    if (text[i] === '\r') i++;
    if (text[i] === '\n') i++;
    records.push(record);
    record = [];
  }
  if (record.length > 0) records.push(record);
  return records;
}

export function parseCsv(text: string): ParsedTraceFile {
  const records = csvRecords(text);
  const header = records[0]?.map((f) => f.value.trim()) ?? [];
  if (!header.includes('kind') || !header.includes('request_id')) {
    return { rows: [], skipped: Math.max(0, records.length), firstError: 'the first line is not a trace-row CSV header (kind, request_id, ...)', format: 'csv', context: null };
  }
  const rows: TraceRow[] = [];
  let skipped = 0;
  let firstError: string | null = null;
  let context: TraceFileContext | null = null;
  const kindAt = header.indexOf('kind');
  const idAt = header.indexOf('request_id');
  for (let r = 1; r < records.length; r++) {
    const rec = records[r]!;
    if (rec.length === 1 && rec[0]!.value === '' && !rec[0]!.quoted) continue; // a blank line
    if (rec[kindAt]?.value === CONTEXT_KIND) {
      try {
        context = readContext(JSON.parse(rec[idAt]?.value ?? '')) ?? context;
      } catch {
        skipped++;
        firstError ??= `record ${r + 1}: a ${CONTEXT_KIND} record whose request_id is not JSON`;
      }
      continue;
    }
    const o: Record<string, unknown> = {};
    let kind: unknown = null;
    for (let c = 0; c < header.length; c++) {
      if (header[c] === 'kind') kind = rec[c]?.value;
    }
    for (let c = 0; c < header.length; c++) {
      const name = header[c]!;
      const field = rec[c];
      if (name.endsWith('_iso')) continue;
      // A column of the other row kind is blank in this row: leave it out, as the JSON row would.
      if ((kind === 'request' && ATTEMPT_ONLY.has(name)) || (kind === 'attempt' && REQUEST_ONLY.has(name))) continue;
      if (!field || (field.value === '' && !field.quoted)) {
        if (!ABSENT_WHEN_BLANK.has(name)) o[name] = null;
      } else if (NUMBER_COLUMNS.has(name)) {
        const v = Number(field.value);
        o[name] = Number.isFinite(v) ? v : field.value;
      } else if (BOOLEAN_COLUMNS.has(name)) {
        o[name] = field.value === 'true' ? true : field.value === 'false' ? false : field.value;
      } else {
        o[name] = field.value;
      }
    }
    const row = asRow(o);
    if (typeof row === 'string') {
      skipped++;
      firstError ??= `record ${r + 1}: ${row}`;
    } else {
      rows.push(row);
    }
  }
  return { rows, skipped, firstError, format: 'csv', context };
}

export function parseTraceFile(name: string, text: string): ParsedTraceFile {
  return detectFormat(name, text) === 'csv' ? parseCsv(text) : parseJsonl(text);
}

/** A row with ISO 8601 times next to its epoch milliseconds, as the router's exports write them with `iso=1`. */
export function withIso(row: TraceRow): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(row)) {
    out[k] = v;
    if ((k === 'started_at' || k === 'ended_at') && typeof v === 'number') out[`${k}_iso`] = new Date(v).toISOString();
  }
  return out;
}

function csvField(v: unknown): string {
  if (v === null || v === undefined) return '';
  const s = typeof v === 'string' ? v : typeof v === 'boolean' ? (v ? 'true' : 'false') : String(v);
  if (typeof v === 'string' && s === '') return '""';
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/**
 * Rows as a file again: JSON Lines or CSV with the ISO columns, as the router exports them, and
 * the context record after them when given.
 */
export function renderTraceFile(rows: readonly TraceRow[], format: TraceFileFormat, context: TraceFileContext | null = null): string {
  const out = rows.map(withIso);
  if (format === 'jsonl') return out.map((r) => JSON.stringify(r)).join('\n') + (out.length > 0 ? '\n' : '') + (context ? contextRecord(context, 'jsonl') : '');
  // kind and request_id first: the context record's place (host/export-query.ts, contextRecord).
  const columns: string[] = ['kind', 'request_id'];
  const seen = new Set<string>(columns);
  for (const r of out) for (const k of Object.keys(r)) if (!seen.has(k)) { seen.add(k); columns.push(k); }
  const lines = [columns.join(',')];
  for (const r of out) lines.push(columns.map((c) => csvField(r[c])).join(','));
  return lines.join('\n') + '\n' + (context ? contextRecord(context, 'csv', columns.length) : '');
}
