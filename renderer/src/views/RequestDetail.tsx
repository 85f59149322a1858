// Request: one logical request in full. Attempts table (errors in full, with what their
// classification was read from), the waterfall at a larger scale with time ticks and fault
// markers, the budget, the admission decision, token figures, its output token ids and its trace
// rows as JSON (with ISO times). A request that has left the page's live list is rebuilt from its
// trace rows: the page's own first, else the router's.
import { useEffect, useMemo, useState } from 'react';
import type { DashboardHost, UiConfig } from '../host/types.ts';
import type { TraceRow } from '../../../router/trace/row.ts';
import { migrationCount, type RequestView } from '../store/request-view.ts';
import { budgetBar } from '../store/budget.ts';
import { rebuildRequest } from '../store/rebuild.ts';
import { marksIn } from '../store/faults.ts';
import { clientFailure, clientGotHeadline, requestErrorLine } from '../store/failure-reason.ts';
import { ROUTER_LOST } from '../store/router-lost.ts';
import { withIso } from '../store/trace-file.ts';
import { replayAddress, splitHubId } from '../store/hub-labels.ts';
import { useDash, useHost, useStoreApi } from './context.ts';
import { AttemptBars, requestSpan } from './AttemptBars.tsx';
import { BudgetBar } from './BudgetBar.tsx';
import { Badges, StatusIcon } from './Badges.tsx';
import { fmtClock, fmtIso, fmtMs, fmtOffset, niceTicks } from './format.ts';
import { OutputTokens } from './OutputTokens.tsx';
import { RouterOwner } from './Routers.tsx';
import { copyText } from './HoverCard.tsx';
import { curlGenerate, FRONT_PATHS, replayId, type FrontPath } from './curl.ts';
import { showError, showInfo } from './toast.tsx';

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

type Source = 'live' | 'page-rows' | 'router-rows';
type Found = { r: RequestView; source: Source } | { r: null; source: 'loading' | 'gone' | 'error'; message?: string };

/** The request: from the live list, else rebuilt from the page's rows, else from the router's. */
function useRequest(id: string): Found {
  const store = useStoreApi();
  const host = useHost();
  const version = useDash((s) => s.version);
  const { book, traces } = store.getState().model;
  const live = book.get(id);
  const fromPage = useMemo(() => (live ? null : rebuildRequest(id, traces.ofRequest(id))), [id, live, traces, version]);
  const [fetched, setFetched] = useState<{ id: string; r: RequestView | null; error?: string } | null>(null);
  const needFetch = !live && !fromPage;
  useEffect(() => {
    if (!needFetch) return;
    let alive = true;
    host.traceRows(id).then(
      (rows) => alive && setFetched({ id, r: rebuildRequest(id, rows) }),
      (err: unknown) => alive && setFetched({ id, r: null, error: err instanceof Error ? err.message : String(err) }),
    );
    return () => {
      alive = false;
    };
  }, [host, id, needFetch]);
  if (live) return { r: live, source: 'live' };
  if (fromPage) return { r: fromPage, source: 'page-rows' };
  if (!fetched || fetched.id !== id) return { r: null, source: 'loading' };
  if (fetched.r) return { r: fetched.r, source: 'router-rows' };
  return fetched.error ? { r: null, source: 'error', message: fetched.error } : { r: null, source: 'gone' };
}

/** The router's /config/ui, asked once per host. */
const uiConfigs = new WeakMap<DashboardHost, Promise<UiConfig | null>>();
function useUiConfig(): UiConfig | null {
  const host = useHost();
  const [config, setConfig] = useState<UiConfig | null>(null);
  useEffect(() => {
    let p = uiConfigs.get(host);
    if (!p) uiConfigs.set(host, (p = host.uiConfig().catch(() => null)));
    let alive = true;
    void p.then((c) => alive && setConfig(c));
    return () => {
      alive = false;
    };
  }, [host]);
  return config;
}

/** The request's trace id, linked to the tracing UI when the router names one (--trace-url-template). */
function TraceLink({ traceId }: { traceId: string }) {
  const host = useHost();
  const config = useUiConfig();
  const url = config?.trace_url_template ? config.trace_url_template.replace('{trace_id}', encodeURIComponent(traceId)) : null;
  return (
    <span className="note" data-testid="detail-trace-id">
      trace <span className="mono">{traceId}</span>
      {url && host.kind === 'browser' && <> · <a href={url} target="_blank" rel="noopener noreferrer">open the trace</a></>}
      {url && host.kind !== 'browser' && <> · <button onClick={() => void copyText(url).then((ok) => showInfo(ok ? 'Trace link copied' : 'Copy failed'))}>copy the trace link</button></>}
    </span>
  );
}

