// End to end in Chromium against real `baton serve` processes: an export reopened with
// `baton view` restores the live view's worker ids, colours and fault markers, with charts over
// the whole file; "Copy as curl" for a chat request gives a command that runs against the router
// (exit 0, a chat answer) under a replay id linked to the original; the detail panel shows an
// agent's chat request whole (messages, tools, the tool call it answered with, the finish).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test, type Page } from '@playwright/test';
import { startServe, startView } from './serve-process.ts';

const SHOTS = join(import.meta.dirname, '../test-results/e2e');
// The hosts keep dashboard preferences in a file: a temporary one, not the user's.
process.env.BATON_PREFS_FILE = join(mkdtempSync(join(tmpdir(), 'baton-e2e-')), 'prefs.json');

/** The colours of the worker cards on screen, by worker id, as #rrggbb. */
async function cardColors(page: Page): Promise<Record<string, string>> {
  return page.getByTestId('worker-card').evaluateAll((cards) => Object.fromEntries(cards.map((c) => {
    const rgb = getComputedStyle(c.querySelector('.swatch')!).backgroundColor.match(/\d+/g)!.slice(0, 3).map(Number);
    return [c.getAttribute('data-worker-id'), `#${rgb.map((n) => n.toString(16).padStart(2, '0')).join('')}`];
  })));
}

test('an export reopened offline has the same worker ids and colours, the kill marked, and charts over the whole file', async ({ page }) => {
  test.setTimeout(150_000);
  mkdirSync(SHOTS, { recursive: true });
  const serve = await startServe(['--port', '0', '--sim', '3', '--traffic']);
  try {
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.goto(serve.url);
    await page.getByTestId('nav-workers').click();
    await expect(page.getByTestId('worker-card')).toHaveCount(3);
    const live = await cardColors(page);
    expect(new Set(Object.values(live)).size).toBe(3);
    await expect(page.getByTestId('worker-card').first().getByTestId('worker-inflight')).not.toHaveText('0', { timeout: 30_000 });
    // A kill through the dashboard: its marker is the host's.
    await page.getByTestId('worker-card').first().getByTestId('sim-kill').click();
    await page.getByTestId('confirm-ok').click();
    const victim = (await page.getByTestId('worker-card').first().getAttribute('data-worker-id'))!;
    await page.getByTestId('nav-live').click();
    await page.getByTestId('filter-migrated').check();
    await expect(page.locator('[data-testid=request-row][data-migrations="1"][data-status=finished]').first()).toBeVisible({ timeout: 30_000 });
    await page.getByTestId('filter-migrated').uncheck();

    await page.getByTestId('nav-traces').click();
    const downloading = page.waitForEvent('download');
    await page.getByTestId('export-jsonl').click();
    const file = join(SHOTS, 'exports-reopened.jsonl');
    await (await downloading).saveAs(file);
    const lines = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    const ctx = lines.at(-1) as { kind: string; workers: { id: string; color: string }[]; faults: { kind: string; worker: string }[] };
    expect(ctx.kind).toBe('baton_context');
    expect(Object.fromEntries(ctx.workers.map((w) => [w.id, w.color]))).toEqual(live);
    expect(ctx.faults.some((f) => f.kind === 'kill' && f.worker === victim)).toBe(true);
    const rows = lines.slice(0, -1) as { started_at: number }[];
    const firstStart = Math.min(...rows.map((r) => r.started_at));

    const view = await startView(file);
    try {
      const offline = await page.context().newPage();
      await offline.setViewportSize({ width: 1440, height: 900 });
      await offline.goto(view.url);
      await expect(offline.getByTestId('file-info')).toContainText('exports-reopened.jsonl');
      // The kill crosses the waterfall of the file as it did live (a minute's window holds it).
      await offline.getByTestId('waterfall-window').selectOption('60000');
      await expect(offline.locator('[data-testid=fault-line][data-kind=kill]').first()).toBeAttached();
      await offline.getByTestId('nav-workers').click();
      await expect(offline.getByTestId('worker-card')).toHaveCount(3);
      expect(await cardColors(offline)).toEqual(live);
      // Charts: from the file's first row, with the kill on them; not only its last minute.
      await offline.getByTestId('nav-charts').click();
      const charts = offline.getByTestId('charts');
      await expect(charts).toHaveAttribute('data-from', /\d+/);
      const from = Number(await charts.getAttribute('data-from'));
      const step = Number(await charts.getAttribute('data-step'));
      expect(from).toBeLessThanOrEqual(firstStart);
      expect(from).toBeGreaterThan(firstStart - 2 * step * 1000 - 1000);
      await expect(offline.getByTestId('chart-fault').filter({ hasText: `kill ${victim}` })).toHaveCount(1);
      // No fall to zero at the end: the last point has traffic like the others (the file stops
      // where requests still running at the export began, not at its last row).
      const rps = (await charts.getAttribute('data-rps'))!.split(',').map(Number);
      const busy = rps.filter((v) => v > 0).sort((a, b) => a - b);
      expect(rps.at(-1)!).toBeGreaterThanOrEqual(busy[Math.floor(busy.length / 2)]! * 0.3);
      await offline.screenshot({ path: join(SHOTS, 'exports-reopened-charts.png') });
      await offline.close();
    } finally {
      await view.stop();
    }
  } finally {
    await serve.stop();
  }
});

