// The dashboard end to end, in Chromium, against a real `baton serve` with three simulated
// worker processes and traffic: true figures from the router, a kill marked on the waterfall and
// the charts, a migrated request still inspectable from Traces once the page has let it go
// (rebuilt from its rows), the same detail from the exported file opened with `baton view`,
// errors readable at 1024 px, and a stopped or replaced server.
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test, type Locator, type Page } from '@playwright/test';
import { startServe, startView, type ServeProcess } from './serve-process.ts';

const SHOTS = join(import.meta.dirname, '../test-results/e2e');
/** Where the screenshots for docs/dashboard.md go when BATON_DOC_SHOTS=1. */
const DOC_SHOTS = join(import.meta.dirname, '../docs/images');
let serve: ServeProcess;

test.beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  serve = await startServe(['--port', '0', '--sim', '3', '--traffic']);
});

test.afterAll(async () => {
  await serve?.stop();
});

async function shot(page: Page, name: string, doc?: string): Promise<void> {
  const path = join(SHOTS, `${name}.png`);
  await page.screenshot({ path });
  await test.info().attach(name, { path, contentType: 'image/png' });
  if (doc && process.env.BATON_DOC_SHOTS === '1') await page.screenshot({ path: join(DOC_SHOTS, `${doc}.png`) });
}

interface AttemptFigures { worker: string | null; tokens: number; replayed: number }

async function attemptsOf(detail: Locator): Promise<AttemptFigures[]> {
  return detail.getByTestId('attempt-row').evaluateAll((els) => els.map((el) => ({
    worker: el.getAttribute('data-worker'), tokens: Number(el.getAttribute('data-tokens')), replayed: Number(el.getAttribute('data-replayed')),
  })));
}

/** An element's text is shown whole: not cut by its box, and inside the window's width. */
async function readable(el: Locator, width: number): Promise<void> {
  await expect(el).toBeVisible();
  const box = (await el.boundingBox())!;
  expect(box.x).toBeGreaterThanOrEqual(0);
  expect(box.x + box.width).toBeLessThanOrEqual(width);
  const clipped = await el.evaluate((node) => {
    const all = [node, ...node.querySelectorAll('*')] as HTMLElement[];
    return all.some((n) => n.scrollWidth > n.clientWidth + 1 && getComputedStyle(n).overflowX !== 'visible');
  });
  expect(clipped).toBe(false);
}

