// The strip of big numbers on top: in flight, requests/s, tokens/s, migrations, failures.
import { useDash, useStoreApi } from './context.ts';
import { fmtRate } from './format.ts';

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
  const { book, series } = store.getState().model;
  const rps = series.rate(now, WINDOW_S, (b) => b.started);
  const tps = series.rate(now, WINDOW_S, sumTokens);
  const perMin = series.rate(now, 60, (b) => b.migrations) * 60;
  const failedPerMin = series.rate(now, 60, (b) => b.failed) * 60;
  return (
    <div className="strip" role="status">
      <div className="figure"><div className="label">In flight</div><div className="value" data-testid="strip-inflight">{book.running}</div><div className="sub">requests</div></div>
      <div className="figure"><div className="label">Requests</div><div className="value" data-testid="strip-rps">{fmtRate(rps)}</div><div className="sub">started, last {WINDOW_S} s</div></div>
      <div className="figure"><div className="label">Tokens</div><div className="value" data-testid="strip-tps">{fmtRate(tps)}</div><div className="sub">produced, last {WINDOW_S} s</div></div>
      <div className="figure"><div className="label">Migrations</div><div className="value" data-testid="strip-migrations">{series.totals.migrations}</div><div className="sub">{perMin.toFixed(0)}/min</div></div>
      <div className={`figure${series.totals.failures > 0 ? ' alert' : ''}`}><div className="label">Failures</div><div className="value" data-testid="strip-failures">{series.totals.failures}</div><div className="sub">{failedPerMin.toFixed(0)}/min · requests that failed</div></div>
    </div>
  );
}
