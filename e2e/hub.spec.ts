// The dashboard over several routers, end to end: three `baton router` processes on one
// simulated cluster behind `baton serve --router ... --router ... --router ...` (host/hub/), in
// Chromium. Requests of every router on one list (keyed by router), the routers' strip and the
// worker matrix; a router SIGKILLed shows lost, and back when it is started again on its port.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from '@playwright/test';
import { startCluster, type SimCluster } from '../sim/cluster.ts';
import { spawnRouter, stopProc } from '../bench/hub.ts';
import { startServe, type ServeProcess } from './serve-process.ts';

const SHOTS = join(import.meta.dirname, '../test-results/e2e');
let cluster: SimCluster | null = null;
const routers: Awaited<ReturnType<typeof spawnRouter>>[] = [];
let serve: ServeProcess | null = null;

test.beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  cluster = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 20 });
  const workers = cluster.workers().map((w) => w.url);
  for (let i = 0; i < 3; i++) routers.push(await spawnRouter(workers));
  serve = await startServe(['--port', '0', ...routers.flatMap((r) => ['--router', r.url])]);
});

test.afterAll(async () => {
  await serve?.stop();
  await Promise.all(routers.map((r) => stopProc(r.proc)));
  await cluster?.stop();
});

async function send(url: string, n: number): Promise<void> {
  await Promise.all(Array.from({ length: n }, (_, i) => fetch(`${url}/generate`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ input_ids: [1, 2, 3, i], sampling_params: { max_new_tokens: 8, temperature: 0, ignore_eos: true }, stream: true }),
  }).then((r) => r.text())));
}

test('three routers merged on one page; one lost, then back', async ({ page }) => {
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.goto(serve!.url);
  for (const r of routers) await send(r.url, 4);

  // Every router's requests on the one list, keyed by router.
  for (const label of ['r0', 'r1', 'r2']) await expect(page.locator(`[data-testid="request-row"][data-request-id^="${label}/"]`).first()).toBeVisible({ timeout: 15_000 });
  // The router is a column and a filter, not part of the id the row and the copy show; the header
  // names the page's address as the hub (clients send to the routers).
  const row = page.locator('[data-testid="request-row"][data-request-id^="r1/"]').first();
  const pageId = (await row.getAttribute('data-request-id'))!;
  await expect(row.getByTestId('request-router')).toHaveText('r1');
  await expect(row.locator('.req-id')).toHaveText(pageId.slice('r1/'.length));
  await page.getByTestId('filter-router').selectOption('r2');
  await expect(page.locator('[data-testid="request-row"][data-request-id^="r1/"]')).toHaveCount(0);
  await expect(page.locator('[data-testid="request-row"][data-request-id^="r2/"]').first()).toBeVisible();
  await page.getByTestId('filter-router').selectOption('');
  await expect(page.getByTestId('host-kind')).toContainText(`hub ${serve!.url.replace(/\/$/, '')}`);
  await row.click();
  await expect(page.getByTestId('copy-id')).toHaveAttribute('data-copy', pageId.slice('r1/'.length));
  await page.getByTestId('detail-close').click();

  // Traces the same way: the router's column and filter, the client's id in the id column.
  await page.getByTestId('nav-traces').click();
  const traceRow = page.locator('[data-testid="trace-row"][data-request-id^="r1/"]').first();
  await expect(traceRow).toBeVisible({ timeout: 10_000 });
  const traceId = (await traceRow.getAttribute('data-request-id'))!;
  await expect(traceRow.getByTestId('trace-router')).toHaveText('r1');
  await expect(traceRow.getByTestId('trace-id')).toHaveText(traceId.slice('r1/'.length));
  await page.getByTestId('trace-filter-router').selectOption('r2');
  await expect(page.locator('[data-testid="trace-row"][data-request-id^="r1/"]')).toHaveCount(0);
  await expect(page.locator('[data-testid="trace-row"][data-request-id^="r2/"]').first()).toBeVisible();
  await page.screenshot({ path: join(SHOTS, 'hub-traces.png') });
  if (process.env.BATON_DOC_SHOTS === '1') await page.screenshot({ path: join(import.meta.dirname, '../docs/images/dashboard-hub-traces.png') });
  await page.getByTestId('trace-filter-router').selectOption('');

  await page.getByTestId('nav-workers').click();
  const strip = page.getByTestId('router-strip');
  await expect(strip.getByTestId('router-row')).toHaveCount(3);
  for (const label of ['r0', 'r1', 'r2']) await expect(strip.locator(`[data-label="${label}"]`)).toHaveAttribute('data-state', 'connected', { timeout: 10_000 });
  await expect(strip.getByTestId('router-gaps')).toHaveText(['0', '0', '0']);
  const health = page.getByTestId('worker-matrix').getByTestId('matrix-health');
  await expect(health).toHaveText(['healthy on 3 of 3', 'healthy on 3 of 3'], { timeout: 10_000 });
  await page.screenshot({ path: join(SHOTS, 'hub-3-routers.png') });

  // SIGKILL r1: the page shows it lost (the hub within 2 s, the page's poll on top), the matrix
  // counts it, named, and its column says so.
  const victim = routers[1]!;
  victim.proc.kill('SIGKILL');
  await expect(strip.locator('[data-label="r1"]')).toHaveAttribute('data-state', 'lost', { timeout: 3500 });
  await expect(health).toHaveText(['healthy on 2 of 3 (r1 lost)', 'healthy on 2 of 3 (r1 lost)']);
  await expect(page.getByTestId('worker-matrix').getByTestId('matrix-lost')).toHaveCount(2);
  await page.screenshot({ path: join(SHOTS, 'hub-router-lost.png') });

  // Started again on its port: back.
  routers[1] = await spawnRouter(cluster!.workers().map((w) => w.url), victim.port);
  await expect(strip.locator('[data-label="r1"]')).toHaveAttribute('data-state', 'connected', { timeout: 10_000 });
  await expect(health).toHaveText(['healthy on 3 of 3', 'healthy on 3 of 3'], { timeout: 10_000 });
  await send(routers[1]!.url, 2);
  await page.getByTestId('nav-live').click();
  await expect(page.locator('[data-testid="request-row"][data-request-id^="r1/"]').first()).toBeVisible();
  await page.screenshot({ path: join(SHOTS, 'hub-router-back.png') });
});