test('copy as curl for a chat request runs against the router under a linked replay id; an agent\'s chat request shows whole in the detail panel', async ({ page, context }) => {
  test.setTimeout(120_000);
  const serve = await startServe(['--port', '0', '--sim', '2', '--sim-format', 'openai', '--traffic']);
  try {
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: serve.url });
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.goto(serve.url);
    // Half the traffic of --sim-format openai is native /generate: take a chat request's row.
    const row = page.locator('[data-testid=request-row][data-status=finished]').filter({ has: page.locator('[data-testid=badge-format][data-front="/v1/chat/completions"]') }).first();
    await expect(row).toBeVisible({ timeout: 60_000 });
    await row.click();
    const detail = page.getByTestId('request-detail');
    const id = (await detail.getAttribute('data-request-id'))!;
    await detail.getByTestId('copy-curl').click();
    await expect(page.getByTestId('toast')).toContainText(`${id}-replay-1`);
    const cmd = await page.evaluate(() => navigator.clipboard.readText());
    expect(cmd).toContain('/v1/chat/completions');
    expect(cmd).toContain(`x-request-id: ${id}-replay-1`);
    // Run it as a user would paste it (a shell), limited so a hang fails the test.
    const out = execFileSync('bash', ['-c', `timeout 60 ${cmd}`], { encoding: 'utf8' });
    // A chat answer: SSE chunks of chat.completion.chunk ending with [DONE], or one chat.completion.
    if (out.includes('data: ')) {
      const chunks = out.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6));
      expect(chunks.at(-1)).toBe('[DONE]');
      // A chat answer: well-formed chunks with one finish. Its text may be empty: the sim's traffic
      // may stop at EOS like real traffic, at the first token too.
      const parsed = chunks.slice(0, -1).map((c) => JSON.parse(c) as { object: string; choices: { delta?: { role?: string }; finish_reason?: string | null }[] });
      expect(parsed.every((c) => c.object === 'chat.completion.chunk')).toBe(true);
      expect(parsed[0]?.choices[0]?.delta?.role).toBe('assistant');
      expect(parsed.filter((c) => c.choices[0]?.finish_reason)).toHaveLength(1);
    } else {
      const answer = JSON.parse(out) as { object: string; choices: { message: { role: string; content: string | null }; finish_reason: string | null }[] };
      expect(answer.object).toBe('chat.completion');
      expect(answer.choices[0]!.message.role).toBe('assistant');
      expect(answer.choices[0]!.finish_reason).toBeTruthy();
    }
    // The router ran it as a request of its own, named after the original.
    const rows = await (await fetch(`${serve.url}api/requests/${encodeURIComponent(`${id}-replay-1`)}/rows`)).json() as { rows: { kind: string; format: string }[] };
    expect(rows.rows.find((r) => r.kind === 'request')).toMatchObject({ format: 'openai' });
    await page.getByTestId('detail-close').click();

    // An agent's chat request answered with a tool call (the demo traffic's agent turns), found
    // through the router's kept outputs, shown whole in the detail panel.
    type Chat = { messages: { role: string }[]; tools: { name: string }[]; answer: { tool_calls: { name: string; arguments: string }[]; finish_reason: string | null } };
    let agent: { id: string; chat: Chat } | null = null;
    await expect.poll(async () => {
      const finished = (await (await fetch(`${serve.url}traces?kind=request&outcome=finished`)).text()).trim().split('\n').filter(Boolean)
        .map((l) => JSON.parse(l) as { request_id: string; format: string }).filter((r) => r.format === 'openai').reverse();
      for (const r of finished.slice(0, 40)) {
        const out = await fetch(`${serve.url}requests/${encodeURIComponent(r.request_id)}/output`);
        if (!out.ok) continue;
        const chat = ((await out.json()) as { chat?: Chat }).chat;
        if (chat && chat.answer.tool_calls.length > 0) return (agent = { id: r.request_id, chat }).id;
      }
      return null;
    }, { timeout: 60_000 }).not.toBeNull();
    const { id: agentId, chat } = agent!;
    await page.getByTestId('search').fill(agentId);
    await page.locator(`[data-testid="request-row"][data-request-id="${agentId}"]`).click();
    const section = page.getByTestId('request-detail').getByTestId('chat-section');
    await expect(section).toBeVisible();
    await expect(section.getByTestId('chat-message')).toHaveCount(chat.messages.length);
    await expect(section.getByTestId('chat-message').first()).toHaveAttribute('data-role', 'user');
    await expect(section.getByTestId('chat-message').first()).toContainText('What is the weather in');
    await expect(section.getByTestId('chat-tools')).toContainText('1 tool');
    await section.getByTestId('chat-tools').locator('summary').click();
    await expect(section.getByTestId('chat-tools')).toContainText('get_weather');
    const answer = section.getByTestId('chat-answer');
    await expect(answer).toContainText(`finish ${chat.answer.finish_reason}`);
    expect(chat.answer.finish_reason).toBe('tool_calls');
    await expect(answer.getByTestId('chat-tool-call')).toHaveCount(chat.answer.tool_calls.length);
    await expect(answer.getByTestId('chat-tool-call').first()).toContainText('→ get_weather');
    await expect(answer.getByTestId('chat-tool-call').first()).toContainText('"city"');
    await expect(answer.getByTestId('chat-answer-reasoning')).toContainText('get_weather tool');
    await page.getByTestId('request-detail').screenshot({ path: join(SHOTS, 'chat-detail.png') });
    if (process.env.BATON_DOC_SHOTS === '1') {
      await section.scrollIntoViewIfNeeded();
      await section.screenshot({ path: join(import.meta.dirname, '../docs/images/dashboard-chat.png') });
    }
  } finally {
    await serve.stop();
  }
});
