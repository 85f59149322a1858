// Host errors never blank the screen: a banner says what happened and offers a retry, while the
// last picture stays visible under it, frozen (the clock stops, actions are disabled). A notice
// says what the page did on its own (another router answered: the view was reset).
import { useDash, useHost, useStoreApi } from './context.ts';
import { fmtClock } from './format.ts';
import { pdShortage } from '../store/pd.ts';

export function Banner() {
  const host = useHost();
  const store = useStoreApi();
  const connection = useDash((s) => s.connection);
  const frozenAt = useDash((s) => s.frozenAt);
  const notice = useDash((s) => s.notice);
  const mode = useDash((s) => s.mode);
  useDash((s) => s.version);
  // P/D: with no healthy prefill (or decode) server left, every P/D request fails with no_worker
  // while the other role's cards still read healthy.
  const shortage = mode === 'file' ? [] : pdShortage(store.getState().model.workers.list());
  const noticeBar = notice || shortage.length > 0 ? (
    <>
      {shortage.map((s) => (
        <div key={s.role} className="banner" role="alert" data-testid="banner-pd" data-role={s.role}>
          <span>No healthy {s.role} server left ({s.workers}): every P/D request fails with <code>no_worker</code> until one is back.</span>
        </div>
      ))}
      {notice && (
        <div className="banner info" role="status" data-testid="banner-notice">
          <span>{notice}</span>
          <button onClick={() => store.getState().setNotice(null)}>Dismiss</button>
        </div>
      )}
    </>
  ) : null;
  if (mode === 'file' || connection.status === 'live') return noticeBar;
  if (connection.status === 'connecting') {
    return <>{noticeBar}<div className="banner connecting" data-testid="banner-connecting">Connecting to the host…</div></>;
  }
  return (
    <>
      {noticeBar}
      <div className="banner" role="alert" data-testid="banner-connection">
        <span>
          {connection.message ?? 'Connection to the host lost.'} The picture below is frozen
          {frozenAt !== null ? ` at ${fmtClock(frozenAt)}` : ''} and the actions are disabled until the host answers again.
        </span>
        <button onClick={() => host.retry()} data-testid="banner-retry">Retry</button>
      </div>
    </>
  );
}
