// The dashboard: header, banner, strip of figures, the current view, and the request panel.
import { lazy, Suspense, useEffect } from 'react';
import type { DashboardHost } from '../host/types.ts';
import type { DashStore } from '../store/store.ts';
import { DashContext, useDash, useStoreApi } from './context.ts';
import { useFeed } from './feed.ts';
import { Nav } from './Nav.tsx';
import { Banner } from './Banner.tsx';
import { TopStrip } from './TopStrip.tsx';
import { RequestsView } from './RequestsView.tsx';
import { RequestDetail } from './RequestDetail.tsx';
import { WorkersView } from './WorkersView.tsx';
import { TracesView } from './TracesView.tsx';
import { TrafficView } from './TrafficView.tsx';
import { Toast } from './toast.tsx';

// recharts is most of the bundle: load it when the Charts view is first opened.
const ChartsView = lazy(() => import('./ChartsView.tsx').then((m) => ({ default: m.ChartsView })));

function useGlobalKeys(): void {
  const store = useStoreApi();
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const typing = e.target instanceof HTMLInputElement || e.target instanceof HTMLTextAreaElement || e.target instanceof HTMLSelectElement;
      if (e.key === '/' && !typing) {
        e.preventDefault();
        store.getState().setView('live');
        // The search box exists once the Requests view has rendered.
        requestAnimationFrame(() => document.getElementById('request-search')?.focus());
      } else if (e.key === 'Escape' && !typing) {
        store.getState().select(null);
      }
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [store]);
}

function Shell() {
  const view = useDash((s) => s.view);
  const selected = useDash((s) => s.selected);
  useGlobalKeys();
  return (
    <div className="app">
      <Nav />
      <Banner />
      <TopStrip />
      <div className="body">
        {view === 'live' && <RequestsView />}
        {view === 'workers' && <WorkersView />}
        {view === 'charts' && <Suspense fallback={<div className="main"><div className="empty">Loading charts…</div></div>}><ChartsView /></Suspense>}
        {view === 'traces' && <TracesView />}
        {view === 'traffic' && <TrafficView />}
        {selected && <RequestDetail id={selected} />}
      </div>
      <Toast />
    </div>
  );
}

export function App({ host, store }: { host: DashboardHost; store: DashStore }) {
  useFeed(host, store);
  return (
    <DashContext.Provider value={{ host, store }}>
      <Shell />
    </DashContext.Provider>
  );
}
