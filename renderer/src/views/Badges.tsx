// The badges of a request: how often it migrated, and why it may not migrate at all.
import type { RequestView } from '../store/request-view.ts';
import { migrationCount } from '../store/request-view.ts';

export function Badges({ r }: { r: RequestView }) {
  const migrations = migrationCount(r);
  return (
    <div className="badges">
      {migrations > 0 && <span className="badge migrated" data-testid="badge-migrated">migrated ×{migrations}</span>}
      {r.admitted === false && (
        <span className="badge refused" data-testid="badge-not-migratable">not migratable: {r.admissionReason ?? 'refused'}</span>
      )}
      {r.status === 'failed' && <span className="badge bad">failed</span>}
      {r.stream === false && <span className="badge">unary</span>}
    </div>
  );
}

const STATUS_ICON = { running: '◐', finished: '✓', failed: '✕', cancelled: '⊘' } as const;

export function StatusIcon({ r }: { r: RequestView }) {
  return (
    <span className={`status ${r.status}`} title={r.status} aria-label={r.status}>
      {STATUS_ICON[r.status]}
    </span>
  );
}
