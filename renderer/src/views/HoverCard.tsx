// Hover cards: styled, selectable and copyable details in place of the browser's plain
// tooltips. One card at a time, placed next to the pointer; moving onto the card keeps it open,
// so its text can be selected or copied with the button. Esc closes it.
import { useEffect, useRef, type MouseEvent as ReactMouseEvent } from 'react';
import { create } from 'zustand';
import { showInfo } from './toast.tsx';

export interface CardContent {
  title: string;
  /** Label and value pairs. */
  lines: [string, string][];
  /** Free text under the lines (an error message, a hint). */
  note?: string | null;
}

interface CardState {
  card: { content: CardContent; x: number; y: number } | null;
  hideTimer: ReturnType<typeof setTimeout> | null;
  show(content: CardContent, x: number, y: number): void;
  scheduleHide(): void;
  keep(): void;
  hide(): void;
}

export const useCard = create<CardState>()((set, get) => ({
  card: null,
  hideTimer: null,
  show(content, x, y) {
    const t = get().hideTimer;
    if (t) clearTimeout(t);
    set({ card: { content, x, y }, hideTimer: null });
  },
  scheduleHide() {
    const t = get().hideTimer;
    if (t) clearTimeout(t);
    set({ hideTimer: setTimeout(() => set({ card: null, hideTimer: null }), 250) });
  },
  keep() {
    const t = get().hideTimer;
    if (t) clearTimeout(t);
    set({ hideTimer: null });
  },
  hide() {
    const t = get().hideTimer;
    if (t) clearTimeout(t);
    set({ card: null, hideTimer: null });
  },
}));

/** Props that give an element a hover card; `content` is read when the pointer arrives. */
export function hoverCard(content: () => CardContent) {
  return {
    onMouseEnter: (e: ReactMouseEvent) => useCard.getState().show(content(), e.clientX, e.clientY),
    onMouseLeave: () => useCard.getState().scheduleHide(),
  };
}

export function cardText(c: CardContent): string {
  return [c.title, ...c.lines.map(([k, v]) => `${k}: ${v}`), ...(c.note ? [c.note] : [])].join('\n');
}

/** Copies text: the async clipboard where allowed, else a hidden textarea and execCommand. */
export async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = document.createElement('textarea');
    area.value = text;
    area.setAttribute('readonly', '');
    area.style.position = 'fixed';
    area.style.opacity = '0';
    document.body.appendChild(area);
    area.select();
    let ok = false;
    try {
      ok = document.execCommand('copy');
    } catch {
      ok = false;
    }
    area.remove();
    return ok;
  }
}

export function HoverCardLayer() {
  const card = useCard((s) => s.card);
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!card) return;
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') useCard.getState().hide();
    };
    window.addEventListener('keydown', onKey, true);
    return () => window.removeEventListener('keydown', onKey, true);
  }, [card]);
  // Keep the card inside the window: flip to the other side of the pointer near an edge.
  useEffect(() => {
    const el = ref.current;
    if (!el || !card) return;
    const r = el.getBoundingClientRect();
    const left = card.x + 14 + r.width > window.innerWidth - 8 ? Math.max(8, card.x - 14 - r.width) : card.x + 14;
    const top = card.y + 14 + r.height > window.innerHeight - 8 ? Math.max(8, card.y - 14 - r.height) : card.y + 14;
    el.style.left = `${left}px`;
    el.style.top = `${top}px`;
    el.style.visibility = 'visible';
  }, [card]);
  if (!card) return null;
  const { content } = card;
  return (
    <div
      ref={ref}
      className="hover-card"
      role="tooltip"
      data-testid="hover-card"
      style={{ left: card.x + 14, top: card.y + 14, visibility: 'hidden' }}
      onMouseEnter={() => useCard.getState().keep()}
      onMouseLeave={() => useCard.getState().scheduleHide()}
    >
      <div className="hc-head">
        <strong>{content.title}</strong>
        <button
          className="hc-copy"
          data-testid="hover-card-copy"
          onClick={() => void copyText(cardText(content)).then((ok) => showInfo(ok ? 'Copied' : 'Copy failed: select the text instead'))}
        >
          Copy
        </button>
      </div>
      {content.lines.length > 0 && (
        <dl>
          {content.lines.map(([k, v], i) => (
            <div key={i}><dt>{k}</dt><dd>{v}</dd></div>
          ))}
        </dl>
      )}
      {content.note && <p className="hc-note">{content.note}</p>}
    </div>
  );
}
