// The dashboard: header, banner, strip of figures, the current view, and the request panel; and
// around it the page's two sources: the live host, or a trace file (opened with `baton view`,
// with "Open file…", or dropped on the page), shown in the same views with a store of its own.
import { lazy, Suspense, useCallback, useEffect, useRef, useState, type DragEvent } from 'react';
import { flushSync } from 'react-dom';
import type { DashboardHost } from '../host/types.ts';
import { createDashStore, type DashStore } from '../store/store.ts';
import { fetchFileHost, fileFromLocation, fileHost, serverPrefs, TraceFileError, type FileHost } from '../host/file.ts';
import { hostBackedStorage, syncPrefs, type PrefsHost } from '../store/prefs-sync.ts';
import { deriveIncidents } from '../store/incidents.ts';
import { isTyping, keyCommand, KEY_HELP, stepIncident, VIEW_KEYS } from '../store/keys.ts';
import { focusIncident } from './IncidentsView.tsx';
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

function useGlobalKeys(toggleHelp: () => void, closeHelp: () => boolean): void {
  const store = useStoreApi();
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const state = store.getState();
      const views = VIEW_KEYS.map((v) => v.view).filter((v) => !(v === 'traffic' && state.mode === 'file'));
      const cmd = keyCommand(e, isTyping(e.target), views);
      if (!cmd) return;
      // A confirmation dialog owns the keyboard: no view switch or incident jump behind it.
      if (document.querySelector('[data-testid=confirm-dialog]')) return;
      if (cmd.kind === 'search') {
        e.preventDefault();
        // Focus now, in this keydown: the keys typed right after `/` go to the focused element,
        // and a focus deferred to the next frame let the first of them fall on the page. A view
        // switch is rendered synchronously so that its search box exists already.
        if (state.view !== 'live' && state.view !== 'traces') flushSync(() => state.setView('live'));
        document.getElementById(store.getState().view === 'traces' ? 'trace-search' : 'request-search')?.focus();
      } else if (cmd.kind === 'escape') {
        if (!closeHelp()) state.select(null);
      } else if (cmd.kind === 'help') {
        toggleHelp();
      } else if (cmd.kind === 'view') {
        state.setView(cmd.view);
      } else {
        // The same list the strip shows, derived now: the hook's copy is up to a second old.
        const incidents = deriveIncidents(state.model.traces.all(), state.faults);
        const next = stepIncident(incidents, state.filters.incident?.id ?? null, cmd.step);
        if (next) focusIncident(state, next);
      }
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [store, toggleHelp, closeHelp]);
}

/** The `?` overlay: every key and what it does. */
function KeyHelp({ onClose }: { onClose(): void }) {
  return (
    <div className="modal-back" onClick={onClose}>
      <div className="modal key-help" role="dialog" aria-modal="true" aria-labelledby="key-help-title" data-testid="key-help" onClick={(e) => e.stopPropagation()}>
        <strong id="key-help-title">Keys</strong>
        <table>
          <tbody>
            {KEY_HELP.map(([k, what]) => <tr key={k}><td className="mono"><kbd>{k}</kbd></td><td>{what}</td></tr>)}
          </tbody>
        </table>
        <div className="buttons"><button onClick={onClose} data-testid="key-help-close">Close</button></div>
      </div>
    </div>
  );
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
  const [help, setHelp] = useState(false);
  const helpOpen = useRef(false);
  helpOpen.current = help;
  const toggleHelp = useCallback(() => setHelp((h) => !h), []);
  const closeHelp = useCallback(() => { if (!helpOpen.current) return false; setHelp(false); return true; }, []);
  useGlobalKeys(toggleHelp, closeHelp);
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
      {help && <KeyHelp onClose={() => setHelp(false)} />}
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

/**
 * A store for a trace file: nothing is evicted (the file is the whole truth) and the clock stands
 * at its end. `prefs`: the server that keeps the dashboard's preferences (`baton view`'s): a view
 * on a new port is a new origin, whose localStorage has no theme, so the stored one is applied.
 */
export function fileSource(host: FileHost, prefs: PrefsHost | null = null): Source & { prefsRead: Promise<void> } {
  const n = host.file.rows + (host.context?.inflight.length ?? 0);
  const local = typeof localStorage === 'undefined' ? null : localStorage;
  const store = createDashStore({
    limits: { maxFinished: n + 1, maxTotal: n + 1 },
    traceRows: [n + 1, n + 1],
    mode: 'file',
    storage: prefs ? hostBackedStorage(local, prefs) : local,
  });
  store.setState({ file: host.file, now: host.file.to, connection: { status: 'live', message: null } });
  // The colours the file recorded (or assigned in order to a file without them), not recomputed.
  for (const [id, color] of host.colors) store.getState().model.workers.fileColors.set(id, color);
  return { host, store, prefsRead: prefs ? syncPrefs(store, prefs) : Promise.resolve() };
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
      (host) => { setFile(fileSource(host, serverPrefs)); setLoading(null); },
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
