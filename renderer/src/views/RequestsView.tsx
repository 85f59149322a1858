// Live: the requests waterfall, newest on top, virtualized. While the list is at the top it
// follows the live stream; once the user scrolls away it holds still (new requests would push
// rows around under the pointer) and offers a "jump to live" button.
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { useVirtualizer } from '@tanstack/react-virtual';
import { visibleIds } from '../store/filters.ts';
import { useDash, useStoreApi } from './context.ts';
import { RequestFilterBar } from './RequestFilterBar.tsx';
import { RequestRow } from './RequestRow.tsx';

const ROW_HEIGHT = 44;
const WINDOWS = [15_000, 60_000, 300_000];
/** The shared time axis moves in steps, so rows re-render twice a second rather than per batch. */
const AXIS_STEP_MS = 500;

export function RequestsView() {
  const store = useStoreApi();
  const version = useDash((s) => s.version);
  const filters = useDash((s) => s.filters);
  const selected = useDash((s) => s.selected);
  const cursor = useDash((s) => s.cursor);
  const now = useDash((s) => s.now);
  const workersKnown = useDash((s) => s.model.workers.byId.size);
  const book = store.getState().model.book;

  // `version` is the book's change counter: the list is recomputed once per batch.
  const live = useMemo(() => visibleIds(book.ids(), (id) => book.get(id), filters), [book, version, filters]);
  const [held, setHeld] = useState<{ ids: string[]; at: number } | null>(null);
  const [span, setSpan] = useState(WINDOWS[1]!);
  const ids = held?.ids ?? live;
  const to = held?.at ?? Math.ceil(now / AXIS_STEP_MS) * AXIS_STEP_MS;
  const from = to - span;
  const scrollRef = useRef<HTMLDivElement>(null);

  const virtualizer = useVirtualizer({
    count: ids.length,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 12,
    getItemKey: (i) => ids[i] ?? i,
  });

  const jumpToLive = useCallback(() => {
    setHeld(null);
    scrollRef.current?.scrollTo({ top: 0 });
  }, []);

  useEffect(() => jumpToLive(), [filters, jumpToLive]);

  const onScroll = () => {
    const top = scrollRef.current?.scrollTop ?? 0;
    if (top > 4 && held === null) setHeld({ ids: live, at: to });
    else if (top <= 4 && held !== null) setHeld(null);
  };

  const open = useCallback((id: string) => store.getState().select(id), [store]);

  // Keyboard: j/k move the cursor, Enter opens it (Esc and / are handled by the app).
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement || e.metaKey || e.ctrlKey || e.altKey) return;
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
  return (
    <div className="main">
      <RequestFilterBar shown={ids.length} total={book.size} />
      <div className="timeline-head">
        <span />
        <span />
        <span className="axis">
          <span>−{span / 1000} s</span>
          <select aria-label="time window" value={span} onChange={(e) => setSpan(Number(e.target.value))} data-testid="waterfall-window">
            {WINDOWS.map((w) => <option key={w} value={w}>{w < 60_000 ? `${w / 1000} s` : `${w / 60_000} min`} window</option>)}
          </select>
          <span>{held ? 'held' : 'now'}</span>
        </span>
        <span className="axis">budget: produced / max_new_tokens</span>
        <span />
      </div>
      <div className="scroll" ref={scrollRef} onScroll={onScroll} data-testid="request-list" role="grid">
        {held && (
          <button className="jump primary" onClick={jumpToLive} data-testid="jump-to-live">
            ↑ jump to live{newer > 0 ? ` (${newer} new)` : ''}
          </button>
        )}
        {ids.length === 0 ? (
          <div className="empty" data-testid="requests-empty">
            {book.size > 0 ? (
              <><strong>No request matches these filters.</strong>Clear a filter or the search box.</>
            ) : workersKnown === 0 ? (
              <><strong>No workers yet.</strong>Add a worker URL in Workers, or start the simulated cluster (<code>baton serve --sim 3</code>).</>
            ) : (
              <><strong>No requests yet.</strong>Send traffic to the router's <code>/generate</code>, or start the traffic generator in Traffic.</>
            )}
          </div>
        ) : (
          <div style={{ height: virtualizer.getTotalSize(), position: 'relative' }}>
            {virtualizer.getVirtualItems().map((item) => {
              const r = book.get(ids[item.index]!);
              if (!r) return null;
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
                />
              );
            })}
          </div>
        )}
      </div>
    </div>
  );
}