// `baton serve --replicas 2`: the embedded default with its router as two replicas, the page on
// the hub over them; a simulated worker's card keeps its fault buttons, and a kill is marked.
test('serve --replicas 2: both replicas on the strip, a simulated worker killed from its card', async ({ page, context }) => {
  const replicated = await startServe(['--replicas', '2', '--port', '0', '--sim', '2']);
  try {
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: replicated.url });
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(replicated.url);
    for (const label of ['r0', 'r1']) await expect(page.locator(`[data-testid="request-row"][data-request-id^="${label}/"]`).first()).toBeVisible({ timeout: 15_000 });

    // Copy id and copy as curl give the ids the router and the client know, not the hub's
    // `r1/...`: the copied command runs against the replicas' port, and the router answers it
    // under the client's replay id (found by the search, which matches the client's id).
    await page.locator('[data-testid="request-row"][data-status="finished"]').first().click();
    const detail = page.getByTestId('request-detail');
    const pageId = (await detail.getAttribute('data-request-id'))!;
    const clientId = pageId.slice(pageId.indexOf('/') + 1);
    expect(pageId).toMatch(/^r[01]\//);
    await expect(detail.getByTestId('copy-id')).toHaveAttribute('data-copy', clientId);
    await detail.getByTestId('copy-curl').click();
    await expect(page.getByTestId('toast')).toContainText(`${clientId}-replay-1`);
    const cmd = await page.evaluate(() => navigator.clipboard.readText());
    expect(cmd).toContain(`x-request-id: ${clientId}-replay-1`);
    expect(cmd).not.toContain(`${pageId}-replay-1`);
    execFileSync('bash', ['-c', `timeout 60 ${cmd}`], { encoding: 'utf8' });
    await page.getByTestId('detail-close').click();
    await page.getByTestId('search').fill(`${clientId}-replay`);
    await expect(page.locator(`[data-testid="request-row"][data-request-id$="/${clientId}-replay-1"]`)).toHaveCount(1, { timeout: 10_000 });
    await page.getByTestId('search').fill('');

    await page.getByTestId('nav-workers').click();
    const strip = page.getByTestId('router-strip');
    await expect(strip.getByTestId('router-row')).toHaveCount(2);
    for (const label of ['r0', 'r1']) await expect(strip.locator(`[data-label="${label}"]`)).toHaveAttribute('data-state', 'connected', { timeout: 10_000 });
    const victim = page.getByTestId('worker-card').first();
    await victim.getByTestId('sim-kill').click();
    await page.getByTestId('confirm-ok').click();
    await expect(victim).toHaveAttribute('data-health', /killed/);
    await expect(page.getByTestId('worker-matrix').getByTestId('matrix-health').first()).toHaveText('healthy on 0 of 2', { timeout: 10_000 });
    await page.screenshot({ path: join(SHOTS, 'hub-serve-replicas.png') });
  } finally {
    await replicated.stop();
  }
});

