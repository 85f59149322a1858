// Several routers behind one dashboard (host/hub/): a strip of the routers (state, last seen,
// clock offset, events and sequence gaps), the workers' health across them as a matrix, and on
// a request the router that owns it, "router lost" when that router died with it in flight.
import type { RouterLinkStatus } from '../../../host/contract.ts';
import { useDash } from './context.ts';
import { matrixHealth, replicaNote } from '../store/hub-labels.ts';

const STATE_CLASS: Record<RouterLinkStatus['state'], string> = { connected: 'good', lagging: 'refused', lost: 'bad', connecting: '' };

function ago(t: number | null, now: number): string {
  if (t === null) return 'never';
  const s = Math.max(0, (now - t) / 1000);
  return s < 1 ? 'now' : `${s.toFixed(s < 10 ? 1 : 0)} s ago`;
}

export function RoutersPanel() {
  const hub = useDash((s) => s.hub);
  const now = useDash((s) => s.now);
  if (!hub) return null;
  const labels = hub.routers.map((r) => r.label);
  return (
    <div className="hub-panel" data-testid="router-strip">
      <table className="hub-table">
        <thead>
          <tr><th>router</th><th>state</th><th>last seen</th><th title="its clock minus the hub's, from the fastest /stats round trip">offset</th><th>events</th><th title="sequence numbers missed">gaps</th><th title="event stream reopened with Last-Event-ID">reconnects</th><th>requests</th></tr>
        </thead>
        <tbody>
          {hub.routers.map((r) => (
            <tr key={r.label} data-testid="router-row" data-label={r.label} data-state={r.state} title={r.error ?? r.instance ?? ''}>
              <td className="mono">{r.label} <span className="note">{r.url.replace(/^https?:\/\//, '')}{replicaNote(r, hub.routers) !== null ? ` · ${replicaNote(r, hub.routers)}` : ''}</span></td>
              <td><span className={`badge ${STATE_CLASS[r.state]}`}>{r.state}</span></td>
              <td>{ago(r.last_seen, now)}</td>
              <td>{r.offset_ms === null ? '–' : `${r.offset_ms > 0 ? '+' : ''}${r.offset_ms} ms`}</td>
              <td>{r.events.toLocaleString()}</td>
              <td className={r.gaps > 0 ? 'bad-text' : ''} data-testid="router-gaps">{r.gaps}</td>
              <td>{r.reconnects}</td>
              <td>{r.requests.toLocaleString()}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {hub.workers.length > 0 && (
        <table className="hub-table" data-testid="worker-matrix">
          <thead>
            <tr><th>worker</th><th>in flight (all routers)</th><th>health</th>{labels.map((l) => <th key={l}>{l}</th>)}</tr>
          </thead>
          <tbody>
            {hub.workers.map((w) => {
              const health = matrixHealth(w, hub.routers);
              return (
                <tr key={w.id} data-testid="matrix-row" data-url={w.url}>
                  <td className="mono">{w.id} <span className="note">{w.url.replace(/^https?:\/\//, '')}</span></td>
                  <td>{w.in_flight}</td>
                  <td data-testid="matrix-health" className={health.lost.length ? 'bad-text' : ''}>{health.words}</td>
                  {labels.map((l) => health.lost.includes(l)
                    ? <td key={l} className="bad-text" data-testid="matrix-lost">router lost</td>
                    : <td key={l} className={w.health[l] === undefined ? 'note' : w.health[l] === 'healthy' ? '' : 'bad-text'}>{w.health[l] ?? '–'}</td>)}
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </div>
  );
}

/** On a request behind a hub: which router owns it, and "router lost" when it died. */
export function RouterOwner({ id, running, endedLost }: { id: string; running: boolean; endedLost: boolean }) {
  const hub = useDash((s) => s.hub);
  if (!hub) return null;
  const cut = id.indexOf('/');
  const router = cut > 0 ? hub.routers.find((r) => r.label === id.slice(0, cut)) : undefined;
  if (!router) return null;
  // `endedLost`: the page ended it `router_lost`; a request that ended otherwise was not lost with it.
  const lost = endedLost || (running && (hub.owner_lost.includes(id) || router.state === 'lost'));
  return (
    <p className="note" data-testid="detail-router">
      router <span className="mono">{router.label}</span> ({router.url.replace(/^https?:\/\//, '')})
      {lost && <span className="badge bad" data-testid="router-lost"> router lost: this request was in flight there when it died</span>}
    </p>
  );
}
