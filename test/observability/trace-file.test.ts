// --trace-file: the rows of one run of code are appended in one synchronous write before the
// router's turn ends, so a router killed with SIGKILL in the middle of traffic leaves a file whose
// every line is a whole row, and every request that had finished by then has its rows in it.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type SimCluster } from '../../sim/cluster.ts';
import { TraceFileError, TraceStore } from '../../router/trace/store.ts';
import type { TraceRow } from '../../router/trace/row.ts';
import { generate, sleep, spawnRouter, until, type RouterProcess } from './harness.ts';
import { ATTEMPT_FIELDS, REQUEST_FIELDS } from './trace-fields.ts';

const dir = mkdtempSync(join(tmpdir(), 'baton-trace-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a router killed with SIGKILL mid-traffic', () => {
  let cluster: SimCluster;
  let router: RouterProcess;
  const file = join(dir, 'traces.jsonl');

  beforeAll(async () => {
    cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 3 });
  });
  afterAll(async () => {
    await router?.stop();
    await cluster?.stop();
  });

  it('leaves a trace file whose every line parses, with every finished request in it', async () => {
    router = await spawnRouter([...cluster.workers().flatMap((w) => ['--worker', w.url]), '--trace-file', file, '--health-interval-ms', '200']);
    const finishedAt = new Map<string, number>();
    let i = 0;
    let stop = false;
    // Requests keep starting until the kill, 10 at a time, so some are always mid-stream.
    const clients = Array.from({ length: 10 }, async (_, c) => {
      while (!stop) {
        const id = `tf-${c}-${i++}`;
        const answer = await generate(router.url, { id, stream: i % 2 === 0, maxNewTokens: 20 + ((i * 37) % 150) });
        if (answer.status === 200 && !answer.error) finishedAt.set(id, Date.now());
      }
    });
    await until(() => finishedAt.size >= 10, 30_000, '10 finished requests');
    const killedAt = Date.now();
    router.child.kill('SIGKILL');
    stop = true;
    await router.stop();
    await Promise.all(clients);

    const lines = readFileSync(file, 'utf8').split('\n');
    expect(lines.pop()).toBe(''); // the file ends with a whole line
    const rows = lines.map((line, n) => {
      try {
        return JSON.parse(line) as TraceRow;
      } catch {
        throw new Error(`line ${n + 1} does not parse: ${line}`);
      }
    });
    for (const row of rows) {
      expect(Object.keys(row).sort()).toEqual([...(row.kind === 'attempt' ? ATTEMPT_FIELDS : REQUEST_FIELDS)].sort());
    }
    // No row twice; a request's attempt rows come before its request row.
    const seen = new Set<string>();
    for (const row of rows) {
      const key = row.kind === 'attempt' ? `${row.request_id}#${row.attempt}` : `${row.request_id}#request`;
      expect(seen.has(key), key).toBe(false);
      seen.add(key);
      if (row.kind === 'request') {
        for (let a = 0; a < row.attempts; a++) expect(seen.has(`${row.request_id}#${a}`), `${row.request_id}#${a}`).toBe(true);
      }
    }
    // Every request its client saw finish (a little before the kill) has its row.
    const settled = [...finishedAt].filter(([, t]) => t < killedAt - 50).map(([id]) => id);
    expect(settled.length).toBeGreaterThanOrEqual(5);
    for (const id of settled) expect(seen.has(`${id}#request`), id).toBe(true);
    // And the kill did land mid-traffic: some request started but never got its row.
    const started = new Set(rows.map((r) => r.request_id));
    expect(rows.filter((r) => r.kind === 'request').length).toBeLessThan(i);
    expect(started.size).toBeGreaterThan(0);
  });
});

describe('TraceStore file', () => {
  it('names the flag and the reason when the file cannot be opened', () => {
    expect(() => new TraceStore(10, join(dir, 'no-such-dir', 'x.jsonl'))).toThrow(TraceFileError);
    expect(() => new TraceStore(10, join(dir, 'no-such-dir', 'x.jsonl'))).toThrow(/--trace-file .*ENOENT/);
  });

  it('a write that fails (disk full) is counted, and the row is still kept in memory', async () => {
    const store = new TraceStore(10, '/dev/full');
    const errors: unknown[] = [];
    const original = console.error;
    console.error = (...args: unknown[]) => errors.push(args);
    try {
      const row = { kind: 'request', request_id: 'x' } as TraceRow;
      store.add(row);
      store.add(row);
      await Promise.resolve(); // the turn's rows are written together, once its code has run
      store.add(row);
      await Promise.resolve();
      expect(store.fileErrors).toBe(3);
      expect([...store.rows()]).toHaveLength(3);
      expect(errors).toHaveLength(1); // said once, then counted
    } finally {
      console.error = original;
      store.close();
    }
  });

  it('appends the rows of one run of code after it, in order, and the rest on close()', async () => {
    const f = join(dir, 'turn.jsonl');
    const store = new TraceStore(10, f);
    const ids = (text: string) => text.split('\n').filter(Boolean).map((l) => (JSON.parse(l) as TraceRow).request_id);
    store.add({ kind: 'attempt', request_id: 'a' } as TraceRow);
    store.add({ kind: 'request', request_id: 'b' } as TraceRow);
    // Not within the code that added them: a failed attempt's row is added between the failure
    // and its continuation's write, which must not wait for the disk.
    expect(readFileSync(f, 'utf8')).toBe('');
    await Promise.resolve();
    expect(ids(readFileSync(f, 'utf8'))).toEqual(['a', 'b']);
    store.add({ kind: 'request', request_id: 'c' } as TraceRow);
    store.close(); // before its turn ends: close() writes it
    expect(ids(readFileSync(f, 'utf8'))).toEqual(['a', 'b', 'c']);
  });

  it("starts on a fresh line after a previous run's torn last line", () => {
    const f = join(dir, 'torn.jsonl');
    writeFileSync(f, '{"kind":"request","request_id":"whole"}\n{"kind":"attempt","request_id":"to');
    const store = new TraceStore(10, f);
    store.add({ kind: 'request', request_id: 'next' } as TraceRow);
    store.close();
    const lines = readFileSync(f, 'utf8').split('\n');
    expect(lines).toEqual(['{"kind":"request","request_id":"whole"}', '{"kind":"attempt","request_id":"to', '{"kind":"request","request_id":"next"}', '']);
  });

  it('appends whole lines after what a previous run wrote', async () => {
    const f = join(dir, 'append.jsonl');
    writeFileSync(f, '{"kind":"request","request_id":"old"}\n');
    const store = new TraceStore(10, f);
    store.add({ kind: 'request', request_id: 'new' } as TraceRow);
    store.close();
    await sleep(0);
    expect(readFileSync(f, 'utf8')).toBe('{"kind":"request","request_id":"old"}\n{"kind":"request","request_id":"new"}\n');
  });
});
