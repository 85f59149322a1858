// The prefill strip of a P/D attempt (renderer/src/views/AttemptBars.tsx): drawn from the attempt's
// start to the prefill leg's own end as its row gives it (`prefill_ended_at`), not along the whole
// decode bar; a leg the attempt's end closed still waiting runs the whole bar.
import { describe, expect, it } from 'vitest';
import { renderToStaticMarkup } from 'react-dom/server';
import { createDashStore } from '../../renderer/src/store/store.ts';
import { AttemptBars } from '../../renderer/src/views/AttemptBars.tsx';
import { DashContext } from '../../renderer/src/views/context.ts';
import type { DashboardHost } from '../../renderer/src/host/types.ts';
import type { BatonEvent } from '../../router/events/types.ts';
import { requestEvents } from './scenario.ts';

const T0 = 1_796_000_000_000;
const P0 = 'http://127.0.0.1:7001';
const D0 = 'http://127.0.0.1:7101';

/** The strip's width in percent of its bar, for a request whose one attempt's row says `legEnd`. */
function stripWidth(legEnd: number | null | undefined): { width: number; html: string } {
  const store = createDashStore();
  const events: BatonEvent[] = requestEvents('pd', T0, 40, [{ worker: D0, prefill: P0, tokens: 30 }]);
  for (const e of events) if (e.type === 'attempt_ended' && legEnd !== undefined) e.row = { ...e.row, prefill_ended_at: legEnd };
  store.getState().ingest(events, T0 + 100);
  const r = store.getState().model.book.get('pd')!;
  const html = renderToStaticMarkup(
    <DashContext.Provider value={{ store, host: {} as DashboardHost }}>
      <AttemptBars r={r} now={T0 + 100} big />
    </DashContext.Provider>,
  );
  const m = /data-testid="prefill-leg"[^>]*style="[^"]*width:([\d.]+)%/.exec(html);
  if (!m) throw new Error(`no prefill strip with a width in ${html}`);
  return { width: Number(m[1]), html };
}

describe('P/D prefill strip', () => {
  it('ends where the prefill leg ended: 10 ms into a 40 ms attempt is a quarter of its bar', () => {
    // The attempt runs T0 .. T0 + 40 (10 + 30 tokens in the scenario).
    const { width, html } = stripWidth(T0 + 10);
    expect(width).toBeCloseTo(25, 5);
    expect(html).toContain(`data-ended="${T0 + 10}"`);
  });

  it('runs the whole bar when the leg was closed with its attempt, or the row does not say', () => {
    expect(stripWidth(null).width).toBe(100);
    expect(stripWidth(undefined).width).toBe(100);
  });
});