// A replica SIGKILLed under `serve --replicas 2` takes its clients' streams with it: the page
// ends the requests the hub lists lost with it (`owner_lost`) as "router lost" within 2 s,
// counted in FAILED, with a flag on the axis and an incident of their own that fits the list.
test('serve --replicas 2: a replica killed -9 ends its cut requests as router lost, with a flag and an incident', async ({ page }) => {
  const replicated = await startServe(['--replicas', '2', '--port', '0', '--sim', '2']);
  try {
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(replicated.url);
    const hubState = async () => (await (await fetch(new URL('/hub', replicated.url))).json()) as { routers: { label: string; url: string; state: string }[]; owner_lost: string[] };
    await expect(page.locator('[data-testid="request-row"][data-status="running"][data-request-id^="r1/"]').first()).toBeVisible({ timeout: 15_000 });
    const routers = (await hubState()).routers;
    const r1 = routers.find((r) => r.label === 'r1')!;
    const listing = (await (await fetch(`${routers.find((r) => r.label === 'r0')!.url}/replicas`)).json()) as { replicas: { url: string; pid: number }[] };
    const pid = listing.replicas.find((r) => r.url.replace(/\/$/, '') === r1.url.replace(/\/$/, ''))!.pid;
    const failedBefore = Number(await page.getByTestId('strip-failures').textContent());
    const runningOnR1 = await page.locator('[data-testid="request-row"][data-status="running"][data-request-id^="r1/"]').evaluateAll((els) => els.map((e) => e.getAttribute('data-request-id')!));

    process.kill(pid, 'SIGKILL');
    const killedAt = Date.now();
    const left = () => Math.max(0, 2_000 - (Date.now() - killedAt));
    await expect.poll(async () => (await hubState()).owner_lost.filter((id) => id.startsWith('r1/')).length, { timeout: 3_000 }).toBeGreaterThan(0);
    const lost = (await hubState()).owner_lost;
    // The streams the page saw running there and the hub lists cut with it (some may have ended
    // just before the kill; the hub may list a request that ended long ago, which stays ended).
    const cut = runningOnR1.filter((id) => lost.includes(id));
    expect(cut.length, `running on r1 at the kill: ${runningOnR1.join(' ')}; owner_lost: ${lost.join(' ')}`).toBeGreaterThan(0);

    // Within 2 s of the kill: an incident of the router's loss counting every cut request as
    // failed, and a flag. (Which rows are drawn is the virtualized list's business while the demo
    // traffic adds rows; the focused incident below lists each of them.)
    const chip = page.locator('[data-testid="incident"][data-incident^="router:r1@"]').first();
    await expect(chip).toBeVisible({ timeout: left() });
    await expect.poll(async () => Number(await chip.getAttribute('data-failed')), { timeout: left() }).toBeGreaterThanOrEqual(cut.length);
    await expect(page.locator('[data-testid="fault-flag"][data-kinds~="router_lost"]').first()).toBeVisible({ timeout: left() });
    expect(Date.now() - killedAt).toBeLessThanOrEqual(2_000);
    const failed = Number(await chip.getAttribute('data-failed'));
    expect(failed).toBeGreaterThanOrEqual(cut.length);
    await expect.poll(async () => Number(await page.getByTestId('strip-failures').textContent())).toBeGreaterThanOrEqual(failedBefore + failed);

    // Focused on it: only its requests, none running, each saying "router lost".
    await chip.click();
    await expect(page.getByTestId('axis-note')).toHaveText('incident');
    await expect(page.getByTestId('incident-summary')).toContainText(`${failed} failed: router lost`);
    const rows = page.locator('[data-testid="request-row"]');
    await expect(rows).toHaveCount(failed);
    const listed = await rows.evaluateAll((els) => els.map((e) => e.getAttribute('data-request-id')));
    for (const id of listed) expect(lost).toContain(id);
    for (const id of cut) expect(listed).toContain(id);
    await expect(page.locator('[data-testid="request-row"][data-status="running"]')).toHaveCount(0);
    await expect(page.locator('[data-testid="request-row"] [data-testid="badge-failed"][data-reason="router_lost"]')).toHaveCount(failed);
    await page.screenshot({ path: join(SHOTS, 'hub-replica-lost.png') });
    await rows.first().click();
    await expect(page.getByTestId('router-lost')).toBeVisible();
  } finally {
    await replicated.stop();
  }
});

