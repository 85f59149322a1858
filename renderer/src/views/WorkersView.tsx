// Workers: a card per worker, the place to act on it, and the Add worker field. The figures on
// the cards are the router's own (read a few times a second). A trace file has no router: its
// workers are summed from the rows instead.
import { useMemo, useState, type FormEvent } from 'react';
import type { SimAction } from '../../../host/contract.ts';
import { useDash, useHost, useSecond, useStoreApi } from './context.ts';
import { RoutersPanel } from './Routers.tsx';
import { ConfirmDialog, type PendingConfirm } from './ConfirmDialog.tsx';
import { simConfirmBody, WorkerCard } from './WorkerCard.tsx';
import type { DiscoveryStatus } from '../../../router/events/types.ts';
import { fmtClock } from './format.ts';

/** A discovery source's state in a few words: synced, stale since T, forbidden, unreachable. */
function discoveryText(d: DiscoveryStatus): string {
  if (d.state === 'stale' && d.at !== null) return `stale since ${fmtClock(d.at).slice(0, 8)}`;
  return d.state;
}

/** One badge per discovery source: never only in logs (issue: silent staleness). */
function DiscoveryStates({ list }: { list: readonly DiscoveryStatus[] }) {
  return (
    <>
      {list.map((d) => (
        <span
          key={d.source}
          className={`badge${d.state === 'synced' ? '' : ' refused'}`}
          data-testid="discovery-state"
          data-source={d.source}
          data-state={d.state}
          title={`${d.source}: ${d.state}${d.detail ? ` (${d.detail})` : ''}; ${d.workers} workers from it`}
        >
          {d.source} {discoveryText(d)} · {d.workers}
        </span>
      ))}
    </>
  );
}
import { showError } from './toast.tsx';
import { uncovered } from '../store/failure-reason.ts';
import { prefillLoad } from '../store/pd.ts';

function FileWorkers() {
  const store = useStoreApi();
  const version = useDash((s) => s.version);
  const { traces, workers } = store.getState().model;
  const list = useMemo(() => {
    const by = new Map<string, { attempts: number; failed: number; tokens: number }>();
    // The workers the export recorded come first, whether or not the page kept one of their rows
    // (its ring keeps a bounded share of ordinary rows); then any other URL the rows name.
    for (const w of workers.seen.values()) by.set(w.url, { attempts: 0, failed: 0, tokens: 0 });
    for (const r of traces.all()) {
      if (r.kind !== 'attempt') continue;
      const w = by.get(r.worker) ?? { attempts: 0, failed: 0, tokens: 0 };
      w.attempts++;
      if (r.outcome === 'failed') w.failed++;
      w.tokens += r.tokens;
      by.set(r.worker, w);
    }
    return [...by.entries()];
  }, [traces, workers, version]);
  return (
    <div className="main">
      <div className="toolbar"><span>The workers the file's export recorded and any other its attempt rows name, with their ids, formats and colours (a trace file has no live worker state).</span><span className="count">{list.length} workers</span></div>
      <div className="scroll">
        <div className="cards">
          {list.map(([url, w]) => (
            <div key={url} className="card" style={{ borderTopColor: workers.colorOf(url) }} data-testid="worker-card" data-worker-id={workers.idOf(url)} data-color={workers.colorOf(url)}>
              <div className="title"><span className="swatch" style={{ background: workers.colorOf(url) }} /><span>{workers.label(url)}</span></div>
              <div className="url mono">{url}</div>
              {workers.byId.get(workers.idOf(url))?.format && <div className="note">format {workers.byId.get(workers.idOf(url))!.format}{workers.byId.get(workers.idOf(url))!.model_path ? ` · ${workers.byId.get(workers.idOf(url))!.model_path}` : ''}</div>}
              <div className="stats">
                <div><b>{w.attempts}</b><span>attempts</span></div>
                <div><b className={w.failed > 0 ? 'health-dead' : ''}>{w.failed}</b><span>failed</span></div>
                <div><b>{w.tokens.toLocaleString()}</b><span>tokens</span></div>
              </div>
            </div>
          ))}
        </div>
      </div>
    </div>
  );
}

