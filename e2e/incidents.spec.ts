// Incidents end to end, in Chromium, against a real `baton serve --sim 3 --sim-format mixed`
// (two SGLang workers, one vLLM) with traffic in both formats: the vLLM worker is killed with
// SIGKILL from outside the dashboard. The router's first blame marks it down within a second of
// the first broken stream; requests of its format fail and say why on their row (the words their
// client got); the Workers view warns that no healthy worker serves vllm; and six minutes later
// (the page's clock moved on, as Playwright's clock compresses it) the incident is still one click
// away: the axis fits it, the list holds its requests and counts them.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test, type Page } from '@playwright/test';
import { startServe, type ServeProcess } from './serve-process.ts';
import type { FaultMark, SimWorkerState } from '../host/contract.ts';
import type { AttemptRow } from '../router/trace/row.ts';

const SHOTS = join(import.meta.dirname, '../test-results/e2e');
let serve: ServeProcess;

test.beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  serve = await startServe(['--port', '0', '--sim', '3', '--sim-format', 'mixed', '--traffic']);
});

test.afterAll(async () => {
  await serve?.stop();
});

async function shot(page: Page, name: string): Promise<void> {
  const path = join(SHOTS, `${name}.png`);
  await page.screenshot({ path });
  await test.info().attach(name, { path, contentType: 'image/png' });
}

interface RouterWorker { id: string; url: string; format: string | null; in_flight: number; sim_index: number | null }

