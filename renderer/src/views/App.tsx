// The dashboard: header, banner, strip of figures, the current view, and the request panel; and
// around it the page's two sources: the live host, or a trace file (opened with `baton view`,
// with "Open file…", or dropped on the page), shown in the same views with a store of its own.
import { lazy, Suspense, useCallback, useEffect, useState, type DragEvent } from 'react';
import { flushSync } from 'react-dom';
import type { DashboardHost } from '../host/types.ts';
import { createDashStore, type DashStore } from '../store/store.ts';
import { fetchFileHost, fileFromLocation, fileHost, TraceFileError, type FileHost } from '../host/file.ts';
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
import { HoverCardLayer } from './HoverCard.tsx';
import { Toast, showError } from './toast.tsx';

// recharts is most of the bundle: load it when the Charts view is first opened.
const ChartsView = lazy(() => import('./ChartsView.tsx').then((m) => ({ default: m.ChartsView })));

function useGlobalKeys(): void {
  const store = useStoreApi();
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const typing = e.target instanceof HTMLInputElement || e.target instanceof HTMLTextAreaElement || e.target instanceof HTMLSelectElement;
      if (e.key === '/' && !typing) {
        e.preventDefault();
        const state = store.getState();
        // Focus now, in this keydown: the keys typed right after `/` go to the focused element,
        // and a focus deferred to the next frame let the first of them fall on the page. A view
        // switch is rendered synchronously so that its search box exists already.
        if (state.view !== 'live' && state.view !== 'traces') flushSync(() => state.setView('live'));
        document.getElementById(store.getState().view === 'traces' ? 'trace-search' : 'request-search')?.focus();
      } else if (e.key === 'Escape' && !typing && !document.querySelector('[data-testid=confirm-dialog]')) {
        store.getState().select(null);
      }
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [store]);
}

function useTheme(): void {
  const theme = useDash((s) => s.theme);
  useEffect(() => {
    const root = document.documentElement;
    if (theme === 'system') delete root.dataset.theme;
    else root.dataset.theme = theme;
  }, [theme]);
}

function Shell({ onOpenFile, onCloseFile }: { onOpenFile(file: File): void; onCloseFile: (() => void) | null }) {
  const view = useDash((s) => s.view);
  const selected = useDash((s) => s.selected);
  useGlobalKeys();
  useTheme();
  return (
    <div className="app">
      <Nav onOpenFile={onOpenFile} onCloseFile={onCloseFile} />
      <Banner />
      <TopStrip />
      <div className="body">
        {view === 'live' && <RequestsView />}
        {view === 'workers' && <WorkersView />}
        {view === 'charts' && <Suspense fallback={<div className="main"><div className="empty">Loading charts…</div></div>}><ChartsView /></Suspense>}
        {view === 'traces' && <TracesView />}
        {view === 'traffic' && <TrafficView />}
        {selected && <RequestDetail key={selected} id={selected} />}
      </div>
      <HoverCardLayer />
      <Toast />
    </div>
  );
}

export function App({ host, store, onOpenFile = () => {}, onCloseFile = null }: {
  host: DashboardHost;
  store: DashStore;
  onOpenFile?(file: File): void;
  onCloseFile?: (() => void) | null;
}) {
  useFeed(host, store);
  return (
    <DashContext.Provider value={{ host, store }}>
      <Shell onOpenFile={onOpenFile} onCloseFile={onCloseFile} />
    </DashContext.Provider>
  );
}

interface Source { host: DashboardHost; store: DashStore }

/** A store for a trace file: nothing is evicted (the file is the whole truth) and the clock stands at its end. */
export function fileSource(host: FileHost): Source {
  const n = host.file.rows + (host.context?.inflight.length ?? 0);
  const store = createDashStore({
    limits: { maxFinished: n + 1, maxTotal: n + 1 },
    traceRows: [n + 1, n + 1],
    mode: 'file',
    storage: typeof localStorage === 'undefined' ? null : localStorage,
  });
  store.setState({ file: host.file, now: host.file.to, connection: { status: 'live', message: null } });
  // The colours the file recorded (or assigned in order to a file without them), not recomputed.
  for (const [id, color] of host.colors) store.getState().model.workers.fileColors.set(id, color);
  return { host, store };
}

/** The page: the live host, or a trace file, and dropping a file onto it. */
export function Root({ live }: { live: Source | null }) {
  const [file, setFile] = useState<Source | null>(null);
  const [loading, setLoading] = useState<string | null>(live ? null : fileFromLocation());
  const [failure, setFailure] = useState<string | null>(null);
  const [dragging, setDragging] = useState(false);

  // `baton view FILE`: the page was opened as /?file=NAME and the server has the file.
  useEffect(() => {
    const name = loading;
    if (!name) return;
    fetchFileHost(name).then(
      (host) => { setFile(fileSource(host)); setLoading(null); },
      (err: unknown) => { setFailure(err instanceof Error ? err.message : String(err)); setLoading(null); },
    );
  }, [loading]);

  const openFile = useCallback((f: File) => {
    f.text().then(
      (text) => {
        try {
          setFile(fileSource(fileHost(f.name, text)));
          setFailure(null);
        } catch (err) {
          showError(err instanceof TraceFileError ? err.message : `${f.name}: ${(err as Error).message}`);
        }
      },
      (err: unknown) => showError(`${f.name}: ${(err as Error).message}`),
    );
  }, []);

  const onDrop = (e: DragEvent) => {
    e.preventDefault();
    setDragging(false);
    const f = e.dataTransfer.files[0];
    if (f) openFile(f);
  };
  const current = file ?? live;
  return (
    <div
      className="root"
      onDragOver={(e) => { if (e.dataTransfer.types.includes('Files')) { e.preventDefault(); setDragging(true); } }}
      onDragLeave={(e) => { if (e.currentTarget === e.target) setDragging(false); }}
      onDrop={onDrop}
    >
      {current ? (
        <App key={current === live ? 'live' : `file:${file?.host.file?.name}`} host={current.host} store={current.store} onOpenFile={openFile} onCloseFile={file && live ? () => setFile(null) : null} />
      ) : (
        <div className="empty" data-testid="file-loading">
          {failure ? <><strong>Could not open the trace file.</strong>{failure}</> : <>Reading {loading}…</>}
        </div>
      )}
      {dragging && <div className="drop-zone" data-testid="drop-zone">Drop a trace file (JSON Lines or CSV) to open it here: same views, no router.</div>}
    </div>
  );
}
