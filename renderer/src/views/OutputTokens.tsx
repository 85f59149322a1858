// The Request view's output token ids: each attempt's run in its worker's colour, a tag where a
// continuation took over. Fetched once from the host when the request has finished (the router
// keeps the last 512 finished requests' outputs). Memoised: the detail panel re-renders every
// frame, and a long output is thousands of elements.
import { memo, useEffect, useMemo, useState, type CSSProperties } from 'react';
import type { RequestOutput } from '../../../host/contract.ts';
import { outputLayout, type OutputPiece } from '../store/output-segments.ts';
import { chatLayout, type ChatCallLine } from '../store/chat-view.ts';
import type { WorkerTable } from '../store/workers.ts';
import { useHost } from './context.ts';

/** Tokens drawn before "Show all": enough for most outputs, cheap to draw every time. */
export const OUTPUT_TOKEN_LIMIT = 2000;

type Loaded =
  | { state: 'loading' }
  | { state: 'ready'; output: RequestOutput }
  | { state: 'gone' }
  | { state: 'error'; message: string };

const UNCLAIMED = 'var(--muted)';

/** The run's colour as a CSS variable: the stylesheet tints each token and the tag with it. */
const tint = (color: string) => ({ '--c': color }) as CSSProperties;

export interface OutputTokensProps {
  id: string;
  finished: boolean;
  /** Batches and n > 1 pass through unstitched: the router keeps no output for them. */
  passedThrough: boolean;
  workers: WorkerTable;
}

export const OutputTokens = memo(function OutputTokens({ id, finished, passedThrough, workers }: OutputTokensProps) {
  const host = useHost();
  const [loaded, setLoaded] = useState<Loaded>({ state: 'loading' });
  const [showAll, setShowAll] = useState(false);
  /** With the tokenizer's text: show it (default) or the token ids. */
  const [asIds, setAsIds] = useState(false);

  useEffect(() => {
    if (!finished) return;
    let live = true;
    host.requestOutput(id).then(
      (output) => live && setLoaded(output ? { state: 'ready', output } : { state: 'gone' }),
      (err: unknown) => live && setLoaded({ state: 'error', message: err instanceof Error ? err.message : String(err) }),
    );
    return () => {
      live = false;
    };
  }, [host, id, finished]);

  const output = loaded.state === 'ready' ? loaded.output : null;
  const layout = useMemo(() => (output ? outputLayout(output, showAll ? Infinity : OUTPUT_TOKEN_LIMIT) : null), [output, showAll]);

  let body;
  if (!finished) {
    body = <p className="out-note" data-testid="output-note">Shown when the request has finished.</p>;
  } else if (loaded.state === 'loading') {
    body = <p className="out-note" data-testid="output-note">Loading…</p>;
  } else if (loaded.state === 'gone') {
    body = (
      <p className="out-note" data-testid="output-note">
        {passedThrough
          ? 'Not kept: batches and n > 1 pass through the router unstitched.'
          : 'No longer kept: the router keeps the outputs of its last 512 finished requests, and of its last 512 that migrated or failed.'}
      </p>
    );
  } else if (loaded.state === 'error') {
    body = <p className="out-note health-dead" data-testid="output-note">Could not load the output: {loaded.message}</p>;
  } else if (layout) {
    body = (
      <>
        <RunLegend pieces={layout.pieces} workers={workers} />
        {layout.total === 0
          ? <p className="out-note" data-testid="output-note">No output tokens.</p>
          : <TokenBlock pieces={layout.pieces} shown={layout.shown} total={layout.total} workers={workers} asText={!asIds && output?.token_text !== undefined} />}
        {layout.shown < layout.total && (
          <p className="out-more">
            First {layout.shown.toLocaleString()} of {layout.total.toLocaleString()} tokens
            {layout.hiddenHandoffs > 0 ? ` (${layout.hiddenHandoffs} more hand-off${layout.hiddenHandoffs > 1 ? 's' : ''} further on)` : ''}.{' '}
            <button onClick={() => setShowAll(true)} data-testid="output-show-all">Show all</button>
          </p>
        )}
      </>
    );
  }
  return (
    <>
    {output?.chat && <ChatSection chat={output.chat} />}
    <section data-testid="output-section">
      <h3>
        Output tokens
        {output?.token_text !== undefined && (
          <button className="out-mode" onClick={() => setAsIds(!asIds)} data-testid="output-mode">{asIds ? 'Show text' : 'Show ids'}</button>
        )}
      </h3>
      {body}
    </section>
    </>
  );
});

