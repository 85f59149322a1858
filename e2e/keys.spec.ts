// Keys and the smaller hints, in Chromium against `baton serve --sim 2 --traffic`: view keys, the
// `?` list, no key acting while typing, the Kill hint, the kill dialog's stream count, the dead
// card's signal, and `n` focusing the incident.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from '@playwright/test';
import { startServe, type ServeProcess } from './serve-process.ts';

process.env.BATON_PREFS_FILE = join(mkdtempSync(join(tmpdir(), 'baton-e2e-keys-')), 'prefs.json');
let serve: ServeProcess;

test.beforeAll(async () => {
  serve = await startServe(['--port', '0', '--sim', '2', '--traffic']);
});

test.afterAll(async () => {
  await serve?.stop();
});

test('keys switch views, ? lists them, typing is not a command; Kill is hinted, counted and its signal shown; n focuses the incident', async ({ page }) => {
  await page.goto(serve.url);
  await expect(page.getByTestId('kill-hint')).toContainText('Workers');
  await page.keyboard.press('2');
  await expect(page.getByTestId('nav-workers')).toHaveAttribute('aria-current', 'page');
  await page.keyboard.press('c');
  await expect(page.getByTestId('nav-charts')).toHaveAttribute('aria-current', 'page');
  await page.keyboard.press('?');
  await expect(page.getByTestId('key-help')).toContainText('next / previous incident');
  await page.keyboard.press('Escape');
  await expect(page.getByTestId('key-help')).toHaveCount(0);
  await page.keyboard.press('1');
  await expect(page.getByTestId('nav-live')).toHaveAttribute('aria-current', 'page');
  await page.keyboard.press('/');
  await page.keyboard.type('2wc');
  await expect(page.getByTestId('nav-live')).toHaveAttribute('aria-current', 'page');
  await page.locator('#request-search').fill('');
  await page.locator('#request-search').blur();

  await page.keyboard.press('w');
  const card = page.getByTestId('worker-card').first();
  await expect(card.getByTestId('worker-inflight')).not.toHaveText('0', { timeout: 20_000 });
  await card.getByTestId('sim-kill').click();
  await expect(page.getByTestId('confirm-dialog')).toContainText(/in flight there break/);
  await page.getByTestId('confirm-ok').click();
  await expect(card.getByTestId('worker-health')).toContainText('killed (SIGKILL)');

  await page.keyboard.press('l');
  // The kill's flag on the axis: the mark that opened the incident has reached the page, and it
  // keys the incident's id from now on (`<worker>@<the mark's time>`), whatever rows arrive.
  await expect(page.locator('[data-testid="fault-flag"][data-kinds~="kill"]').first()).toBeVisible({ timeout: 15_000 });
  const chip = page.getByTestId('incident').first();
  await expect(chip).toBeVisible({ timeout: 15_000 });
  const id = (await chip.getAttribute('data-incident'))!;
  await page.keyboard.press('w');
  await page.keyboard.press('n');
  await expect(page.getByTestId('nav-live')).toHaveAttribute('aria-current', 'page');
  await expect(page.getByTestId('incident-focus')).toHaveAttribute('data-incident', id);
  // Rows keep arriving (the attempts the kill broke end, their continuations finish): the focused
  // incident keeps its id, and its chip stays the active one.
  await page.waitForTimeout(3000);
  await expect(page.getByTestId('incident-focus')).toHaveAttribute('data-incident', id);
  await expect(page.locator(`[data-testid="incident"][data-incident="${id}"]`)).toHaveClass(/\bactive\b/);
});
