// P/D end to end, in Chromium, against a real `baton serve --sim-pd` (2 prefill, 2 decode
// simulated SGLang workers) with traffic: cards say their role and a prefill server its own load;
// a prefill server killed from outside (SIGKILL) gets the incident, counting the attempts whose
// prefill leg it broke, and the decode worker is not drawn as failed; with no prefill server left
// a banner says every P/D request fails.
import { expect, test } from '@playwright/test';
import { startServe, type ServeProcess } from './serve-process.ts';
import type { SimWorkerState } from '../host/contract.ts';
import type { AttemptRow } from '../router/trace/row.ts';

let serve: ServeProcess;

test.beforeAll(async () => {
  serve = await startServe(['--port', '0', '--sim-pd', '--traffic']);
});

test.afterAll(async () => {
  await serve?.stop();
});

interface RouterWorker { id: string; url: string; pd_role?: 'prefill' | 'decode'; health: string; sim_index: number | null }

test('a prefill server killed: its incident counts the attempts it broke, the decode worker is not drawn as failed, and none left is said', async ({ page, request }) => {
  test.setTimeout(150_000);
  await page.setViewportSize({ width: 1440, height: 900 });
  expect(serve.output()).toContain('2 prefill + 2 decode workers (4 simulated)');
  expect((await request.put(`${serve.url}api/traffic`, { data: { rate: 25, concurrency: 200 } })).ok()).toBe(true);
  await page.goto(serve.url);

  const workers = async () => ((await (await request.get(`${serve.url}workers`)).json()) as { workers: RouterWorker[] }).workers;
  await expect.poll(async () => (await workers()).filter((w) => w.pd_role === 'prefill').length, { timeout: 30_000 }).toBe(2);
  const prefills = (await workers()).filter((w) => w.pd_role === 'prefill');

  // Cards say the role; a prefill card shows its own load, not the router's 0.
  await page.getByTestId('nav-workers').click();
  const card = page.locator(`[data-testid="worker-card"][data-worker-id="${prefills[0]!.id}"]`);
  await expect(card.getByTestId('worker-role')).toContainText('prefill');
  await expect(page.locator('[data-testid="worker-card"][data-role="decode"]')).toHaveCount(2);
  await expect.poll(async () => Number(await card.getByTestId('worker-prefills').textContent().then((t) => t?.split(' ')[0])), { timeout: 20_000 }).toBeGreaterThan(0);
  await page.getByTestId('nav-live').click();

  const sim = ((await (await request.get(`${serve.url}api/sim`)).json()) as { workers: SimWorkerState[] }).workers;
  const victim = prefills[0]!;
  process.kill(sim.find((s) => s.index === victim.sim_index)!.pid!, 'SIGKILL');

  // The router blames the prefill leg: `failed_leg: prefill`, the row's worker the decode worker.
  const prefillFailures = async () => ((await (await request.get(`${serve.url}traces?kind=attempt&outcome=failed`)).text()).trim().split('\n').filter(Boolean)
    .map((l) => JSON.parse(l) as AttemptRow).filter((r) => r.prefill_worker === victim.url && r.failed_leg === 'prefill'));
  await expect.poll(async () => (await prefillFailures()).length, { timeout: 20_000 }).toBeGreaterThan(0);
  const failed = (await prefillFailures())[0]!;

  // The incident is the prefill server's, and counts what it broke.
  const chip = page.locator(`[data-testid="incident"][data-incident^="${victim.url}@"]`).first();
  await expect(chip).toBeVisible({ timeout: 10_000 });
  await expect(page.locator(`[data-testid="incident"][data-incident^="${failed.worker}@"]`)).toHaveCount(0);
  await chip.click();
  await expect(page.getByTestId('incident-summary')).toHaveText(/^[1-9]\d* broken · \d+ migrated/);

  // Its attempt is drawn broken on the prefill strip, not on the decode worker's bar.
  await page.getByTestId('search').fill(failed.request_id);
  const bar = page.locator(`[data-testid="request-row"][data-request-id="${failed.request_id}"] [data-testid="attempt-bar"][data-attempt="${failed.attempt}"]`);
  await expect(bar).toHaveAttribute('data-blamed', victim.url);
  await expect(bar).not.toHaveClass(/\bbroken\b/);
  await expect(bar.locator('[data-testid="prefill-leg"]')).toHaveClass(/\bbroken\b/);
  await page.getByTestId('search').fill('');
  await page.getByTestId('incident-clear').click();

  // No prefill server left: the banner says so while the decode cards still read healthy.
  const other = prefills[1]!;
  process.kill(sim.find((s) => s.index === other.sim_index)!.pid!, 'SIGKILL');
  await expect(page.locator('[data-testid="banner-pd"][data-role="prefill"]')).toBeVisible({ timeout: 20_000 });
});