function TimeTicks({ from, to }: { from: number; to: number }) {
  const span = Math.max(1, to - from);
  return (
    <div className="ticks" data-testid="detail-ticks">
      {niceTicks(span, 6).map((t) => (
        <span key={t} className="tick" style={{ left: `${(t / span) * 100}%` }}>{fmtOffset(t)}</span>
      ))}
    </div>
  );
}

export function RequestDetail({ id }: { id: string }) {
  const store = useStoreApi();
  const host = useHost();
  const now = useDash((s) => s.now);
  const faults = useDash((s) => s.faults);
  const mode = useDash((s) => s.mode);
  const routerUrl = useDash((s) => s.routerUrl);
  const hub = useDash((s) => s.hub);
  const found = useRequest(id);
  // Behind a hub the page's id is `<router>/<id>`: the copies carry the id the router and client know.
  const clientId = splitHubId(id, hub).clientId;
  const { workers, traces } = store.getState().model;
  const close = () => store.getState().select(null);
  const head = (
    <div className="head">
      {found.r && <StatusIcon r={found.r} />}
      <h2 className="mono" data-testid="detail-id" title={id}>{clientId}</h2>
      <button onClick={() => void copyText(clientId).then((ok) => showInfo(ok ? `Id copied: ${clientId}` : 'Copy failed'))} title="Copy the request id as the client sent it and the router knows it" data-testid="copy-id" data-copy={clientId}>Copy id</button>
      <button onClick={close} data-testid="detail-close">Close (Esc)</button>
    </div>
  );
  if (!found.r) {
    return (
      <aside className="detail" data-testid="request-detail" data-source={found.source}>
        {head}
        {found.source === 'loading' ? (
          <p className="empty">Looking for its trace rows…</p>
        ) : (
          <p className="empty" data-testid="detail-gone">
            {found.source === 'error' ? `Could not ask the host for its trace rows: ${found.message}. ` : ''}
            This request is no longer held: not in this page's list, not among the {traces.size.toLocaleString()} trace rows this page holds
            {mode === 'file' ? ' (this file has no rows for it).' : ', and not in the router\'s trace ring (the router keeps its last rows in memory: --trace-ring-size).'}
            {mode !== 'file' && ' If the router writes a trace file (--trace-file), its rows are there: open it with baton view FILE.'}
          </p>
        )}
      </aside>
    );
  }
  const r = found.r;
  const bar = budgetBar(r);
  const duration = (r.endedAt ?? now) - r.startedAt;
  const span = requestSpan(r, now);
  const marks = marksIn(faults, span.from, span.to);
  const failure = clientFailure(r);
  const clientHeadline = failure ? clientGotHeadline(r, failure) : null;
  const errorLine = requestErrorLine(r, failure);

  const copyCurl = async () => {
    try {
      const body = await host.requestBody(r.id);
      if (!body) {
        showError('The router keeps no request bodies: only requests sent by the embedded traffic generator can be replayed.');
        return;
      }
      const path = (FRONT_PATHS as readonly string[]).includes(body.path ?? '') ? (body.path as FrontPath) : null;
      const ok = await copyText(curlGenerate(replayAddress(r.id, hub, routerUrl), body.body, { path, requestId: clientId }));
      showInfo(ok ? `curl command copied: it replays this request's body against the router as ${replayId(clientId)}` : 'Copy failed');
    } catch (err) {
      showError(err);
    }
  };

  return (
    <aside className="detail" data-testid="request-detail" data-request-id={r.id} data-source={found.source} aria-label={`Request ${r.id}`}>
      {head}
      <Badges r={r} />
      <RouterOwner id={r.id} running={r.status === 'running'} endedLost={clientFailure(r)?.type === ROUTER_LOST} />
      {found.source !== 'live' && (
        <p className="note" data-testid="detail-rebuilt">
          Rebuilt from {traceRowsOf(r).length} trace rows ({found.source === 'page-rows' ? (mode === 'file' ? 'from the file' : 'held by this page') : 'held by the router'}): this request has left the live list.
        </p>
      )}
      <div className="detail-actions">
        {mode === 'live' && <button onClick={() => void copyCurl()} data-testid="copy-curl" title="A curl command that sends this request's body to the router again (for requests the traffic generator sent)">Copy as curl</button>}
        {r.format && <span className="note" title="the wire format it came in">format {r.format}</span>}
        {r.traceId && <TraceLink traceId={r.traceId} />}
      </div>

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
      <AttemptBars r={r} now={now} big marks={marks} />
      <TimeTicks from={span.from} to={span.to} />
      <div className="axis"><span title={fmtIso(r.startedAt)}>{fmtClock(r.startedAt)}</span><span>{fmtMs(duration)}</span></div>
      <h3>Budget</h3>
      <BudgetBar r={r} big />

      <h3>Admission</h3>
      <p data-testid="detail-admission">
        {r.admitted === null ? 'not seen (the page joined after it arrived)'
          : r.admitted ? (failure ? 'admitted: could migrate, and failed all the same (below: what the client got)' : 'admitted: may migrate on failure')
          : `not migratable: ${r.admissionReason ?? 'refused'} (served normally; a failure reaches the client)`}
      </p>

      {failure && (
        <>
          <h3>What the client got</h3>
          <p className="client-error" data-testid="detail-client-error" data-reason={failure.type}>
            {clientHeadline !== null ? `${clientHeadline}: ` : ''}<span className="mono">{failure.text}</span>
          </p>
        </>
      )}

      <h3>Attempts</h3>
      <table className="grid attempts" data-testid="attempts-table">
        <thead>
          <tr><th>#</th><th>worker</th><th>started</th><th>TTFT</th><th>replayed</th><th>produced</th><th>budget</th><th>outcome</th></tr>
        </thead>
        {r.attempts.map((a) => {
          const failed = Boolean(a.error || a.errorKind);
          // What the worker found cached and why the policy chose it, on a line of its own: two more
          // columns would not fit the panel at 1024 px. Known once the attempt's trace row is.
          const placed = a.row ? (a.row.placement_reason ?? 'by load / in turn') : null;
          return (
            <tbody key={a.attempt}>
              <tr data-testid="attempt-row" data-worker={a.worker} data-tokens={a.tokens} data-replayed={a.replayed} className={failed ? 'has-error' : placed !== null ? 'has-lines' : ''}>
                <td>{a.attempt}</td>
                <td title={a.worker}><span className="swatch" style={{ background: workers.colorOf(a.worker) }} />{workers.label(a.worker)}</td>
                <td title={`${fmtIso(a.startedAt)} · ${a.startedAt}`}>{fmtClock(a.startedAt)}</td>
                <td>{fmtMs(a.ttftMs)}</td>
                <td>{a.replayed}</td>
                <td>{a.tokens}</td>
                <td>{a.budgetBefore ?? '—'} → {a.budgetAfter ?? (a.outcome === 'running' ? '…' : '—')}</td>
                <td className={a.outcome === 'failed' ? 'health-dead' : a.outcome === 'finished' ? 'health-healthy' : ''}>{a.outcome}</td>
              </tr>
              {placed !== null && (
                <tr className={failed ? 'placement-line has-lines' : 'placement-line'}>
                  <td colSpan={8}>
                    <span data-testid="attempt-cached" title="prompt tokens the worker found in its prefix cache (cached_tokens)">cached {a.row?.cached_tokens ?? '—'}</span>
                    {' · '}
                    <span data-testid="attempt-placement" title={a.row?.placement_prefix !== null && a.row?.placement_prefix !== undefined ? `the policy believed ${a.row.placement_prefix} tokens of the prefix were cached there` : 'the policy (least_inflight, round_robin, power_of_two) chooses by load or in turn'}>placed: {placed}</span>
                    {(a.row?.prefill_worker ?? a.prefillWorker) && <span data-testid="attempt-pd">{' · '}prefill {workers.label((a.row?.prefill_worker ?? a.prefillWorker)!)} → decode {workers.label(a.worker)}{a.row ? `, room ${a.row.bootstrap_room}` : ''}{a.row?.failed_leg ? `, ${a.row.failed_leg} leg failed` : ''}</span>}
                  </td>
                </tr>
              )}
              {failed && (
                <tr className="error-line">
                  <td colSpan={8} data-testid="attempt-error">
                    <span className="error-kind">{a.errorKind ?? 'error'}</span>
                    {a.error && <span className="error-text">{a.error}</span>}
                    {a.row?.error_evidence && <span className="error-evidence">read from: {a.row.error_evidence}</span>}
                  </td>
                </tr>
              )}
            </tbody>
          );
        })}
      </table>
      {errorLine && <p className="health-dead error-text" data-testid="request-error">{errorLine}</p>}

      {mode === 'live' ? (
        <OutputTokens
          key={r.id}
          id={r.id}
          finished={r.status !== 'running' && r.status !== 'lost'}
          passedThrough={r.admissionReason === 'batch' || r.admissionReason === 'n_gt_1'}
          workers={workers}
        />
      ) : (
        <section data-testid="output-section"><h3>Output tokens</h3><p className="out-note">Not in trace files: the router keeps recent outputs in memory only.</p></section>
      )}

      <h3>Trace rows</h3>
      <pre className="json" data-testid="detail-trace-json">{traceRowsOf(r).map((row) => JSON.stringify(withIso(row), null, 2)).join('\n') || 'none yet: rows are written when an attempt ends'}</pre>
    </aside>
  );
}