test('true figures, a kill marked everywhere, and a migrated request still inspectable from its rows, live and in its exported file', async ({ page, request }) => {
  test.setTimeout(150_000);
  await page.setViewportSize({ width: 1440, height: 900 });
  // 25 requests/s, about 100 in flight over the three workers.
  expect((await request.put(`${serve.url}api/traffic`, { data: { rate: 25, concurrency: 200 } })).ok()).toBe(true);
  // The page keeps few finished requests, so a request leaves its list within seconds rather
  // than after minutes of traffic (the default is 2,000, and 2,000 migrated or failed).
  await page.goto(`${serve.url}?keep=60&keepNotable=3`);

  // A worker card's in flight is the router's own figure (within 10 %), not the page's guess.
  await page.getByTestId('nav-workers').click();
  const cards = page.getByTestId('worker-card');
  await expect(cards).toHaveCount(3);
  const victim = cards.first();
  const victimId = (await victim.getAttribute('data-worker-id'))!;
  await expect.poll(async () => Number(await victim.getByTestId('worker-inflight').textContent()), { timeout: 30_000 }).toBeGreaterThanOrEqual(25);
  const gaps: number[] = [];
  for (let i = 0; i < 7; i++) {
    const shown = Number(await victim.getByTestId('worker-inflight').textContent());
    const routers = (await (await request.get(`${serve.url}workers`)).json()) as { workers: { id: string; in_flight: number }[] };
    const truth = routers.workers.find((w) => w.id === victimId)!.in_flight;
    gaps.push(Math.abs(shown - truth) / Math.max(truth, 1));
    await page.waitForTimeout(300);
  }
  gaps.sort((a, b) => a - b);
  expect(gaps[3], `relative gaps ${gaps.join(', ')}`).toBeLessThanOrEqual(0.1);
  await shot(page, '1-workers-under-load', 'dashboard-workers');

  // Kill asks first; the card turns red at once.
  await victim.getByTestId('sim-kill').click();
  await expect(page.getByTestId('confirm-dialog')).toBeVisible();
  await page.getByTestId('confirm-ok').click();
  await expect(page.locator(`[data-testid=worker-card][data-worker-id=${victimId}]`)).toHaveAttribute('data-health', /killed/);
  await expect(page.locator(`[data-testid=worker-card][data-worker-id=${victimId}] [data-testid=worker-probe-error]`)).toContainText(/ECONNREFUSED/, { timeout: 15_000 });
  await shot(page, '2-worker-killed');

  // The kill crosses the waterfall: a line over the rows and a flag on the time axis.
  await page.getByTestId('nav-live').click();
  await expect(page.locator('[data-testid=fault-line][data-kind=kill]')).toHaveCount(1);
  await expect(page.getByTestId('fault-flag').first()).toContainText(`kill ${victimId}`);
  await page.getByTestId('filter-migrated').check();
  const first = page.locator('[data-testid=request-row][data-migrations="1"][data-status=finished]').first();
  await expect(first).toBeVisible({ timeout: 30_000 });
  await shot(page, '3-requests-kill-marked', 'dashboard-requests');

  // Its detail: two attempts on different workers whose tokens add up, the error in full with
  // what it was read from, and its output tokens with one hand-off at the migration token.
  // The list keeps moving (a screenshot can outlast a row under load): open whichever migrated
  // row is first when clicked, and take its id from the detail it opened.
  await first.click();
  const detail = page.getByTestId('request-detail');
  await expect(detail).toHaveAttribute('data-request-id', /.+/);
  const requestId = (await detail.getAttribute('data-request-id'))!;
  // (With 3 migrated requests kept, it may already have left the list: the detail is the same.)
  const live = await attemptsOf(detail);
  expect(live).toHaveLength(2);
  expect(live[0]!.worker).not.toBe(live[1]!.worker);
  const total = Number(await detail.getByTestId('detail-completion-tokens').textContent());
  expect(live[0]!.tokens + live[1]!.tokens).toBe(total);
  expect(live[1]!.replayed).toBe(live[0]!.tokens);
  await expect(detail.getByTestId('attempt-error')).toContainText(/stream_broken|connect/);
  await expect(detail.getByTestId('attempt-error')).toContainText('read from:');
  const block = detail.getByTestId('output-tokens');
  await expect(block).toBeVisible({ timeout: 10_000 });
  await expect(block.getByTestId('output-handoff')).toHaveAttribute('data-at', String(live[0]!.tokens));
  expect(await block.locator('.out-tok').count()).toBe(total);
  await expect(detail.getByTestId('detail-trace-json')).toContainText('"started_at_iso"');
  await detail.getByTestId('copy-curl').click();
  await expect(page.getByTestId('toast')).toContainText(/curl command copied/);
  await page.getByTestId('toast').click();
  await shot(page, '4-request-detail', 'dashboard-migration');
  // Hover cards: styled, with absolute times and the evidence, and a Copy button.
  await detail.locator('[data-testid=attempt-bar][data-attempt="0"]').hover();
  const card = page.getByTestId('hover-card');
  await expect(card).toContainText('evidence');
  await expect(card).toContainText(/\d{4}-\d{2}-\d{2}T/);
  await expect(card.getByTestId('hover-card-copy')).toBeVisible();
  await shot(page, '4b-hover-card', 'dashboard-hover-card');
  await page.mouse.move(5, 5);
  if (process.env.BATON_DOC_SHOTS === '1') {
    // The same screen in the dark theme, on a wide screen.
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.setViewportSize({ width: 2560, height: 1300 });
    await shot(page, '4c-dark-2560', 'dashboard-dark-2560');
    await page.emulateMedia({ colorScheme: 'light' });
    await page.setViewportSize({ width: 1440, height: 900 });
  }

  // Errors stay readable at 1024 px: in the attempts table, and in Traces.
  await page.setViewportSize({ width: 1024, height: 768 });
  await detail.getByTestId('attempt-error').scrollIntoViewIfNeeded();
  await readable(detail.getByTestId('attempt-error'), 1024);
  await shot(page, '5-error-1024', 'dashboard-1024');
  await page.keyboard.press('Escape');
  await expect(detail).toBeHidden();
  await page.getByTestId('nav-traces').click();
  await page.getByTestId('trace-filter-outcome').selectOption('failed');
  const traceError = page.locator('[data-testid=trace-row][data-kind=attempt] [data-testid=trace-error]').first();
  await readable(traceError, 1024);
  await shot(page, '6-traces-errors-1024');
  await page.getByTestId('trace-filter-outcome').selectOption('');
  await page.setViewportSize({ width: 1440, height: 900 });

  // The kill on every chart.
  await page.getByTestId('nav-charts').click();
  for (const chart of ['chart-tokens', 'chart-requests', 'chart-ttft', 'chart-failures']) {
    await expect(page.getByTestId(chart).locator('.recharts-reference-line').first()).toBeAttached({ timeout: 10_000 });
  }
  await expect(page.getByTestId('chart-fault').filter({ hasText: `kill ${victimId}` })).toHaveCount(1);
  await shot(page, '7-charts-kill-marked', 'dashboard-charts');

  // A hung worker's streams stop: the stretch since their last token is hatched, not drawn as generation.
  await page.getByTestId('nav-workers').click();
  const hung = cards.nth(1);
  await hung.getByTestId('sim-hang').click();
  await page.getByTestId('confirm-ok').click();
  await page.getByTestId('nav-live').click();
  await page.getByTestId('filter-migrated').uncheck();
  const stalled = page.locator('[data-testid=request-row][data-status=running]', { has: page.getByTestId('stall') }).first();
  await expect(stalled).toBeVisible({ timeout: 10_000 });
  const stalledId = (await stalled.getAttribute('data-request-id'))!;
  await page.getByTestId('search').fill(stalledId.slice(0, 12));
  await page.waitForTimeout(1500);
  await page.locator(`[data-testid=request-row][data-request-id="${stalledId}"]`).click();
  await expect(detail.locator('[data-testid=attempt-bar][data-outcome=running] [data-testid=stall]')).toBeVisible();
  await shot(page, '7b-hang-stall-hatched', 'dashboard-stall');
  await page.getByTestId('detail-close').click();
  await page.getByTestId('search').fill('');
  await page.getByTestId('nav-workers').click();
  await hung.getByTestId('sim-clear').click();

  // More incidents follow (the same worker's connections reset): requests that came after ours
  // migrate too, and the page, which keeps 3 migrated or failed requests, lets ours go ...
  await hung.getByTestId('sim-reset').click();
  await page.getByTestId('confirm-ok').click();
  await page.getByTestId('nav-live').click();
  await page.getByTestId('filter-migrated').check();
  await expect(page.locator(`[data-testid=request-row][data-request-id="${requestId}"]`)).toHaveCount(0, { timeout: 60_000 });
  // ... and it still opens from Traces, rebuilt from its trace rows, with the same attempts, and its tokens.
  await page.getByTestId('nav-traces').click();
  await page.getByTestId('trace-filter-request').fill(requestId.slice(0, 12));
  await expect(page.locator(`[data-testid=trace-row][data-request-id="${requestId}"]`)).toHaveCount(3);
  await page.locator(`[data-testid=trace-row][data-request-id="${requestId}"]`).first().click();
  await expect(detail).toHaveAttribute('data-request-id', requestId);
  await expect(detail).toHaveAttribute('data-source', 'page-rows');
  await expect(detail.getByTestId('detail-rebuilt')).toBeVisible();
  expect(await attemptsOf(detail)).toEqual(live);
  await expect(detail.getByTestId('detail-completion-tokens')).toHaveText(String(total));
  await expect(detail.getByTestId('output-tokens').getByTestId('output-handoff')).toHaveAttribute('data-at', String(live[0]!.tokens), { timeout: 10_000 });
  await shot(page, '8-rebuilt-from-rows', 'dashboard-rebuilt');

  // Export JSON Lines (ISO times next to epoch ms) with the id prefix ...
  const downloadPromise = page.waitForEvent('download');
  await page.getByTestId('export-jsonl').click();
  const download = await downloadPromise;
  expect(download.suggestedFilename()).toMatch(/\.jsonl$/);
  const file = join(SHOTS, 'traces-export.jsonl');
  await download.saveAs(file);
  await expect(page.getByTestId('export-progress')).toHaveText(/saved/);
  const lines = readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as Record<string, unknown>);
  // The last line is the file's context record (workers, colours, markers: e2e/exports.spec.ts).
  expect(lines.at(-1)!.kind).toBe('baton_context');
  const rows = lines.slice(0, -1);
  expect(rows.every((r) => String(r.request_id).startsWith(requestId.slice(0, 12)))).toBe(true);
  expect(rows.filter((r) => r.request_id === requestId && r.kind === 'attempt').map((r) => [r.worker, r.tokens])).toEqual(live.map((a) => [a.worker, a.tokens]));
  expect(rows[0]!.started_at_iso).toBe(new Date(rows[0]!.started_at as number).toISOString());

  // ... and open the file offline: the same request detail, no router, no live-only controls.
  const view = await startView(file);
  try {
    const offline = await page.context().newPage();
    await offline.setViewportSize({ width: 1440, height: 900 });
    await offline.goto(view.url);
    await expect(offline.getByTestId('file-info')).toContainText('traces-export.jsonl');
    await expect(offline.getByTestId('nav-traffic')).toHaveCount(0);
    await offline.getByTestId('nav-traces').click();
    await offline.locator(`[data-testid=trace-row][data-request-id="${requestId}"]`).first().click();
    const fromFile = offline.getByTestId('request-detail');
    await expect(fromFile).toHaveAttribute('data-request-id', requestId);
    expect(await attemptsOf(fromFile)).toEqual(live);
    await expect(fromFile.getByTestId('detail-completion-tokens')).toHaveText(String(total));
    await expect(fromFile.getByTestId('detail-migrations')).toHaveText('1');
    await expect(fromFile.getByTestId('copy-curl')).toHaveCount(0);
    await shot(offline, '9-baton-view', 'dashboard-view');
    await offline.getByTestId('nav-workers').click();
    await expect(offline.getByTestId('sim-kill')).toHaveCount(0);
    await expect(offline.getByTestId('worker-drain')).toHaveCount(0);
    await offline.close();
  } finally {
    await view.stop();
  }
});

