// One worker: colour, URL, format and mode, model and weight version, health, circuit and load
// as the router reports them, tokens/s, the host's last probe error when it is unhealthy, and the
// actions on it (disabled while the host is unreachable).
import type { WorkerInfo } from '../../../router/events/types.ts';
import type { ProbeNote, SimAction, SimWorkerState } from '../../../host/contract.ts';
import { workerColor } from '../store/colors.ts';
import type { PrefillLoad } from '../store/pd.ts';
import { Sparkline } from './Sparkline.tsx';
import { fmtClock, fmtRate } from './format.ts';

export const SIM_BUTTONS: { action: SimAction; label: string; destructive: boolean; why: string }[] = [
  { action: 'kill', label: 'Kill', destructive: true, why: 'SIGKILL the worker process: its streams break mid-generation.' },
  { action: 'hang', label: 'Hang', destructive: true, why: 'Stop sending tokens without closing connections (a stall).' },
  { action: 'reset', label: 'Reset', destructive: true, why: 'Reset its connections mid-stream.' },
  { action: 'reject', label: 'Reject', destructive: true, why: 'Answer new requests with 503.' },
  { action: 'slow', label: 'Slow', destructive: false, why: 'Send tokens slowly.' },
  { action: 'clear', label: 'Clear', destructive: false, why: 'End a hang, reject or slow fault.' },
  { action: 'restart', label: 'Restart', destructive: false, why: 'Start the process again on the same port.' },
];

/** The actions that cut the streams running on the worker (reject turns away only new requests). */
const CUTS_STREAMS = new Set<SimAction>(['kill', 'hang', 'reset']);

/**
 * The confirmation of a destructive action on a simulated worker: what it does, and for one that
 * cuts streams, how many are running there now (the router's in-flight count), which will break
 * and move to other workers.
 */
export function simConfirmBody(action: SimAction, why: string, url: string, inFlight: number): string {
  const base = `${why} (${url})`;
  if (!CUTS_STREAMS.has(action)) return base;
  if (inFlight === 0) return `${base} No stream is in flight there now.`;
  const streams = inFlight === 1 ? '1 stream in flight there breaks' : `${inFlight} streams in flight there break`;
  return `${base} ${streams} and migrate to other workers (or fail where none can take them).`;
}

/**
 * How a dead simulated worker's process ended, as the card says it: the signal that killed it
 * (`killed (SIGKILL)`, from Kill or from an outside `kill -9` alike) or its exit code
 * (`exited (code 1)`); just `killed` when the host did not say.
 */
export function processEnd(exit: SimWorkerState['exit']): string {
  if (exit?.signal) return `killed (${exit.signal})`;
  if (exit && exit.code !== null) return `exited (code ${exit.code})`;
  return 'killed';
}

const DOWN = new Set(['dead', 'unhealthy', 'circuit_open']);

/**
 * The breaker as the card shows it. A dead or unhealthy worker gets no request whatever its
 * breaker says, and a breaker past its open interval reads half-open (it would let one trial
 * through): shown as such, a dead worker looked half-alive. Its breaker state goes in the title.
 */
export function circuitText(w: Pick<WorkerInfo, 'circuit' | 'health'>, killed: boolean): { text: string; title: string } {
  const breaker = w.circuit.replace('_', '-');
  if (killed || w.health === 'dead' || w.health === 'unhealthy') {
    const why = killed ? 'killed' : w.health;
    return { text: `down (${why})`, title: `no request goes to a worker that is ${why}, whatever its breaker says (breaker: ${breaker})` };
  }
  return { text: breaker, title: 'the router\'s circuit breaker for this worker' };
}

function mode(w: WorkerInfo): string {
  const input = w.token_only === null ? 'probing…' : w.token_only ? 'token-only' : 'text';
  const output = w.incremental === null ? '' : w.incremental ? ' · incremental' : ' · cumulative';
  return input + output;
}

/** Where a discovered worker came from: its source, and the pod, namespace, node or name it gives. */
function discoveredAs(w: WorkerInfo): string | null {
  const d = w.discovery;
  if (!d) return null;
  const where = [d.pod ?? d.name, d.namespace, d.node && `on ${d.node}`].filter(Boolean).join(' · ');
  return where ? `${d.source}: ${where}` : d.source;
}

interface Props {
  worker: WorkerInfo;
  /** Now (epoch ms): a draining worker's time left. */
  now?: number;
  sim: SimWorkerState | null;
  tokensPerSec: number;
  sparkline: number[];
  probe: ProbeNote | null;
  /** When the router's figures on this card were read (epoch ms), null before the first reading. */
  readAt: number | null;
  /** Actions are possible (the host answers). */
  enabled: boolean;
  /** A prefill server's own load (the attempts whose prefill leg is on it); the router counts none on it. */
  prefill?: PrefillLoad | null;
  onSim(action: SimAction, destructive: boolean, why: string): void;
  onDrain(): void;
  onRemove(): void;
}

