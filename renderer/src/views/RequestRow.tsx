// One row of the Requests list: status, id, waterfall, budget bar, badges.
import { memo } from 'react';
import type { RequestView } from '../store/request-view.ts';
import { migrationCount } from '../store/request-view.ts';
import { AttemptBars } from './AttemptBars.tsx';
import { BudgetBar } from './BudgetBar.tsx';
import { Badges, StatusIcon } from './Badges.tsx';

interface Props {
  r: RequestView;
  now: number;
  /** The list's shared time window, epoch ms (numbers, so memo compares them cheaply). */
  from: number;
  to: number;
  top: number;
  height: number;
  selected: boolean;
  cursor: boolean;
  onOpen(id: string): void;
}

export const RequestRow = memo(function RequestRow({ r, now, from, to, top, height, selected, cursor, onOpen }: Props) {
  return (
    <div
      className={`req-row req-grid${selected ? ' selected' : ''}${cursor ? ' cursor' : ''}`}
      style={{ top, height }}
      data-testid="request-row"
      data-request-id={r.id}
      data-status={r.status}
      data-migrations={migrationCount(r)}
      onClick={() => onOpen(r.id)}
      role="row"
      aria-selected={selected}
    >
      <StatusIcon r={r} />
      <span className="req-id mono" title={r.id}>{r.id}</span>
      <AttemptBars r={r} now={now} window={{ from, to }} />
      <BudgetBar r={r} />
      <Badges r={r} />
    </div>
  );
});
