// Request: one logical request in full. Attempts table, the waterfall and budget at a larger
// scale, the admission decision, token figures, its output token ids and its trace rows as JSON.
import type { TraceRow } from '../../../router/trace/row.ts';
import { migrationCount, type RequestView } from '../store/request-view.ts';
import { budgetBar } from '../store/budget.ts';
import { useDash, useStoreApi } from './context.ts';
import { AttemptBars } from './AttemptBars.tsx';
import { BudgetBar } from './BudgetBar.tsx';
import { Badges, StatusIcon } from './Badges.tsx';
import { fmtClock, fmtMs } from './format.ts';
import { OutputTokens } from './OutputTokens.tsx';

function traceRowsOf(r: RequestView): TraceRow[] {
  const rows: TraceRow[] = r.attempts.flatMap((a) => (a.row ? [a.row] : []));
  if (r.summary) rows.push(r.summary);
  return rows;
}

function Figure({ label, value, testId }: { label: string; value: string | number; testId?: string }) {
  return (
    <div>
      <b data-testid={testId}>{value}</b>
      <span>{label}</span>
    </div>
  );
}

export function RequestDetail({ id }: { id: string }) {
  const store = useStoreApi();
  useDash((s) => s.version);
  const now = useDash((s) => s.now);
  const { book, workers } = store.getState().model;
  const r = book.get(id);
  const close = () => store.getState().select(null);
  if (!r) {
    return (
      <aside className="detail" data-testid="request-detail">
        <div className="head"><h2 className="mono">{id}</h2><button onClick={close} data-testid="detail-close">Close (Esc)</button></div>
        <p className="empty">This request is no longer in the dashboard's buffer. Its trace rows may still be in the router's: export them from Traces.</p>
      </aside>
    );
  }
  const bar = budgetBar(r);
  const duration = (r.endedAt ?? now) - r.startedAt;
  return (
    <aside className="detail" data-testid="request-detail" data-request-id={r.id} aria-label={`Request ${r.id}`}>
      <div className="head">
        <StatusIcon r={r} />
        <h2 className="mono">{r.id}</h2>
        <button onClick={close} data-testid="detail-close">Close (Esc)</button>
      </div>
      <Badges r={r} />

      <h3>Tokens</h3>
      <div className="figures">
        <Figure label="completion tokens" value={r.completionTokens} testId="detail-completion-tokens" />
        <Figure label="max_new_tokens" value={r.maxNewTokens ?? bar.total} />
        <Figure label="prompt tokens" value={r.promptTokens ?? '—'} />
        <Figure label="replayed (last continuation)" value={bar.replayed} />
        <Figure label="migrations" value={migrationCount(r)} testId="detail-migrations" />
        <Figure label={r.status === 'running' ? 'running for' : 'duration'} value={fmtMs(duration)} />
      </div>

      <h3>Waterfall</h3>
      <AttemptBars r={r} now={now} big />
      <div className="axis"><span>{fmtClock(r.startedAt)}</span><span>{fmtMs(duration)}</span></div>
      <h3>Budget</h3>
      <BudgetBar r={r} big />

      <h3>Admission</h3>
      <p data-testid="detail-admission">
        {r.admitted === null ? 'not seen (the page joined after it arrived)'
          : r.admitted ? 'admitted: may migrate on failure'
          : `not migratable: ${r.admissionReason ?? 'refused'} (served normally; a failure reaches the client)`}
      </p>

      <h3>Attempts</h3>
      <div style={{ overflowX: 'auto' }}>
        <table className="grid" data-testid="attempts-table">
          <thead>
            <tr><th>#</th><th>worker</th><th>started</th><th>TTFT</th><th>replayed</th><th>produced</th><th>budget</th><th>outcome</th><th>error</th></tr>
          </thead>
          <tbody>
            {r.attempts.map((a) => (
              <tr key={a.attempt} data-testid="attempt-row" data-worker={a.worker} data-tokens={a.tokens} data-replayed={a.replayed}>
                <td>{a.attempt}</td>
                <td title={a.worker}><span className="swatch" style={{ background: workers.colorOf(a.worker) }} />{workers.idOf(a.worker)}</td>
                <td title={new Date(a.startedAt).toISOString()}>{fmtClock(a.startedAt)}</td>
                <td>{fmtMs(a.ttftMs)}</td>
                <td>{a.replayed}</td>
                <td>{a.tokens}</td>
                <td>{a.budgetBefore ?? '—'} → {a.budgetAfter ?? (a.outcome === 'running' ? '…' : '—')}</td>
                <td className={a.outcome === 'failed' ? 'health-dead' : a.outcome === 'finished' ? 'health-healthy' : ''}>{a.outcome}</td>
                <td title={a.error ?? ''}>{a.errorKind ?? ''}{a.error ? `: ${a.error.slice(0, 60)}` : ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {r.error && <p className="health-dead">{r.error}</p>}

      <OutputTokens
        key={r.id}
        id={r.id}
        finished={r.status !== 'running'}
        passedThrough={r.admissionReason === 'batch' || r.admissionReason === 'n_gt_1'}
        workers={workers}
      />

      <h3>Trace rows</h3>
      <pre className="json" data-testid="detail-trace-json">{traceRowsOf(r).map((row) => JSON.stringify(row, null, 2)).join('\n') || 'none yet: rows are written when an attempt ends'}</pre>
    </aside>
  );
}
