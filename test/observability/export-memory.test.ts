// A 100 000-row export streams: while a slow reader consumes it (first not at all, then in
// small bites), the serving process's live heap grows by a small fraction of the export's size.
// An export built in memory before sending would hold the whole text at once (ratio >= 1).
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { get, type IncomingMessage } from 'node:http';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, sleep } from './harness.ts';

const SERVER = fileURLToPath(new URL('./fixtures/export-server.ts', import.meta.url));
const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
const ROWS = 100_000;

let child: ChildProcess;
let base: string;

beforeAll(async () => {
  child = spawn(process.execPath, ['--expose-gc', '--import', TSX, SERVER, String(ROWS)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  const port = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (l) => {
      const m = /^listening (\d+)/.exec(l);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`export server exited ${code}`)));
  });
  base = `http://127.0.0.1:${port}`;
  // One full export read at speed first. Touching every row once lets V8 settle the rows' object
  // layouts (a one-time cost of about 20 bytes a row, which is not the export's memory), and
  // compiles the code paths, so the measured growth below is the export's alone.
  await fetch(`${base}/traces?format=jsonl`).then((r) => r.text());
});
afterAll(() => {
  child?.kill('SIGKILL');
});

async function heap(): Promise<number> {
  const res = await fetch(`${base}/heap`);
  return Number(await res.text());
}

describe('a 100 000-row export', () => {
  for (const format of ['jsonl', 'csv'] as const) {
    it(`streams as ${format} with bounded memory under a slow reader`, async () => {
      const before = await heap();
      const res = await new Promise<IncomingMessage>((resolve, reject) => {
        get(`${base}/traces?format=${format}`, resolve).on('error', reject);
      });
      res.pause();
      // Not reading at all: the server must stop rendering once the socket is full.
      await sleep(600);
      const samples = [await heap()];
      let bytes = 0;
      let lines = 0;
      let first = '';
      let tail = '';
      await new Promise<void>((resolve, reject) => {
        let sampling = false;
        let paused = 0;
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          const text = chunk.toString('latin1');
          if (first.length < 2000) first += text;
          tail = (tail + text).slice(-4000);
          for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) lines++;
          // Read in bites: a pause after every 256 KB, a heap sample every 4 MB.
          if (bytes - paused < 256 * 1024) return;
          paused = bytes;
          res.pause();
          const resume = () => setTimeout(() => res.resume(), 2);
          if (!sampling && bytes > samples.length * 4_000_000) {
            sampling = true;
            void heap().then((h) => {
              samples.push(h);
              sampling = false;
              resume();
            }, reject);
          } else resume();
        });
        res.on('end', resolve);
        res.on('error', reject);
        res.resume(); // a 'data' listener does not restart a stream paused by hand
      });
      const growth = Math.max(...samples) - before;
      const ratio = growth / bytes;
      console.log(`${format}: ${bytes} bytes, ${lines} lines, heap growth ${growth} bytes (ratio ${ratio.toFixed(4)}, ${samples.length} samples)`, samples.map((s) => s - before).join(" "));
      expect(res.statusCode).toBe(200);
      expect(lines).toBe(format === 'csv' ? ROWS + 1 : ROWS);
      expect(bytes).toBeGreaterThan(10_000_000);
      // The export was whole: first and last rows are there and parse.
      if (format === 'jsonl') {
        expect(JSON.parse(first.slice(0, first.indexOf('\n'))).request_id).toBe('req-00000000');
        const last = tail.trimEnd().split('\n').pop()!;
        expect(JSON.parse(last).kind).toBe('attempt');
      } else {
        expect(first.startsWith('kind,request_id,attempt,')).toBe(true);
      }
      expect(ratio).toBeLessThan(0.05);
    });
  }
});
