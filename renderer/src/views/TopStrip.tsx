// The strip of big numbers on top. In flight and the totals are the router's own counters (the
// numbers its /metrics shows), since the router started; the rates are what this page saw over
// the last seconds. A trace file shows its own totals.
import { useDash, useStoreApi } from './context.ts';
import { fmtClock, fmtIso, fmtRate } from './format.ts';
import { hoverCard } from './HoverCard.tsx';

const WINDOW_S = 5;

function sumTokens(b: { tokensByWorker: Map<string, number> }): number {
  let n = 0;
  for (const v of b.tokensByWorker.values()) n += v;
  return n;
}

export function TopStrip() {
  const store = useStoreApi();
  useDash((s) => s.version);
  const now = useDash((s) => s.now);
  const router = useDash((s) => s.router);
  const mode = useDash((s) => s.mode);
  const lost = useDash((s) => s.connection.status === 'lost');
  const { book, series } = store.getState().model;
  const rps = series.rate(now, WINDOW_S, (b) => b.started);
  const tps = series.rate(now, WINDOW_S, sumTokens);
  const perMin = series.rate(now, 60, (b) => b.migrations) * 60;
  const failedPerMin = series.rate(now, 60, (b) => b.failed) * 60;
  const totals = router?.totals ?? null;
  const since = router ? `since router start ${fmtClock(router.started_at).slice(0, 8)}` : mode === 'file' ? 'in this file' : 'router counters not read yet';
  const sinceCard = () => ({
    title: mode === 'file' ? 'Totals of the trace file' : 'The router\'s own counters',
    lines: router
      ? [['router started', `${fmtClock(router.started_at)} · ${fmtIso(router.started_at)}`], ['instance', router.instance], ['read at', fmtClock(router.t)],
         ['requests ended', String(router.totals.requests)], ['finished / failed / cancelled', `${router.totals.finished} / ${router.totals.failed} / ${router.totals.cancelled}`],
         ['attempts started', String(router.totals.attempts_started)], ['tokens streamed', String(router.totals.tokens)]] as [string, string][]
      : [],
    note: mode === 'file' ? 'Counted from the rows in the file.' : 'The same numbers as the router\'s /metrics (baton_requests_total, baton_migrations_total, ...). Rates are what this page saw.',
  });
  if (mode === 'file') {
    let tokens = 0;
    for (const r of book.byId.values()) tokens += r.completionTokens;
    return (
      <div className="strip" role="status">
        <div className="figure"><div className="label">Requests</div><div className="value" data-testid="strip-requests">{book.size.toLocaleString()}</div><div className="sub">in this file</div></div>
        <div className="figure"><div className="label">Tokens</div><div className="value">{tokens.toLocaleString()}</div><div className="sub">completion tokens in this file</div></div>
        <div className="figure"><div className="label">Rows</div><div className="value">{store.getState().model.traces.size.toLocaleString()}</div><div className="sub">attempt and request rows</div></div>
        <div className="figure"><div className="label">Migrations</div><div className="value" data-testid="strip-migrations">{series.totals.migrations}</div><div className="sub">in this file</div></div>
        <div className={`figure${series.totals.failures > 0 ? ' alert' : ''}`}><div className="label">Failed requests</div><div className="value" data-testid="strip-failures">{series.totals.failures}</div><div className="sub">in this file</div></div>
      </div>
    );
  }
  const inFlight = totals?.in_flight ?? book.running;
  const migrations = totals?.migrations ?? series.totals.migrations;
  // Requests a lost router took with it are failures its totals will never count (behind a hub).
  const routerLost = store.getState().routerLost;
  const failures = totals ? totals.failed + routerLost : series.totals.failures;
  return (
    <div className={`strip${lost ? ' frozen' : ''}`} role="status">
      <div className="figure"><div className="label">In flight</div><div className="value" data-testid="strip-inflight">{inFlight}</div><div className="sub">{totals ? 'requests, at the router' : 'requests'}</div></div>
      <div className="figure"><div className="label">Requests</div><div className="value" data-testid="strip-rps">{fmtRate(rps)}</div><div className="sub">started, last {WINDOW_S} s</div></div>
      <div className="figure"><div className="label">Tokens</div><div className="value" data-testid="strip-tps">{fmtRate(tps)}</div><div className="sub">produced, last {WINDOW_S} s</div></div>
      <div className="figure" {...hoverCard(sinceCard)}><div className="label">Migrations</div><div className="value" data-testid="strip-migrations">{migrations}</div><div className="sub" data-testid="strip-since">{since} · {perMin.toFixed(0)} last min</div></div>
      <div className={`figure${failures > 0 ? ' alert' : ''}`} {...hoverCard(sinceCard)}><div className="label">Failed requests</div><div className="value" data-testid="strip-failures">{failures}</div><div className="sub">{since} · {failedPerMin.toFixed(0)} last min</div></div>
    </div>
  );
}