// The same loss with two separate `baton router` processes behind `serve --router A --router B`:
// B SIGKILLed with streams in flight; the hub lists them lost with it (`owner_lost`), and the page
// ends each as "router lost" within 2 s, counted in FAILED, with a flag and an incident.
test('serve --router A --router B: a router killed -9 ends its cut requests as router lost, with a flag and an incident', async ({ page }) => {
  const own = await startCluster({ workers: 2, port: 0, tokenIntervalMs: 20 });
  const pair = [await spawnRouter(own.workers().map((w) => w.url)), await spawnRouter(own.workers().map((w) => w.url))];
  const hub = await startServe(['--port', '0', ...pair.flatMap((r) => ['--router', r.url])]);
  const streams: Promise<unknown>[] = [];
  try {
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(hub.url);
    const hubState = async () => (await (await fetch(new URL('/hub', hub.url))).json()) as { routers: { label: string; url: string; state: string }[]; owner_lost: string[] };
    await expect.poll(async () => (await hubState()).routers.filter((r) => r.state === 'connected').length, { timeout: 15_000 }).toBe(2);
    const victim = (await hubState()).routers.find((r) => r.url.replace(/\/$/, '') === pair[1]!.url)!;
    // Long streams on B (300 tokens at 20 ms: six seconds each); the kill cuts them, so their
    // clients' reads fail.
    for (let i = 0; i < 6; i++) {
      streams.push(fetch(`${pair[1]!.url}/generate`, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ input_ids: [5, 6, 7, i], sampling_params: { max_new_tokens: 300, temperature: 0, ignore_eos: true }, stream: true }),
      }).then((r) => r.text()).catch(() => null));
    }
    const running = page.locator(`[data-testid="request-row"][data-status="running"][data-request-id^="${victim.label}/"]`);
    await expect(running).toHaveCount(6, { timeout: 15_000 });
    const failedBefore = Number(await page.getByTestId('strip-failures').textContent());
    const runningIds = await running.evaluateAll((els) => els.map((e) => e.getAttribute('data-request-id')!));

    pair[1]!.proc.kill('SIGKILL');
    const killedAt = Date.now();
    const left = () => Math.max(0, 2_000 - (Date.now() - killedAt));
    await expect.poll(async () => (await hubState()).owner_lost.filter((id) => id.startsWith(`${victim.label}/`)).length, { timeout: 3_000 }).toBeGreaterThan(0);
    const lost = (await hubState()).owner_lost;
    const cut = runningIds.filter((id) => lost.includes(id));
    expect(cut.length, `running on ${victim.label} at the kill: ${runningIds.join(' ')}; owner_lost: ${lost.join(' ')}`).toBe(6);

    for (const id of cut) await expect(page.locator(`[data-testid="request-row"][data-request-id="${id}"]`)).toHaveAttribute('data-status', 'failed', { timeout: left() });
    const chip = page.locator(`[data-testid="incident"][data-incident^="router:${victim.label}@"]`).first();
    await expect(chip).toBeVisible({ timeout: left() });
    await expect(page.locator('[data-testid="fault-flag"][data-kinds~="router_lost"]').first()).toBeVisible({ timeout: left() });
    expect(Date.now() - killedAt).toBeLessThanOrEqual(2_000);
    await expect(chip).toHaveAttribute('data-failed', '6');
    await expect.poll(async () => Number(await page.getByTestId('strip-failures').textContent())).toBeGreaterThanOrEqual(failedBefore + 6);

    // Focused on it: the six, none running, each failed "router lost"; A's requests are not in it.
    await chip.click();
    await expect(page.getByTestId('incident-summary')).toContainText('6 failed: router lost');
    const rows = page.locator('[data-testid="request-row"]');
    await expect(rows).toHaveCount(6);
    await expect(page.locator('[data-testid="request-row"] [data-testid="badge-failed"][data-reason="router_lost"]')).toHaveCount(6);
    await page.screenshot({ path: join(SHOTS, 'hub-router-killed.png') });
    await rows.first().click();
    await expect(page.getByTestId('router-lost')).toBeVisible();
  } finally {
    await hub.stop();
    await Promise.all(pair.map((r) => stopProc(r.proc)));
    await Promise.all(streams);
    await own.stop();
  }
});
