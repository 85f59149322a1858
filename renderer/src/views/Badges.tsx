// The badges of a request: how often it migrated, and why it may not migrate at all.
import type { RequestView } from '../store/request-view.ts';
import { migrationCount } from '../store/request-view.ts';
import { clientFailure, clientGotHeadline, failedBadgeText } from '../store/failure-reason.ts';
import { hoverCard } from './HoverCard.tsx';

export function Badges({ r }: { r: RequestView }) {
  const migrations = migrationCount(r);
  return (
    <div className="badges">
      {migrations > 0 && <span className="badge migrated" data-testid="badge-migrated">migrated ×{migrations}</span>}
      {r.admitted === false && (
        <span className="badge refused" data-testid="badge-not-migratable">not migratable: {r.admissionReason ?? 'refused'}</span>
      )}
      {r.status === 'failed' && <FailedBadge r={r} />}
      {r.status === 'lost' && <span className="badge" title={STATUS_TEXT.lost}>outcome not seen</span>}
      {r.stream === false && <span className="badge">unary</span>}
      {r.format !== null && (r.format !== 'sglang' || (r.front !== null && r.front !== '/generate')) && (
        <span className="badge" data-testid="badge-format" data-format={r.format} data-front={r.front ?? ''} title={`the wire format it came in${r.front ? `, on ${r.front}` : ''}`}>{formatBadge(r.format, r.front)}</span>
      )}
    </div>
  );
}

/** `failed: no_worker`, with what the client got in full on hover. */
function FailedBadge({ r }: { r: RequestView }) {
  const f = clientFailure(r);
  if (!f) return null;
  return (
    <span
      className="badge bad"
      data-testid="badge-failed"
      data-reason={f.type}
      {...hoverCard(() => ({ title: `the client got ${clientGotHeadline(r, f) ?? 'an error'}`, lines: [['reason', f.type], ...(f.status !== null ? [['status', String(f.status)] as [string, string]] : [])], note: f.text }))}
    >
      {f.type === 'router_lost' ? 'router lost' : failedBadgeText(f)}
    </span>
  );
}

/** `vllm`, `openai chat`, `openai completions`, ...: the format, and for the OpenAI family which endpoint. */
export function formatBadge(format: string, front: string | null): string {
  const m = front ? /^\/v1\/(chat\/completions|completions|responses)$/.exec(front) : null;
  if (!m) return format;
  return `${format} ${m[1] === 'chat/completions' ? 'chat' : m[1]}`;
}

const STATUS_ICON = { running: '◐', finished: '✓', failed: '✕', cancelled: '⊘', lost: '?' } as const;
const STATUS_TEXT = {
  running: 'running', finished: 'finished', failed: 'failed', cancelled: 'cancelled',
  lost: 'outcome not seen: the connection was lost while it ran (its rows may be in Traces)',
} as const;

export function StatusIcon({ r }: { r: RequestView }) {
  return (
    <span className={`status ${r.status}`} title={STATUS_TEXT[r.status]} aria-label={r.status}>
      {STATUS_ICON[r.status]}
    </span>
  );
}
