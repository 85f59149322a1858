// Workers: a card per worker, the place to act on it, and the Add worker field.
import { useState, type FormEvent } from 'react';
import type { SimAction } from '../../../host/contract.ts';
import { useDash, useHost, useSecond, useStoreApi } from './context.ts';
import { ConfirmDialog, type PendingConfirm } from './ConfirmDialog.tsx';
import { WorkerCard } from './WorkerCard.tsx';
import { showError } from './toast.tsx';

export function WorkersView() {
  const store = useStoreApi();
  const host = useHost();
  useDash((s) => s.version);
  useSecond();
  const sim = useDash((s) => s.sim);
  const { workers, series } = store.getState().model;
  const now = store.getState().now;
  const [pending, setPending] = useState<PendingConfirm | null>(null);
  const [url, setUrl] = useState('');

  const simAction = (index: number, action: SimAction) =>
    host.simAction(index, action).then((next) => store.getState().setSim(next), showError);

  const add = (e: FormEvent) => {
    e.preventDefault();
    if (!url.trim()) return;
    host.addWorker(url.trim()).then(() => setUrl(''), showError);
  };

  const list = workers.list();
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
        />
        <button type="submit" data-testid="add-worker-submit">Add worker</button>
        <span className="count">{list.length} workers</span>
      </form>
      <div className="scroll">
        {list.length === 0 ? (
          <div className="empty" data-testid="workers-empty">
            <strong>No workers yet.</strong>
            Add a URL above (an SGLang server started with <code>--skip-tokenizer-init</code>), or start the simulated cluster: <code>baton serve --sim 3</code>.
          </div>
        ) : (
          <div className="cards">
            {list.map((w) => {
              const simState = w.sim_index === null ? null : sim?.find((s) => s.index === w.sim_index) ?? null;
              return (
                <WorkerCard
                  key={w.id}
                  worker={w}
                  sim={simState}
                  tokensPerSec={series.rate(now, 5, (b) => b.tokensByWorker.get(w.url) ?? 0)}
                  sparkline={series.workerSparkline(now, w.url)}
                  onSim={(action, destructive, why) => {
                    const index = w.sim_index!;
                    if (!destructive) return void simAction(index, action);
                    setPending({ title: `${action[0]!.toUpperCase()}${action.slice(1)} ${w.id}?`, body: `${why} (${w.url})`, action: `${action[0]!.toUpperCase()}${action.slice(1)}`, run: () => void simAction(index, action) });
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
