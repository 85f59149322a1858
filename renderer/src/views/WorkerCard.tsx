// One worker: colour, URL, mode, health, circuit, load, tokens/s, and the actions on it.
import type { WorkerInfo } from '../../../router/events/types.ts';
import type { SimAction, SimWorkerState } from '../../../host/contract.ts';
import { workerColor } from '../store/colors.ts';
import { Sparkline } from './Sparkline.tsx';
import { fmtRate } from './format.ts';

export const SIM_BUTTONS: { action: SimAction; label: string; destructive: boolean; why: string }[] = [
  { action: 'kill', label: 'Kill', destructive: true, why: 'SIGKILL the worker process: its streams break mid-generation.' },
  { action: 'hang', label: 'Hang', destructive: true, why: 'Stop sending tokens without closing connections (a stall).' },
  { action: 'reset', label: 'Reset', destructive: true, why: 'Reset its connections mid-stream.' },
  { action: 'reject', label: 'Reject', destructive: true, why: 'Answer new requests with 503.' },
  { action: 'slow', label: 'Slow', destructive: false, why: 'Send tokens slowly.' },
  { action: 'clear', label: 'Clear', destructive: false, why: 'End a hang, reject or slow fault.' },
  { action: 'restart', label: 'Restart', destructive: false, why: 'Start the process again on the same port.' },
];

const DOWN = new Set(['dead', 'unhealthy', 'circuit_open']);

function mode(w: WorkerInfo): string {
  const input = w.token_only === null ? 'probing…' : w.token_only ? 'token-only' : 'text';
  const output = w.incremental === null ? '' : w.incremental ? ' · incremental' : ' · cumulative';
  return input + output;
}

interface Props {
  worker: WorkerInfo;
  sim: SimWorkerState | null;
  tokensPerSec: number;
  sparkline: number[];
  onSim(action: SimAction, destructive: boolean, why: string): void;
  onDrain(): void;
  onRemove(): void;
}

export function WorkerCard({ worker, sim, tokensPerSec, sparkline, onSim, onDrain, onRemove }: Props) {
  const color = workerColor(worker.id);
  const killed = sim !== null && !sim.alive;
  const down = killed || DOWN.has(worker.health);
  const health = killed ? 'killed' : worker.health;
  return (
    <div
      className={`card${down ? ' down' : ''}`}
      style={{ borderTopColor: color }}
      data-testid="worker-card"
      data-worker-id={worker.id}
      data-sim-index={worker.sim_index ?? ''}
      data-health={health}
    >
      <div className="title">
        <span className="swatch" style={{ background: color }} />
        <span>{worker.id}</span>
        {worker.simulated && <span className="badge">simulated #{worker.sim_index}</span>}
        {sim?.fault && sim.alive && <span className="badge refused">{sim.fault}</span>}
        <span className={`health-${killed ? 'dead' : worker.health}`} style={{ marginLeft: 'auto' }} data-testid="worker-health">● {health}</span>
      </div>
      <div className="url mono" title={worker.url}>{worker.url}</div>
      <div className="stats">
        <div><b>{mode(worker)}</b><span>mode</span></div>
        <div><b>{worker.circuit.replace('_', '-')}</b><span>circuit</span></div>
        <div><b data-testid="worker-inflight">{worker.in_flight}</b><span>in flight</span></div>
      </div>
      <div style={{ display: 'flex', alignItems: 'center', gap: 8 }}>
        <Sparkline values={sparkline} color={color} />
        <span className="mono">{fmtRate(tokensPerSec, ' tok/s')}</span>
        {worker.draining && <span className="badge refused">draining</span>}
      </div>
      <div className="actions">
        {worker.simulated && sim !== null && SIM_BUTTONS.map((b) => (
          <button
            key={b.action}
            className={b.destructive ? 'danger' : ''}
            title={b.why}
            data-testid={`sim-${b.action}`}
            disabled={killed ? b.action !== 'restart' : b.action === 'restart'}
            onClick={() => onSim(b.action, b.destructive, b.why)}
          >
            {b.label}
          </button>
        ))}
        <button data-testid="worker-drain" onClick={onDrain} title="Stop sending new requests; in-flight ones finish">
          {worker.draining ? 'Undrain' : 'Drain'}
        </button>
        <button className="danger" data-testid="worker-remove" onClick={onRemove}>Remove</button>
      </div>
    </div>
  );
}
