// Does the page stay smooth? Frame times while scrolling, measured in Chromium with
// requestAnimationFrame: (1) live, at 25 requests/s with about 100 in flight, scrolling the
// Requests list and the Traces table; (2) a 100,000-row trace file opened with `baton view`,
// scrolling Traces and Requests. Not part of `npm test` (it takes a minute and its figures depend
// on the machine); run it with `npx tsx e2e/smoothness.ts`, which prints one line per scenario.
// Live, three incidents are made (each worker killed and restarted); the file holds 50 incidents
// (BATON_SMOOTH_INCIDENTS=N for another number, 0 for the old file of evenly spread migrations).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Page } from '@playwright/test';
import { chromiumLaunchOptions } from './browser.ts';
import { startServe, startView } from './serve-process.ts';

interface Frames { frames: number; seconds: number; fps: number; p50: number; p95: number; p99: number; worst: number; over25: number }

/** Scrolls `selector` up and down with the wheel for `ms` and records every frame's interval. */
async function scrollFrames(page: Page, selector: string, ms: number): Promise<Frames> {
  const box = (await page.locator(selector).boundingBox())!;
  await page.mouse.move(box.x + box.width / 2, box.y + Math.min(200, box.height / 2));
  // A string, not a function: tsx would wrap a named inner function in a helper the page lacks.
  await page.evaluate(`(() => {
    window.__frames = [];
    window.__stop = false;
    const tick = (t) => { window.__frames.push(t); if (!window.__stop) requestAnimationFrame(tick); };
    requestAnimationFrame(tick);
  })()`);
  const end = Date.now() + ms;
  let down = true;
  let step = 0;
  while (Date.now() < end) {
    await page.mouse.wheel(0, down ? 240 : -240);
    await page.waitForTimeout(16);
    if (++step % 60 === 0) down = !down;
  }
  const t = (await page.evaluate('(() => { window.__stop = true; return window.__frames; })()')) as number[];
  const gaps = t.slice(1).map((v, i) => v - t[i]!).sort((a, b) => a - b);
  const q = (p: number) => gaps[Math.min(gaps.length - 1, Math.floor(p * gaps.length))] ?? 0;
  const seconds = (t[t.length - 1]! - t[0]!) / 1000;
  return {
    frames: gaps.length, seconds, fps: gaps.length / seconds, p50: q(0.5), p95: q(0.95), p99: q(0.99), worst: gaps[gaps.length - 1] ?? 0,
    over25: gaps.filter((g) => g > 25).length,
  };
}

function line(name: string, f: Frames, extra = ''): string {
  return `${name.padEnd(44)} ${f.fps.toFixed(1).padStart(5)} fps over ${f.seconds.toFixed(1)} s · frame p50 ${f.p50.toFixed(1)} ms, p95 ${f.p95.toFixed(1)} ms, p99 ${f.p99.toFixed(1)} ms, worst ${f.worst.toFixed(0)} ms · ${f.over25} of ${f.frames} frames over 25 ms${extra}`;
}

/**
 * A trace file of `n` rows: requests of one attempt; `incidents` bursts of failures spread over
 * the file (each 2 s on one worker: its streams break and migrate, one request in eight of them
 * fails with no worker left), so the file holds that many incidents; with none, one request in
 * ten migrated, spread evenly (which reads as one long incident per worker).
 */
function traceFile(n: number, incidents = 0): string {
  const lines: string[] = [];
  let t = Date.parse('2026-11-30T02:00:00Z');
  let i = 0;
  const workers = ['http://10.0.0.1:30000', 'http://10.0.0.2:30000', 'http://10.0.0.3:30000'];
  const t0 = t;
  const requests = Math.ceil(n / 2.1);
  const every = incidents > 0 ? Math.floor((requests * 40) / incidents) : 0;
  while (lines.length < n) {
    const id = `req-${i.toString(16).padStart(8, '0')}`;
    const since = t - t0;
    const burst = incidents > 0 && since % every >= every / 2 && since % every < every / 2 + 2000 ? Math.floor(since / every) % 3 : -1;
    const migrated = incidents > 0 ? burst === i % 3 : i % 10 === 3;
    const exhausted = migrated && incidents > 0 && i % 8 === 0;
    const budget = 64 + (i % 200);
    const w = workers[i % 3]!;
    const start = t;
    const a0tokens = migrated ? Math.floor(budget / 3) : budget;
    const a0end = start + 40 + a0tokens * 20;
    lines.push(JSON.stringify({ kind: 'attempt', request_id: id, attempt: 0, rid: `${id}~m0~0000000000000000`, worker: w, started_at: start, ended_at: a0end, ttft_ms: 30, prompt_tokens_sent: 40, replayed_tokens: 0, tokens: a0tokens, budget_before: budget, budget_after: budget - a0tokens, cached_tokens: 0, outcome: migrated ? 'failed' : 'finished', error_kind: migrated ? 'stream_broken' : null, error: migrated ? 'UND_ERR_SOCKET: other side closed' : null, error_evidence: migrated ? 'transport error UND_ERR_SOCKET after the response started' : null, finish_reason: migrated ? null : 'length', trace_id: null }));
    let end = a0end;
    if (exhausted) {
      lines.push(JSON.stringify({ kind: 'request', request_id: id, attempts: 1, migrations: 0, admitted: true, admission_reason: null, prompt_tokens: 40, completion_tokens: a0tokens, cached_tokens: 0, finish_reason: null, outcome: 'failed', duration_ms: a0end - start, started_at: start, ended_at: a0end, stream: true, max_new_tokens: budget, error: 'UND_ERR_SOCKET: other side closed', trace_id: null, client_error: 'migration_exhausted: no worker left that can continue this request exactly after: UND_ERR_SOCKET: other side closed', client_status: 502 }));
      t += 40;
      i++;
      continue;
    }
    if (migrated) {
      const w1 = workers[(i + 1) % 3]!;
      const rest = budget - a0tokens;
      end = a0end + 20 + rest * 20;
      lines.push(JSON.stringify({ kind: 'attempt', request_id: id, attempt: 1, rid: `${id}~m1~0000000000000001`, worker: w1, started_at: a0end + 5, ended_at: end, ttft_ms: 60, prompt_tokens_sent: 40 + a0tokens, replayed_tokens: a0tokens, tokens: rest, budget_before: rest, budget_after: 0, cached_tokens: 0, outcome: 'finished', error_kind: null, error: null, error_evidence: null, finish_reason: 'length', trace_id: null }));
    }
    lines.push(JSON.stringify({ kind: 'request', request_id: id, attempts: migrated ? 2 : 1, migrations: migrated ? 1 : 0, admitted: true, admission_reason: null, prompt_tokens: 40, completion_tokens: budget, cached_tokens: 0, finish_reason: 'length', outcome: 'finished', duration_ms: end - start, started_at: start, ended_at: end, stream: true, max_new_tokens: budget, error: null, trace_id: null }));
    t += 40; // 25 requests/s
    i++;
  }
  return lines.slice(0, n).join('\n') + '\n';
}

