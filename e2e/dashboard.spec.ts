// The dashboard end to end, in Chromium, against a real `baton serve` with three simulated
// worker processes and traffic: kill a worker, watch requests migrate, open one, export traces.
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test, type Page } from '@playwright/test';
import { startServe, type ServeProcess } from './serve-process.ts';

const SHOTS = join(import.meta.dirname, '../test-results/e2e');
let serve: ServeProcess;

test.beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  serve = await startServe(['--port', '0', '--sim', '3', '--traffic']);
});

test.afterAll(async () => {
  await serve?.stop();
});

async function shot(page: Page, name: string): Promise<void> {
  const path = join(SHOTS, `${name}.png`);
  await page.screenshot({ path });
  await test.info().attach(name, { path, contentType: 'image/png' });
}

test('a killed worker\'s requests migrate, the detail adds up, and the trace export holds them', async ({ page }) => {
  test.setTimeout(180_000);
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.goto(serve.url);

  // Three healthy simulated workers with traffic on them.
  await page.getByTestId('nav-workers').click();
  const cards = page.getByTestId('worker-card');
  await expect(cards).toHaveCount(3);
  const victim = cards.filter({ has: page.getByTestId('sim-kill') }).first();
  await expect.poll(async () => Number(await victim.getByTestId('worker-inflight').textContent()), { timeout: 30_000 }).toBeGreaterThanOrEqual(2);
  const victimId = await victim.getAttribute('data-worker-id');

  // Kill asks first.
  await victim.getByTestId('sim-kill').click();
  await expect(page.getByTestId('confirm-dialog')).toBeVisible();
  await shot(page, '1-kill-confirm');
  await page.getByTestId('confirm-ok').click();
  await expect(page.locator(`[data-testid=worker-card][data-worker-id=${victimId}]`)).toHaveAttribute('data-health', 'killed');
  await shot(page, '2-worker-killed');

  // The Requests view shows migrated requests; wait for one that has finished.
  await page.getByTestId('nav-live').click();
  await page.getByTestId('filter-migrated').check();
  const migrated = page.locator('[data-testid=request-row][data-migrations="1"]');
  await expect(migrated.first()).toBeVisible({ timeout: 30_000 });
  await expect(page.getByTestId('badge-migrated').first()).toHaveText(/migrated ×1/);
  await shot(page, '3-requests-migrating');
  const done = page.locator('[data-testid=request-row][data-migrations="1"][data-status=finished]').first();
  await expect(done).toBeVisible({ timeout: 60_000 });
  const requestId = (await done.getAttribute('data-request-id'))!;

  // Its detail: two attempts on different workers whose tokens add up to the total.
  await done.click();
  const detail = page.getByTestId('request-detail');
  await expect(detail).toHaveAttribute('data-request-id', requestId);
  const attempts = detail.getByTestId('attempt-row');
  await expect(attempts).toHaveCount(2);
  const [a0, a1] = [attempts.nth(0), attempts.nth(1)];
  const workers = [await a0.getAttribute('data-worker'), await a1.getAttribute('data-worker')];
  expect(workers[0]).not.toBe(workers[1]);
  const tokens = [Number(await a0.getAttribute('data-tokens')), Number(await a1.getAttribute('data-tokens'))];
  const total = Number(await detail.getByTestId('detail-completion-tokens').textContent());
  expect(tokens[0]! + tokens[1]!).toBe(total);
  expect(total).toBeGreaterThan(0);
  expect(Number(await a1.getAttribute('data-replayed'))).toBe(tokens[0]);

  // Its output token ids, fetched from the router: one run per attempt in its worker's colour,
  // one hand-off tag at the migration token, and as many tokens as the completion.
  const block = detail.getByTestId('output-tokens');
  await expect(block).toBeVisible({ timeout: 10_000 });
  const handoff = block.getByTestId('output-handoff');
  await expect(handoff).toHaveCount(1);
  await expect(handoff).toHaveAttribute('data-at', String(tokens[0]));
  await expect(handoff).toHaveAttribute('data-worker', workers[1]!);
  await expect(handoff).toHaveText(new RegExp(`↦ w\\d+ @ ${tokens[0]}`));
  const runs = block.getByTestId('output-run');
  const runTokens = await runs.evaluateAll((els) => els.map((el) => [el.getAttribute('data-worker'), Number(el.getAttribute('data-tokens'))]));
  expect(runTokens).toEqual([[workers[0], tokens[0]], [workers[1], tokens[1]]].filter(([, n]) => n !== 0));
  expect(await block.locator('.out-tok').count()).toBe(total);
  await detail.getByTestId('output-section').scrollIntoViewIfNeeded();
  await shot(page, '4-request-detail');

  // Traces: export JSON Lines; the file parses and holds this request's rows.
  await page.keyboard.press('Escape');
  await expect(detail).toBeHidden();
  await page.getByTestId('nav-traces').click();
  await expect(page.getByTestId('trace-row').first()).toBeVisible();
  const downloadPromise = page.waitForEvent('download');
  await page.getByTestId('export-jsonl').click();
  const download = await downloadPromise;
  expect(download.suggestedFilename()).toMatch(/\.jsonl$/);
  const file = join(SHOTS, 'traces-export.jsonl');
  await download.saveAs(file);
  await expect(page.getByTestId('export-progress')).toHaveText(/saved/);
  await shot(page, '5-traces-exported');
  const rows = readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as Record<string, unknown>);
  const mine = rows.filter((r) => r.request_id === requestId);
  expect(mine.filter((r) => r.kind === 'attempt').map((r) => [r.attempt, r.worker, r.tokens])).toEqual([
    [0, workers[0], tokens[0]],
    [1, workers[1], tokens[1]],
  ]);
  expect(mine.filter((r) => r.kind === 'request')).toEqual([expect.objectContaining({ migrations: 1, completion_tokens: total, outcome: 'finished' })]);
});

test('a lost host shows a banner with Retry, and the last picture stays', async ({ page }) => {
  test.setTimeout(120_000);
  const lone = await startServe(['--port', '0', '--sim', '1', '--no-traffic']);
  try {
    await page.goto(lone.url);
    await page.getByTestId('nav-workers').click();
    await expect(page.getByTestId('worker-card')).toHaveCount(1);
    await lone.stop();
    await expect(page.getByTestId('banner-connection')).toBeVisible({ timeout: 30_000 });
    await expect(page.getByTestId('worker-card')).toHaveCount(1);
    await page.getByTestId('banner-retry').click();
    await expect(page.getByTestId('banner-connection')).toBeVisible({ timeout: 30_000 });
    await shot(page, '6-host-lost-banner');
  } finally {
    await lone.stop();
  }
});
