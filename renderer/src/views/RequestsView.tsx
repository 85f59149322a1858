// Live: the requests waterfall, newest on top, virtualized. While the list is at the top it
// follows the live stream; once the user scrolls away it holds still (new requests would push
// rows around under the pointer) and a "jump to live" button stays in view above the list. The
// shared time axis then follows the rows on screen, so older requests' bars stay visible. Fault
// markers (kill, hang, drain, a worker going down, ...) cross the whole list.
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { useVirtualizer } from '@tanstack/react-virtual';
import { visibleIds, type RequestFilters } from '../store/filters.ts';
import { splitHubId } from '../store/hub-labels.ts';
import { groupMarks, groupTone, marksIn, markTone } from '../store/faults.ts';
import { REQUEST_WINDOWS } from '../store/store.ts';
import type { RequestView } from '../store/request-view.ts';
import { useDash, useHost, useStoreApi } from './context.ts';
import { RequestFilterBar } from './RequestFilterBar.tsx';
import { RequestRow } from './RequestRow.tsx';
import { faultCard } from './AttemptBars.tsx';
import type { CardContent } from './HoverCard.tsx';
import { hoverCard, copyText } from './HoverCard.tsx';
import { endTicks } from './axis.ts';
import { fmtClock, fmtMs, fmtOffset } from './format.ts';
import { curlGenerate, SAMPLE_BODY } from './curl.ts';
import { showInfo } from './toast.tsx';
import { IncidentStrip, focusMarks, useIncidents } from './IncidentsView.tsx';
import { fitWindow, lastFaultStart } from '../store/incidents.ts';

const ROW_HEIGHT = 44;
/** The shared time axis moves in steps, so rows re-render twice a second rather than per batch. */
const AXIS_STEP_MS = 500;

/** Median duration of the last finished requests, when there are enough to say. */
function typicalDuration(ids: readonly string[], get: (id: string) => RequestView | undefined): number | null {
  const d: number[] = [];
  for (let i = ids.length - 1; i >= 0 && d.length < 60; i--) {
    const r = get(ids[i]!);
    if (r && r.endedAt !== null && r.status === 'finished') d.push(r.endedAt - r.startedAt);
  }
  if (d.length < 20) return null;
  d.sort((a, b) => a - b);
  return d[Math.floor(d.length / 2)]!;
}

/** Whether any filter narrows the list. */
function filtered(f: RequestFilters): boolean {
  return f.migrated || f.failed || f.notAdmitted || f.worker !== null || f.search.trim() !== '' || Boolean(f.sinceFault) || Boolean(f.router);
}

/** A window fitted to the newest rows the filter shows, when even the newest ended before `liveFrom`; else null. */
function olderFit(ids: readonly string[], book: { get(id: string): RequestView | undefined }, liveFrom: number): { from: number; to: number } | null {
  const spans: { from: number; to: number }[] = [];
  for (let i = 0; i < ids.length && spans.length < 200; i++) {
    const r = book.get(ids[i]!);
    if (!r) continue;
    if (r.endedAt === null || r.endedAt >= liveFrom) return null;
    spans.push({ from: r.startedAt, to: r.endedAt });
  }
  const w = fitWindow(spans);
  return w ? { from: w.from, to: Math.ceil(w.to / AXIS_STEP_MS) * AXIS_STEP_MS } : null;
}