async function main(): Promise<void> {
  const browser = await chromium.launch({ headless: true, ...chromiumLaunchOptions() });
  const out: string[] = [];
  try {
    // 1. Live: 25 requests/s, about 100 in flight.
    const serve = await startServe(['--port', '0', '--sim', '3', '--traffic']);
    try {
      await fetch(`${serve.url}api/traffic`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ rate: 25, concurrency: 200 }) });
      const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
      await page.goto(serve.url);
      await page.waitForTimeout(15_000);
      const live = (await (await fetch(`${serve.url}api/live`)).json()) as { router: { totals: { in_flight: number } } };
      const inFlight = ` · ${live.router.totals.in_flight} in flight at the router`;
      out.push(line('live, Requests list, 25 req/s', await scrollFrames(page, '[data-testid=request-list]', 8000), inFlight));
      await page.getByTestId('nav-traces').click();
      await page.waitForTimeout(1000);
      out.push(line('live, Traces table, 25 req/s', await scrollFrames(page, '[data-testid=trace-table]', 8000)));
      // Three incidents on screen: each worker killed and restarted in turn, on a 1-minute axis.
      await page.getByTestId('nav-live').click();
      await page.getByTestId('waterfall-window').selectOption('60000');
      for (const index of [0, 1, 2]) {
        await fetch(`${serve.url}api/sim/${index}/kill`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
        await page.waitForTimeout(2500);
        await fetch(`${serve.url}api/sim/${index}/restart`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
        await page.waitForTimeout(2500);
      }
      const shown = await page.getByTestId('incident').count();
      out.push(line('live, Requests list, 25 req/s, incidents on screen', await scrollFrames(page, '[data-testid=request-list]', 8000), ` · ${shown} incidents listed, ${await page.getByTestId('fault-flag').count()} flags`));
      await page.close();
    } finally {
      await serve.stop();
    }

    // 2. A 100,000-row trace file opened with `baton view`.
    const dir = mkdtempSync(join(tmpdir(), 'baton-smooth-'));
    const file = join(dir, 'night.jsonl');
    writeFileSync(file, traceFile(100_000, Number(process.env.BATON_SMOOTH_INCIDENTS ?? 50)));
    const view = await startView(file);
    try {
      const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
      const began = Date.now();
      await page.goto(view.url);
      await page.getByTestId('file-info').waitFor({ timeout: 60_000 });
      const loadMs = Date.now() - began;
      await page.getByTestId('nav-traces').click();
      await page.getByTestId('trace-row').first().waitFor();
      const count = await page.getByTestId('traces-count').textContent();
      out.push(`100,000-row file: open to first paint of its views ${(loadMs / 1000).toFixed(1)} s (${count})`);
      out.push(line('file, Traces table, 100,000 rows', await scrollFrames(page, '[data-testid=trace-table]', 8000)));
      await page.getByTestId('nav-live').click();
      await page.waitForTimeout(500);
      const listed = await page.getByTestId('incident').count();
      out.push(line('file, Requests list, 100,000 rows', await scrollFrames(page, '[data-testid=request-list]', 8000), ` · ${listed} incidents listed`));
      // One incident focused: its requests on a fitted axis.
      await page.getByTestId('incident').nth(Math.floor(listed / 2)).click();
      await page.waitForTimeout(500);
      out.push(line('file, Requests list, one incident focused', await scrollFrames(page, '[data-testid=request-list]', 8000), ` · ${(await page.getByTestId('incident-summary').textContent()) ?? ''}`));
      await page.close();
    } finally {
      await view.stop();
    }
  } finally {
    await browser.close();
  }
  for (const l of out) console.log(l);
}

await main();
