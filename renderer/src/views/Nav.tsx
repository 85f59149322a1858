// The header: the views, and which host the page talks to.
import type { View } from '../store/store.ts';
import { useDash, useHost, useStoreApi } from './context.ts';

const VIEWS: { view: View; label: string }[] = [
  { view: 'live', label: 'Requests' },
  { view: 'workers', label: 'Workers' },
  { view: 'charts', label: 'Charts' },
  { view: 'traces', label: 'Traces' },
  { view: 'traffic', label: 'Traffic' },
];

export function Nav() {
  const store = useStoreApi();
  const host = useHost();
  const view = useDash((s) => s.view);
  const routerUrl = useDash((s) => s.routerUrl);
  return (
    <header className="header">
      <span className="brand">Baton</span>
      <nav className="nav" aria-label="Views">
        {VIEWS.map((v) => (
          <button key={v.view} aria-current={view === v.view ? 'page' : undefined} data-testid={`nav-${v.view}`} onClick={() => store.getState().setView(v.view)}>
            {v.label}
          </button>
        ))}
      </nav>
      <span className="host-kind" title="Where the router runs">
        {host.kind === 'electron' ? 'desktop' : 'browser mode'}{routerUrl ? ` · router ${routerUrl}` : ''}
      </span>
    </header>
  );
}