export function WorkerCard({ worker, now = Date.now(), sim, tokensPerSec, sparkline, probe, readAt, enabled, prefill = null, onSim, onDrain, onRemove }: Props) {
  const role = worker.pd_role ?? null;
  const color = workerColor(worker.id);
  const killed = sim !== null && !sim.alive;
  const down = killed || DOWN.has(worker.health);
  const health = killed ? 'killed' : worker.health;
  const ended = killed ? processEnd(sim.exit) : null;
  const healthText = ended !== null ? (worker.health !== 'healthy' ? `${ended} · router: ${worker.health.replace('_', ' ')}` : ended) : health.replace('_', ' ');
  const format = (worker as { format?: string | null }).format ?? null;
  const disabledWhy = enabled ? undefined : 'The host does not answer: actions are disabled until it does.';
  return (
    <div
      className={`card${down ? ' down' : ''}`}
      style={{ borderTopColor: color }}
      data-testid="worker-card"
      data-worker-id={worker.id}
      data-sim-index={worker.sim_index ?? ''}
      data-health={health}
      data-role={role ?? undefined}
    >
      <div className="title">
        <span className="swatch" style={{ background: color }} />
        <span>{worker.id}</span>
        {role && (
          <span className={`badge role-${role}`} data-testid="worker-role" title={role === 'prefill' ? 'P/D prefill server: computes the prompt\'s KV cache, which a decode server pulls' : 'P/D decode server: pulls the KV from a prefill server and generates the tokens'}>
            {role}{worker.bootstrap_port != null ? ` · bootstrap ${worker.bootstrap_port}` : ''}
          </span>
        )}
        {worker.simulated && <span className="badge">simulated #{worker.sim_index}</span>}
        {sim?.fault && sim.alive && <span className="badge refused" data-testid="worker-fault">{sim.fault}</span>}
        <span className={`health-${killed ? 'dead' : worker.health}`} style={{ marginLeft: 'auto' }} data-testid="worker-health" title="the process state, and the health the router reports">● {healthText}</span>
      </div>
      <div className="url mono" title={worker.url}>{worker.url}</div>
      <div className="meta">
        {format && <span className="badge">{format}</span>}
        {worker.discovery && (
          <span className="badge" data-testid="worker-discovery" title={`added by discovery (${worker.discovery.source}, key ${worker.discovery.key}): discovery may drain or remove it${worker.discovery.reason ? `; ${worker.discovery.reason}` : ''}`}>
            {discoveredAs(worker)}
          </span>
        )}
        {worker.discovery?.reason && (
          <span className="badge refused" data-testid="worker-gone-reason" title="why discovery is taking it away, read from its pod's status">{worker.discovery.reason}</span>
        )}
        <span title="model_path">{worker.model_path ?? 'model not probed'}</span>
        <span title="weight_version (probed, and re-read from each attempt)" data-testid="worker-weights">weights {worker.weight_version ?? '?'}</span>
        {worker.abort_path !== undefined && (
          <span title="the abort endpoint the worker serves, as probed (docs/vllm.md)" data-testid="worker-abort">
            abort {worker.abort_path ?? 'by closing the connection'}
          </span>
        )}
      </div>
      <div className="stats">
        <div><b>{mode(worker)}</b><span>mode</span></div>
        <div title={circuitText(worker, killed).title}><b data-testid="worker-circuit">{circuitText(worker, killed).text}</b><span>circuit</span></div>
        {role === 'prefill' ? (
          // The router counts an attempt on its decode worker: a prefill server's load is the attempts whose prefill leg is on it.
          <div title="attempts running with their prefill leg on this server, as this page saw them start">
            <b data-testid="worker-inflight" data-at={readAt ?? ''}>{prefill?.inFlight ?? 0}</b><span>prefill legs in flight</span>
          </div>
        ) : (
          <div title={readAt ? `the router's count at ${fmtClock(readAt)}` : undefined}>
            <b data-testid="worker-inflight" data-at={readAt ?? ''}>{worker.in_flight}</b><span>in flight (router)</span>
          </div>
        )}
        <div title="cached / prompt tokens over the attempts it served, as the worker reported cached_tokens">
          <b data-testid="worker-hit-rate">{worker.hit_rate === null || worker.hit_rate === undefined ? '—' : `${(worker.hit_rate * 100).toFixed(0)}%`}</b><span>prefix hit rate</span>
        </div>
      </div>
      {probe && (
        <div className="probe-error" data-testid="worker-probe-error" title={`the host's own GET ${worker.url}/health at ${fmtClock(probe.at)}`}>
          last probe {fmtClock(probe.at).slice(0, 8)}: {probe.error}
        </div>
      )}
      <div style={{ display: 'flex', alignItems: 'center', gap: 8 }}>
        {role === 'prefill' ? (
          // A prefill server answers one token per request: its work is the prefills, not tokens.
          <span className="mono" data-testid="worker-prefills" title="attempts that started with their prefill leg on this server in the last 60 s">{prefill?.recent ?? 0} prefills in 60 s</span>
        ) : (
          <>
            <Sparkline values={sparkline} color={color} />
            <span className="mono">{fmtRate(tokensPerSec, ' tok/s')}</span>
          </>
        )}
        {worker.draining && (
          <span className="badge refused" data-testid="worker-draining" title={worker.drain_deadline ? 'takes nothing new; its streams move to other workers before the deadline, then it is removed' : 'takes nothing new; its streams finish here'}>
            draining{worker.drain_deadline ? ` · removed in ${Math.max(0, Math.ceil((worker.drain_deadline - now) / 1000))} s` : ''}
          </span>
        )}
      </div>
      <div className="actions">
        {worker.simulated && sim !== null && SIM_BUTTONS.map((b) => (
          <button
            key={b.action}
            className={b.destructive ? 'danger' : ''}
            title={disabledWhy ?? b.why}
            data-testid={`sim-${b.action}`}
            disabled={!enabled || (killed ? b.action !== 'restart' : b.action === 'restart')}
            onClick={() => onSim(b.action, b.destructive, b.why)}
          >
            {b.label}
          </button>
        ))}
        <button data-testid="worker-drain" onClick={onDrain} disabled={!enabled} title={disabledWhy ?? 'Stop sending new requests; in-flight ones finish'}>
          {worker.draining ? 'Undrain' : 'Drain'}
        </button>
        <button className="danger" data-testid="worker-remove" onClick={onRemove} disabled={!enabled} title={disabledWhy}>Remove</button>
      </div>
    </div>
  );
}
