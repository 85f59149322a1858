// The header: the views, which host the page talks to (the router's address and identity, or
// the trace file open), opening a trace file, and the theme.
import { useRef } from 'react';
import type { View, Theme } from '../store/store.ts';
import { useDash, useHost, useStoreApi } from './context.ts';
import { fmtClock, fmtIso } from './format.ts';
import { hoverCard } from './HoverCard.tsx';
import { addressName } from '../store/hub-labels.ts';

const VIEWS: { view: View; label: string; live?: boolean }[] = [
  { view: 'live', label: 'Requests' },
  { view: 'workers', label: 'Workers' },
  { view: 'charts', label: 'Charts' },
  { view: 'traces', label: 'Traces' },
  { view: 'traffic', label: 'Traffic', live: true },
];

const THEMES: Theme[] = ['system', 'light', 'dark'];

/** YYYY-MM-DD in local time, as the clock times next to it. */
function localDate(t: number): string {
  const d = new Date(t);
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
}

export function Nav({ onOpenFile, onCloseFile }: { onOpenFile(file: File): void; onCloseFile: (() => void) | null }) {
  const store = useStoreApi();
  const host = useHost();
  const view = useDash((s) => s.view);
  const routerUrl = useDash((s) => s.routerUrl);
  const router = useDash((s) => s.router);
  const hub = useDash((s) => s.hub);
  // Under `serve --router` the page's address is the hub's: no client sends requests there.
  const named = addressName(hub);
  const mode = useDash((s) => s.mode);
  const file = useDash((s) => s.file);
  const theme = useDash((s) => s.theme);
  const input = useRef<HTMLInputElement>(null);
  return (
    <header className="header">
      <span className="brand">Baton</span>
      <nav className="nav" aria-label="Views">
        {VIEWS.filter((v) => !(v.live && mode === 'file')).map((v) => (
          <button key={v.view} aria-current={view === v.view ? 'page' : undefined} data-testid={`nav-${v.view}`} onClick={() => store.getState().setView(v.view)}>
            {v.label}
          </button>
        ))}
      </nav>
      {mode === 'file' && file ? (
        <span className="host-kind file" data-testid="file-info" {...hoverCard(() => ({
          title: file.name,
          lines: [['rows', file.rows.toLocaleString()], ['skipped lines', String(file.skipped)], ['first start', `${fmtClock(file.from)} · ${fmtIso(file.from)}`], ['last end', `${fmtClock(file.to)} · ${fmtIso(file.to)}`]],
          note: 'A trace file: no router, nothing live. Drop another file on the page to open it.',
        }))}>
          trace file <b className="mono">{file.name}</b> · {file.rows.toLocaleString()} rows · {localDate(file.from)} {fmtClock(file.from).slice(0, 8)} – {localDate(file.to) === localDate(file.from) ? '' : `${localDate(file.to)} `}{fmtClock(file.to).slice(0, 8)}
        </span>
      ) : (
        <span className="host-kind" data-testid="host-kind" {...hoverCard(() => ({
          title: 'Where the router runs',
          lines: [['host', host.kind === 'electron' ? 'desktop (Electron)' : 'browser mode (baton serve)'], [named, routerUrl ?? '?'], ...(hub && named === 'hub' ? [['routers', hub.routers.map((r) => `${r.label} ${r.url}`).join(', ')]] as [string, string][] : []),
            ...(router ? [['instance', router.instance], ['started', `${fmtClock(router.started_at)} · ${fmtIso(router.started_at)}`]] as [string, string][] : [])],
          note: 'Another router instance answering resets the view.',
        }))}>
          {host.kind === 'electron' ? 'desktop' : 'browser mode'}{routerUrl ? ` · ${named} ${routerUrl}` : ''}
          {router ? ` · up since ${fmtClock(router.started_at).slice(0, 8)}` : ''}
        </span>
      )}
      <input ref={input} type="file" accept=".jsonl,.json,.ndjson,.csv" hidden data-testid="open-file-input" onChange={(e) => { const f = e.target.files?.[0]; if (f) onOpenFile(f); e.target.value = ''; }} />
      <button onClick={() => input.current?.click()} title="Open an exported trace file (JSON Lines or CSV); you can also drop one on the page">Open file…</button>
      {onCloseFile && <button onClick={onCloseFile} data-testid="close-file">Back to live</button>}
      <select aria-label="theme" value={theme} onChange={(e) => store.getState().setTheme(e.target.value as Theme)} data-testid="theme">
        {THEMES.map((t) => <option key={t} value={t}>{t === 'system' ? 'theme: system' : t}</option>)}
      </select>
    </header>
  );
}