/** A chat request whole: the messages it was sent, the tools it offered, the answer it got. */
function ChatSection({ chat }: { chat: NonNullable<RequestOutput['chat']> }) {
  const l = useMemo(() => chatLayout(chat), [chat]);
  return (
    <section data-testid="chat-section">
      <h3>Chat</h3>
      <div className="chat-messages">
        {l.lines.map((m) => m.kind === 'gap'
          ? <p key="gap" className="out-note" data-testid="chat-gap">… {m.omitted} message{m.omitted > 1 ? 's' : ''} not kept …</p>
          : (
            <div key={m.index} className="chat-msg" data-testid="chat-message" data-role={m.role}>
              <span className="chat-role">{m.role}{m.toolCallId ? ` (${m.toolCallId})` : ''}</span>
              {m.reasoning && <pre className="chat-reasoning">{m.reasoning}</pre>}
              {m.content && <pre className="chat-text">{m.content}</pre>}
              <Calls calls={m.calls} />
            </div>
          ))}
      </div>
      {l.toolsNote && (
        <details data-testid="chat-tools">
          <summary>{l.toolsNote}</summary>
          {l.tools.map((t, i) => (
            <div key={i} className="chat-tool">
              <b className="mono">{t.name}</b> {t.description}
              {t.parameters && <pre className="json">{t.parameters}</pre>}
            </div>
          ))}
        </details>
      )}
      <div className="chat-msg chat-answer" data-testid="chat-answer">
        <span className="chat-role">answer · finish {l.answer.finish}</span>
        {l.answer.reasoning && <pre className="chat-reasoning" data-testid="chat-answer-reasoning">{l.answer.reasoning}</pre>}
        {l.answer.content && <pre className="chat-text">{l.answer.content}</pre>}
        <Calls calls={l.answer.calls} />
      </div>
      {l.clippedNote && <p className="out-note">{l.clippedNote}</p>}
    </section>
  );
}

function Calls({ calls }: { calls: ChatCallLine[] }) {
  if (calls.length === 0) return null;
  return (
    <>
      {calls.map((c, i) => (
        <div key={i} className="chat-call" data-testid="chat-tool-call">
          <span className="mono">→ {c.name}</span>
          <pre className="json">{c.arguments}</pre>
        </div>
      ))}
    </>
  );
}

/** One line per run: which worker produced which token range. */
function RunLegend({ pieces, workers }: { pieces: OutputPiece[]; workers: WorkerTable }) {
  const runs = pieces.filter((p) => p.kind === 'run');
  if (runs.length === 0) return null;
  return (
    <div className="out-legend">
      {runs.map((r) => (
        <span key={r.from}>
          <span className="swatch" style={{ background: r.worker ? workers.colorOf(r.worker) : UNCLAIMED }} />
          {r.worker ? `${workers.idOf(r.worker)} (attempt ${r.attempt})` : 'unattributed'} · {r.from}–{r.from + r.ids.length - 1}
        </span>
      ))}
    </div>
  );
}

function TokenBlock({ pieces, shown, total, workers, asText }: { pieces: OutputPiece[]; shown: number; total: number; workers: WorkerTable; asText: boolean }) {
  return (
    <div className={asText ? 'out-tokens out-text' : 'out-tokens mono'} data-testid="output-tokens" data-shown={shown} data-total={total} data-as={asText ? 'text' : 'ids'}>
      {pieces.map((p) => {
        if (p.kind === 'handoff') {
          const to = workers.idOf(p.worker);
          const from = p.fromWorker ? workers.idOf(p.fromWorker) : '?';
          return (
            <span
              key={`h${p.attempt}`}
              className="out-handoff"
              data-testid="output-handoff"
              data-at={p.at}
              data-worker={p.worker}
              style={tint(workers.colorOf(p.worker))}
              title={`attempt ${p.attempt}: ${from} → ${to}, continuing from token ${p.at}`}
            >
              ↦ {to} @ {p.at}
            </span>
          );
        }
        const who = p.worker ? `${workers.idOf(p.worker)}, attempt ${p.attempt}` : 'no attempt claims these';
        return (
          <span
            key={`r${p.from}`}
            className="out-run"
            data-testid="output-run"
            data-worker={p.worker ?? ''}
            data-from={p.from}
            data-tokens={p.ids.length}
            style={tint(p.worker ? workers.colorOf(p.worker) : UNCLAIMED)}
          >
            {asText && p.texts
              ? p.texts.map((t, i) => <span key={i} className="out-piece" title={`#${p.from + i} · id ${p.ids[i]} · ${who}`}>{t}</span>)
              : p.ids.map((t, i) => <span key={i} className="out-tok" title={`#${p.from + i} · ${who}`}>{t}</span>)}
          </span>
        );
      })}
    </div>
  );
}