test('a stopped server freezes the picture and disables the actions; another router answering resets the view', async ({ page, request }) => {
  test.setTimeout(120_000);
  const lone = await startServe(['--port', '0', '--sim', '1', '--no-traffic', '--token-interval-ms', '40']);
  const port = new URL(lone.url).port;
  let next: ServeProcess | null = null;
  try {
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.goto(lone.url);
    await expect(page.getByTestId('requests-empty')).toContainText('curl');
    // Long streams of our own, so that requests are in flight when the server goes.
    for (let i = 0; i < 6; i++) {
      void request.post(`${lone.url}generate`, { data: { input_ids: [1, 2, 3, 4 + i], sampling_params: { max_new_tokens: 2000, temperature: 0, ignore_eos: true }, stream: true }, timeout: 60_000 }).catch(() => undefined);
    }
    const running = page.locator('[data-testid=request-row][data-status=running]');
    await expect(running).toHaveCount(6, { timeout: 20_000 });
    await page.waitForTimeout(1500);

    await lone.stop();
    await expect(page.getByTestId('banner-connection')).toBeVisible({ timeout: 30_000 });
    await expect(page.getByTestId('banner-connection')).toContainText('frozen');
    // The bars stop growing: the same width two seconds apart.
    const bar = running.first().getByTestId('attempt-bar');
    const before = (await bar.boundingBox())!;
    const inflight = await page.getByTestId('strip-inflight').textContent();
    await page.waitForTimeout(2000);
    expect((await bar.boundingBox())!.width).toBeCloseTo(before.width, 1);
    expect(await page.getByTestId('strip-inflight').textContent()).toBe(inflight);
    await expect(running).toHaveCount(6);
    await shot(page, '10-host-lost-frozen', 'dashboard-lost');

    // The actions are disabled, not left to fail with "Failed to fetch".
    await page.getByTestId('nav-workers').click();
    await expect(page.getByTestId('worker-card')).toHaveCount(1);
    for (const id of ['sim-kill', 'sim-hang', 'worker-drain', 'worker-remove', 'add-worker-submit']) await expect(page.getByTestId(id)).toBeDisabled();
    await page.getByTestId('nav-traffic').click();
    await expect(page.getByTestId('traffic-empty')).toBeVisible();

    // A new router on the same port: the page notices another instance and starts over.
    next = await startServe(['--port', port, '--sim', '1', '--no-traffic']);
    await expect(page.getByTestId('banner-notice')).toContainText('Another router answered', { timeout: 30_000 });
    await expect(page.getByTestId('banner-connection')).toBeHidden();
    await page.getByTestId('nav-live').click();
    await expect(page.getByTestId('request-row')).toHaveCount(0);
    await page.getByTestId('nav-workers').click();
    await expect(page.getByTestId('sim-kill')).toBeEnabled();
  } finally {
    await lone.stop();
    await next?.stop();
  }
});