test('an external kill -9 of the only vLLM worker: marked at the first broken stream, failures explained, the incident one click away after 6 minutes', async ({ page, request }) => {
  test.setTimeout(150_000);
  await page.setViewportSize({ width: 1440, height: 900 });
  expect((await request.put(`${serve.url}api/traffic`, { data: { rate: 25, concurrency: 200 } })).ok()).toBe(true);
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  // The page's clock is Playwright's, so that six minutes can pass in a moment.
  await page.clock.install();
  await page.goto(serve.url);

  const workers = async () => ((await (await request.get(`${serve.url}workers`)).json()) as { workers: RouterWorker[] }).workers;
  await expect.poll(async () => (await workers()).find((w) => w.format === 'vllm')?.in_flight ?? 0, { timeout: 30_000 }).toBeGreaterThanOrEqual(3);
  const victim = (await workers()).find((w) => w.format === 'vllm')!;
  const sim = ((await (await request.get(`${serve.url}api/sim`)).json()) as { workers: SimWorkerState[] }).workers;
  const pid = sim.find((s) => s.index === victim.sim_index)!.pid!;

  // Outside the dashboard: no action mark, only what the router sees.
  process.kill(pid, 'SIGKILL');
  const downMark = async () => ((await (await request.get(`${serve.url}api/live`)).json()) as { faults: FaultMark[] }).faults.find((m) => m.kind === 'down' && m.worker === victim.id);
  await expect.poll(async () => (await downMark()) !== undefined, { timeout: 15_000 }).toBe(true);
  const rows = (await (await request.get(`${serve.url}traces?kind=attempt&worker=${encodeURIComponent(victim.url)}&outcome=failed`)).text()).trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as AttemptRow);
  const broken = rows.filter((r) => r.error_kind === 'stream_broken' || r.error_kind === 'connect').sort((a, b) => a.ended_at - b.ended_at);
  expect(broken.length).toBeGreaterThan(0);
  const mark = (await downMark())!;
  // Marked at the router's first blame, within a second of the first broken stream (not at the next health check).
  expect(Math.abs(mark.t - broken[0]!.ended_at), `mark ${mark.t} (${mark.detail}), first broken ${broken[0]!.ended_at}`).toBeLessThanOrEqual(1000);
  expect(mark.detail).toBe('benched');
  await expect.poll(async () => (await downMark())?.evidence ?? null, { timeout: 5_000 }).toMatch(/^(stream_broken|connect): /);

  // The flag is on the waterfall at once, with what the router read.
  await expect(page.locator('[data-testid="fault-flag"][data-kinds~="down"]').first()).toBeVisible({ timeout: 10_000 });

  // Requests of its format now fail, and their row says with what words.
  await page.getByTestId('filter-failed').check();
  const noWorker = page.locator('[data-testid="request-row"]', { has: page.locator('[data-testid="badge-failed"][data-reason="no_worker"]') }).first();
  await expect(noWorker).toBeVisible({ timeout: 20_000 });
  await expect(noWorker.getByTestId('failure-reason')).toHaveText('no_worker: no healthy worker serves format vllm');
  await noWorker.click();
  await expect(page.getByTestId('request-detail'), errors.join('\n')).toBeVisible();
  await expect(page.getByTestId('detail-client-error')).toContainText('HTTP 503: no_worker: no healthy worker serves format vllm');
  await shot(page, 'incident-1-no-worker-row');
  await page.keyboard.press('Escape');
  await page.getByTestId('filter-failed').uncheck();

  await page.getByTestId('nav-workers').click();
  await expect(page.locator('[data-testid="coverage-warning"][data-what="format vllm"]')).toBeVisible({ timeout: 10_000 });
  await page.getByTestId('nav-live').click();

  const chip = page.locator(`[data-testid="incident"][data-incident^="${victim.url}@"]`).first();
  await expect(chip).toBeVisible({ timeout: 10_000 });
  const incidentId = (await chip.getAttribute('data-incident'))!;

  // Six minutes later: the live window (15 s, or 5 min at most) has long left the incident behind.
  await page.clock.fastForward('06:00');
  await expect(page.locator('[data-testid="fault-flag"][data-kinds~="down"]')).toHaveCount(0, { timeout: 10_000 });
  await page.locator(`[data-testid="incident"][data-incident="${incidentId}"]`).click();
  const summary = page.getByTestId('incident-summary');
  await expect(summary).toHaveText(/^\d+ broken · \d+ migrated · \d+ failed/);
  const text = (await summary.textContent())!;
  const brokenShown = Number(/^(\d+) broken/.exec(text)![1]);
  expect(brokenShown).toBeGreaterThanOrEqual(broken.length);
  // The list holds the incident's requests, on an axis fitted to them: a broken stream's bar is in view.
  await expect(page.getByTestId('axis-note')).toHaveText('incident');
  await expect.poll(async () => page.getByTestId('request-row').count()).toBeGreaterThan(0);
  // The README's picture and docs/dashboard.md's incident, refreshed with BATON_DOC_SHOTS=1.
  if (process.env.BATON_DOC_SHOTS === '1') await page.screenshot({ path: join(import.meta.dirname, '../docs/images/dashboard-incident.png') });
  await page.getByTestId('search').fill(broken[0]!.request_id);
  const bar = page.locator(`[data-testid="request-row"][data-request-id="${broken[0]!.request_id}"] [data-testid="attempt-bar"][data-worker="${victim.url}"]`);
  await expect(bar).toBeVisible();
  const box = (await bar.boundingBox())!;
  const axis = (await page.getByTestId('list-axis').boundingBox())!;
  expect(box.width).toBeGreaterThan(0);
  expect(box.x).toBeGreaterThanOrEqual(axis.x - 1);
  expect(box.x + box.width).toBeLessThanOrEqual(axis.x + axis.width + 1);
  await page.getByTestId('search').fill('');
  // The down flag is back on the fitted axis; clicking it focuses the same incident.
  const flag = page.locator('[data-testid="fault-flag"][data-kinds~="down"]').first();
  await expect(flag).toBeVisible();
  await flag.click();
  await expect(page.getByTestId('incident-focus')).toHaveAttribute('data-incident', incidentId);
  await page.getByTestId('incident-clear').click();
  await expect(page.getByTestId('axis-note')).toHaveText('live');
  await shot(page, 'incident-2-after-6-minutes');
});
