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
  /** Behind the hub: the router's label, in a column of its own; the id cell then shows the client's id. */
  router?: string | null;
  /** The id as the client sent it (the page id without its `<label>/`). */
  clientId?: string;
}

export const RequestRow = memo(function RequestRow({ r, now, from, to, top, height, selected, cursor, onOpen, router = null, clientId }: Props) {
  return (
    <div
      className={`req-row req-grid${router !== null ? ' with-router' : ''}${selected ? ' selected' : ''}${cursor ? ' cursor' : ''}`}
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
      {router !== null && <span className="req-router mono" data-testid="request-router" title={`router ${router}`}>{router}</span>}
      <span className="req-id mono" title={r.id}>{clientId ?? r.id}</span>
      <AttemptBars r={r} now={now} window={{ from, to }} />
      <BudgetBar r={r} />
      <Badges r={r} />
    </div>
  );
});
