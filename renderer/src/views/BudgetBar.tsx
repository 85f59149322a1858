// The budget bar: max_new_tokens as the full width; produced tokens in each attempt's worker
// colour; the part the latest continuation replayed hatched; a tick at each migration token.
import { memo } from 'react';
import type { RequestView } from '../store/request-view.ts';
import { budgetBar, percent } from '../store/budget.ts';
import { useStoreApi } from './context.ts';

export const BudgetBar = memo(function BudgetBar({ r, big = false }: { r: RequestView; big?: boolean }) {
  const workers = useStoreApi().getState().model.workers;
  const bar = budgetBar(r);
  const title = [
    `produced ${bar.produced} of ${bar.budgetKnown ? bar.total : '?'} tokens`,
    `remaining ${bar.budgetKnown ? bar.remaining : 'unknown'}`,
    bar.replayed > 0 ? `replayed into the last continuation: ${bar.replayed}` : null,
  ].filter(Boolean).join('\n');
  return (
    <div className="budget-cell" title={title}>
      <div className={big ? 'budget big' : 'budget'} data-testid="budget-bar" data-produced={bar.produced} data-replayed={bar.replayed} data-total={bar.total}>
        {bar.segments.map((s) => (
          <div key={s.attempt} className="seg" style={{ ...percent(s.from, s.to, bar.total), background: workers.colorOf(s.worker) }} />
        ))}
        {bar.replayed > 0 && <div className="replayed" style={percent(0, bar.replayed, bar.total)} />}
        {bar.segments.slice(1).map((s) => (
          <div key={`m${s.attempt}`} className="mark" style={{ left: percent(s.from, s.from, bar.total).left }} />
        ))}
      </div>
      <span className="budget-label">
        {bar.produced} / {bar.budgetKnown ? bar.total : '?'} tok
        {bar.replayed > 0 ? ` · ${bar.replayed} replayed` : ''}
      </span>
    </div>
  );
});