export function WorkersView() {
  const mode = useDash((s) => s.mode);
  return mode === 'file' ? <FileWorkers /> : <LiveWorkers />;
}

function LiveWorkers() {
  const store = useStoreApi();
  const host = useHost();
  useDash((s) => s.version);
  useSecond();
  const sim = useDash((s) => s.sim);
  const probes = useDash((s) => s.probes);
  const enabled = useDash((s) => s.connection.status === 'live');
  const discovery = useDash((s) => s.router?.discovery) ?? [];
  const { workers, series } = store.getState().model;
  const now = store.getState().now;
  const [pending, setPending] = useState<PendingConfirm | null>(null);
  const [url, setUrl] = useState('');

  const simAction = (index: number, action: SimAction) =>
    host.simAction(index, action).then((next) => store.getState().setSim(next), showError);

  const add = (e: FormEvent) => {
    e.preventDefault();
    if (!url.trim() || !enabled) return;
    host.addWorker(url.trim()).then(() => setUrl(''), showError);
  };

  const list = workers.list();
  const prefills = list.some((w) => w.pd_role === 'prefill') ? prefillLoad(store.getState().model.book.byId.values(), now) : null;
  return (
    <div className="main">
      <form className="toolbar" onSubmit={add}>
        <input
          data-testid="add-worker-url"
          type="url"
          placeholder="http://gpu-a:30000"
          value={url}
          onChange={(e) => setUrl(e.target.value)}
          style={{ width: 300 }}
          aria-label="Worker URL"
          disabled={!enabled}
        />
        <button type="submit" data-testid="add-worker-submit" disabled={!enabled}>Add worker</button>
        <DiscoveryStates list={discovery} />
        <span className="count">{list.length} workers · figures from the router</span>
      </form>
      {uncovered(list).map((u) => (
        <div key={u.what} className="hint warn" data-testid="coverage-warning" data-what={u.what}>
          No healthy worker serves {u.what} ({u.workers}): its requests fail with <code>no_worker</code> until one is back.
        </div>
      ))}
      <RoutersPanel />
      <div className="scroll">
        {list.length === 0 ? (
          <div className="empty" data-testid="workers-empty">
            <strong>No workers yet.</strong>
            <span data-testid="empty-sentence">Add a URL above (an SGLang server started with <code>--skip-tokenizer-init</code>), or start the simulated cluster: <code>baton serve --sim 3</code>.</span>
          </div>
        ) : (
          <div className="cards">
            {list.map((w) => {
              const simState = w.sim_index === null ? null : sim?.find((s) => s.index === w.sim_index) ?? null;
              return (
                <WorkerCard
                  key={w.id}
                  worker={w}
                  now={now}
                  sim={simState}
                  tokensPerSec={series.rate(now, 5, (b) => b.tokensByWorker.get(w.url) ?? 0)}
                  sparkline={series.workerSparkline(now, w.url)}
                  probe={probes.find((p) => p.worker === w.id) ?? null}
                  readAt={workers.readAt}
                  enabled={enabled}
                  prefill={prefills?.get(w.url) ?? null}
                  onSim={(action, destructive, why) => {
                    const index = w.sim_index!;
                    if (!destructive) return void simAction(index, action);
                    setPending({ title: `${action[0]!.toUpperCase()}${action.slice(1)} ${w.id}?`, body: simConfirmBody(action, why, w.url, w.in_flight), action: `${action[0]!.toUpperCase()}${action.slice(1)}`, run: () => void simAction(index, action) });
                  }}
                  onDrain={() => host.drainWorker(w.id, !w.draining).catch(showError)}
                  onRemove={() =>
                    setPending({
                      title: `Remove ${w.id}?`,
                      body: `The router forgets ${w.url} and sends it no more requests.`,
                      action: 'Remove',
                      run: () => void host.removeWorker(w.id).catch(showError),
                    })
                  }
                />
              );
            })}
          </div>
        )}
      </div>
      {pending && <ConfirmDialog pending={pending} onClose={() => setPending(null)} />}
    </div>
  );
}
