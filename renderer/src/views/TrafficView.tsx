// Traffic: the embedded generator's knobs (rate, concurrency, prompt and budget sizes, stream
// share, non-migratable share) and Start / Pause. Changes apply live.
import { useEffect, useState } from 'react';
import type { TrafficSettings } from '../../../host/contract.ts';
import { useDash, useHost, useStoreApi } from './context.ts';
import { showError } from './toast.tsx';
import { curlGenerate, SAMPLE_BODY } from './curl.ts';

type NumberKey = Exclude<keyof TrafficSettings, 'running'>;

const FIELDS: { key: NumberKey; label: string; min: number; max: number; step: number; unit: string }[] = [
  { key: 'rate', label: 'Rate', min: 0, max: 100, step: 0.5, unit: 'req/s' },
  { key: 'concurrency', label: 'Concurrency cap', min: 1, max: 1024, step: 1, unit: 'in flight' },
  { key: 'promptMin', label: 'Prompt length, min', min: 1, max: 4096, step: 1, unit: 'tokens' },
  { key: 'promptMax', label: 'Prompt length, max', min: 1, max: 4096, step: 1, unit: 'tokens' },
  { key: 'budgetMin', label: 'max_new_tokens, min', min: 1, max: 4096, step: 1, unit: 'tokens' },
  { key: 'budgetMax', label: 'max_new_tokens, max', min: 1, max: 4096, step: 1, unit: 'tokens' },
  { key: 'streamShare', label: 'Streaming share', min: 0, max: 1, step: 0.05, unit: '(rest unary)' },
  { key: 'nonMigratableShare', label: 'Non-migratable share', min: 0, max: 1, step: 0.05, unit: '(stateful sampling)' },
];

export function TrafficView() {
  const host = useHost();
  const store = useStoreApi();
  const traffic = useDash((s) => s.traffic);
  const enabled = useDash((s) => s.connection.status === 'live');
  const routerUrl = useDash((s) => s.routerUrl);
  const [draft, setDraft] = useState<Partial<TrafficSettings>>({});

  useEffect(() => {
    let alive = true;
    const poll = () => {
      if (store.getState().connection.status !== 'live') return;
      host.traffic().then((t) => alive && store.getState().setTraffic(t), () => {});
    };
    poll();
    const id = setInterval(poll, 1000);
    return () => { alive = false; clearInterval(id); };
  }, [host, store]);

  if (!traffic) {
    return (
      <div className="main"><div className="empty" data-testid="traffic-empty">
        <strong>No traffic generator runs in this host.</strong>
        <span data-testid="empty-sentence">Start the host with <code>baton serve --traffic</code> (the default with a simulated cluster), or send your own requests to the router's <code>/generate</code>:</span>
        <span className="curl"><code className="mono">{curlGenerate(routerUrl, SAMPLE_BODY)}</code></span>
      </div></div>
    );
  }

  const apply = (patch: Partial<TrafficSettings>) =>
    host.setTraffic(patch).then((t) => { store.getState().setTraffic(t); setDraft({}); }, showError);
  const value = (k: NumberKey) => draft[k] ?? traffic.settings[k];
  const { running } = traffic.settings;
  return (
    <div className="main">
      <div className="toolbar">
        <button className="primary" data-testid="traffic-toggle" disabled={!enabled} onClick={() => void apply({ running: !running })}>{running ? 'Pause' : 'Start'}</button>
        <span data-testid="traffic-status">{running ? 'running' : 'paused'} · {traffic.inFlight} in flight · {traffic.sent} sent · {traffic.ok} ok · {traffic.failed} failed</span>
      </div>
      <div className="scroll">
        <form className="form" onSubmit={(e) => { e.preventDefault(); void apply(draft); }}>
          {FIELDS.map((f) => (
            <label key={f.key} style={{ display: 'contents' }}>
              <span>{f.label}</span>
              <span className="form-field">
                <input type="range" min={f.min} max={f.max} step={f.step} value={value(f.key)} onChange={(e) => setDraft({ ...draft, [f.key]: Number(e.target.value) })} />
                <input type="number" data-testid={`traffic-${f.key}`} min={f.min} max={f.max} step={f.step} value={value(f.key)} onChange={(e) => setDraft({ ...draft, [f.key]: Number(e.target.value) })} />
                <span className="unit" data-testid="traffic-unit">{f.unit}</span>
              </span>
            </label>
          ))}
          <span />
          <span><button type="submit" className="primary" disabled={!enabled || Object.keys(draft).length === 0} data-testid="traffic-apply">Apply</button></span>
        </form>
      </div>
    </div>
  );
}