export function RequestsView() {
  const store = useStoreApi();
  const host = useHost();
  const version = useDash((s) => s.version);
  const filters = useDash((s) => s.filters);
  const selected = useDash((s) => s.selected);
  const cursor = useDash((s) => s.cursor);
  const now = useDash((s) => s.now);
  const windowMs = useDash((s) => s.requestWindow);
  const faults = useDash((s) => s.faults);
  const mode = useDash((s) => s.mode);
  const routerUrl = useDash((s) => s.routerUrl);
  const hub = useDash((s) => s.hub);
  // Behind the hub the router is a column of its own, not a prefix of the id.
  const grid = hub ? 'req-grid with-router' : 'req-grid';
  const traffic = useDash((s) => s.traffic);
  const connection = useDash((s) => s.connection.status);
  const workersKnown = useDash((s) => s.model.workers.byId.size);
  const book = store.getState().model.book;
  const incidents = useIncidents();
  // From the incident's first broken attempt: a P/D prefill failure comes seconds before the health check's mark.
  const lastFaultAt = lastFaultStart(faults, incidents);

  // `version` is the book's change counter: the list is recomputed once per batch.
  const labelled = hub !== null;
  const live = useMemo(() => visibleIds(book.ids(), (id) => book.get(id), filters, lastFaultAt, labelled), [book, version, filters, lastFaultAt, labelled]);
  const [held, setHeld] = useState<{ ids: string[]; at: number } | null>(null);
  // Held: the rows stay in place, less those the page has let go meanwhile (no blank rows).
  const heldIds = useMemo(() => held?.ids.filter((id) => book.get(id) !== undefined) ?? null, [held, book, version]);
  const ids = heldIds ?? live;
  const liveTo = Math.ceil(now / AXIS_STEP_MS) * AXIS_STEP_MS;
  const scrollRef = useRef<HTMLDivElement>(null);
  const [scrollbar, setScrollbar] = useState(0);

  const virtualizer = useVirtualizer({
    count: ids.length,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 12,
    getItemKey: (i) => ids[i] ?? i,
  });
  const items = virtualizer.getVirtualItems();

  // Held: the axis ends where the rows on screen end (never later than when the list was held).
  let to = liveTo;
  let span = windowMs;
  // Focused on an incident, the axis fits its requests; a filter whose rows all ended before the
  // live window fits them too, so what it selects never scrolls out of view.
  const fit = filters.incident ? { from: filters.incident.from, to: filters.incident.to } : !held && filtered(filters) ? olderFit(ids, book, liveTo - windowMs) : null;
  if (fit) {
    to = fit.to;
    span = Math.max(1000, fit.to - fit.from);
  } else if (held) {
    let latest = 0;
    for (const item of items) {
      const r = book.get(ids[item.index]!);
      if (r) latest = Math.max(latest, r.endedAt ?? held.at);
    }
    to = latest > 0 ? Math.min(held.at, Math.ceil(latest / AXIS_STEP_MS) * AXIS_STEP_MS + AXIS_STEP_MS) : held.at;
  }
  const from = to - span;

  const jumpToLive = useCallback(() => {
    setHeld(null);
    scrollRef.current?.scrollTo({ top: 0 });
  }, []);

  useEffect(() => jumpToLive(), [filters, jumpToLive]);

  useEffect(() => {
    const el = scrollRef.current;
    if (!el) return;
    const measure = () => setScrollbar(el.offsetWidth - el.clientWidth);
    measure();
    const ro = new ResizeObserver(measure);
    ro.observe(el);
    return () => ro.disconnect();
  }, []);

  const onScroll = () => {
    const top = scrollRef.current?.scrollTop ?? 0;
    if (top > 4 && held === null) setHeld({ ids: live, at: liveTo });
    else if (top <= 4 && held !== null) setHeld(null);
  };

  const open = useCallback((id: string) => store.getState().select(id), [store]);

  // Keyboard: j/k move the cursor, Enter opens it (Esc and / are handled by the app).
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement || e.target instanceof HTMLTextAreaElement || e.metaKey || e.ctrlKey || e.altKey) return;
      const state = store.getState();
      if (e.key === 'j' || e.key === 'k') {
        const at = state.cursor ? ids.indexOf(state.cursor) : -1;
        const next = e.key === 'j' ? Math.min(ids.length - 1, at + 1) : Math.max(0, at - 1);
        const id = ids[next];
        if (id) {
          state.setCursor(id);
          virtualizer.scrollToIndex(next, { align: 'auto' });
        }
        e.preventDefault();
      } else if (e.key === 'Enter' && state.cursor) {
        state.select(state.cursor);
        e.preventDefault();
      }
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [ids, store, virtualizer]);

  const newer = held ? Math.max(0, live.length - held.ids.length) : 0;
  const marks = marksIn(faults, from, to);
  const groups = groupMarks(marks, span / 40);
  // Flags close together take turns on two lanes, so their labels do not cover each other.
  const lanes: number[] = [];
  groups.forEach((g, i) => {
    const prev = groups[i - 1];
    lanes.push(prev && ((g.t - prev.t) / span) * 100 < 22 ? 1 - lanes[i - 1]! : 0);
  });
  const groupCard = (g: (typeof groups)[number]): CardContent => {
    const cards = g.marks.map(faultCard);
    return { title: g.label, lines: cards.flatMap((c) => c.lines.map(([k, v]) => [`${c.title}: ${k}`, v] as [string, string])) };
  };
  const pct = (t: number) => `${((t - from) / span) * 100}%`;
  const typical = useMemo(() => (mode === 'live' ? typicalDuration(book.ids(), (id) => book.get(id)) : null), [book, version, mode]);
  // Round offsets counted back from the end, clear of the end's own label.
  const ticks = endTicks(span, 5);

  const empty = () => {
    if (book.size > 0) {
      const { dropped, limits } = book;
      const gone = dropped.ordinary + dropped.notable;
      const q = filters.search.trim();
      return (
        <>
          <strong>No request held in this page matches.</strong>
          <span data-testid="requests-held-note">
            The page holds the requests in flight, the last {limits.maxFinished.toLocaleString()} finished
            {limits.maxNotable ? ` and the last ${limits.maxNotable.toLocaleString()} that migrated or failed` : ''}
            {gone > 0 ? `; ${gone.toLocaleString()} older ones were let go (${dropped.notable.toLocaleString()} of them migrated or failed). Their trace rows stay in Traces as long as this page or the router holds them.` : '.'}
          </span>
          <span className="empty-actions">
            <button onClick={() => store.getState().setFilters({ migrated: false, failed: false, notAdmitted: false, worker: null, search: '', sinceFault: false, incident: null, router: null })} data-testid="clear-filters">Clear the filters</button>
            {(q !== '' || filters.migrated || filters.failed) && (
              <button
                data-testid="search-traces"
                onClick={() => {
                  store.getState().setTraceFilter({ ...(q ? { request: q } : {}), ...(filters.failed ? { outcome: 'failed' } : {}), ...(filters.migrated ? { kind: 'request' as const } : {}) });
                  store.getState().setView('traces');
                }}
              >
                Look in the trace rows
              </button>
            )}
          </span>
        </>
      );
    }
    if (mode === 'file') return <><strong>This file holds no requests.</strong></>;
    if (workersKnown === 0) {
      return <><strong>No workers yet.</strong><span>Add a worker URL in Workers (an SGLang server started with <code>--skip-tokenizer-init</code>), or start with simulated ones: <code>baton serve --sim 3</code>.</span></>;
    }
    const curl = curlGenerate(routerUrl, SAMPLE_BODY);
    return (
      <>
        <strong>No requests yet.</strong>
        {traffic ? (
          traffic.settings.running ? 'The traffic generator is on: its requests appear here in a moment.' : <span data-testid="empty-sentence">The traffic generator is paused: start it in <button className="link" onClick={() => store.getState().setView('traffic')}>Traffic</button>, or send a request yourself:</span>
        ) : <span data-testid="empty-sentence">No traffic generator runs here (<code>baton serve --traffic</code> starts one). Send a request to the router yourself:</span>}
        {(!traffic || !traffic.settings.running) && (
          <span className="curl">
            <code className="mono" data-testid="empty-curl">{curl}</code>
            <button onClick={() => void copyText(curl).then((ok) => showInfo(ok ? 'Copied' : 'Copy failed: select the text instead'))} data-testid="copy-empty-curl">Copy</button>
          </span>
        )}
      </>
    );
  };

  return (
    <div className="main requests">
      <IncidentStrip incidents={incidents} />
      <RequestFilterBar shown={ids.length} held={book.size} />
      {typical !== null && typical < 400 && (
        <div className="hint" data-testid="pace-hint">
          Requests finish in about {fmtMs(typical)}: too fast to kill a worker in the middle of one. Simulated workers can be slowed
          down: <code>baton sim --token-interval-ms 20</code> (<code>baton serve</code>'s own simulated workers use 20 ms by default).
        </div>
      )}
      <div className={`timeline-head ${grid}`} style={{ paddingRight: 14 + scrollbar }}>
        <span />
        {hub && <span className="axis-note" data-testid="router-column-head">router</span>}
        <span className="axis-note" data-testid="axis-note">{fit ? (filters.incident ? 'incident' : 'fitted') : connection === 'lost' && mode === 'live' ? 'frozen' : held ? (mode === 'file' ? 'scrolled' : 'held') : mode === 'file' ? 'file end' : 'live'}</span>
        <span className="axis-ticks" data-testid="list-axis">
          {ticks.map(({ at, offset }) => <span key={offset} className="tick" style={{ left: pct(from + at) }}>{fmtOffset(offset, '+')}</span>)}
          <span className="tick end" data-testid="axis-end" data-t={to}>{held || fit || mode === 'file' ? fmtClock(to).slice(0, 8) : 'now'}</span>
          {groups.map((g, i) => (
            <span key={i} className={`flag ${g.source} tone-${groupTone(g.marks)}${lanes[i] ? ' lane1' : ''}${(g.t - from) / span > 0.6 ? ' right' : ''}`} style={{ left: pct(g.t) }} data-testid="fault-flag" data-kinds={g.marks.map((m) => m.kind).join(' ')} onClick={() => focusMarks(store.getState(), incidents, g.marks)} {...hoverCard(() => groupCard(g))}>{g.label}</span>
          ))}
        </span>
        <span className="axis">
          <select aria-label="time window" value={windowMs} onChange={(e) => store.getState().setRequestWindow(Number(e.target.value))} data-testid="waterfall-window">
            {REQUEST_WINDOWS.map((w) => <option key={w} value={w}>{w < 60_000 ? `${w / 1000} s` : `${w / 60_000} min`} window</option>)}
          </select>
          <span>budget: produced / max_new_tokens</span>
        </span>
        <span />
      </div>
      <div className="list-wrap">
        {held && (
          <button className="jump primary" onClick={jumpToLive} data-testid="jump-to-live">
            ↑ {mode === 'file' ? 'back to the newest' : 'jump to live'}{newer > 0 ? ` (${newer} new)` : ''}
          </button>
        )}
        <div className="scroll" ref={scrollRef} onScroll={onScroll} data-testid="request-list" role="grid" data-connection={connection}>
          {ids.length === 0 ? (
            <div className="empty" data-testid="requests-empty">{empty()}</div>
          ) : (
            <div style={{ height: virtualizer.getTotalSize(), position: 'relative' }}>
              {items.map((item) => {
                const r = book.get(ids[item.index]!);
                if (!r) return null;
                const split = splitHubId(r.id, hub);
                return (
                  <RequestRow
                    key={item.key}
                    r={r}
                    now={r.status === 'running' ? to : 0}
                    from={from}
                    to={to}
                    top={item.start}
                    height={item.size}
                    selected={selected === r.id}
                    cursor={cursor === r.id}
                    onOpen={open}
                    router={hub ? split.router ?? '' : null}
                    clientId={split.clientId}
                  />
                );
              })}
            </div>
          )}
        </div>
        {ids.length > 0 && marks.length > 0 && (
          <div className={`fault-overlay ${grid}`} style={{ right: scrollbar }} aria-hidden="true">
            <span /><span />{hub && <span />}
            <span className="fault-track">
              {marks.map((m, i) => <span key={i} className={`fault-line ${m.source} tone-${markTone(m.kind)}`} data-testid="fault-line" data-kind={m.kind} style={{ left: pct(m.t) }} />)}
            </span>
          </div>
        )}
      </div>
      {host.kind !== 'file' && connection === 'lost' && <div className="frozen-note" data-testid="frozen-note">Frozen at {fmtClock(now)}: the connection to the host is lost.</div>}
    </div>
  );
}
