// Host errors never blank the screen: a banner says what happened and offers a retry, while the
// last picture stays visible under it, frozen (the clock stops, actions are disabled). A notice
// says what the page did on its own (another router answered: the view was reset).
import { useDash, useHost, useStoreApi } from './context.ts';
import { fmtClock } from './format.ts';

export function Banner() {
  const host = useHost();
  const store = useStoreApi();
  const connection = useDash((s) => s.connection);
  const frozenAt = useDash((s) => s.frozenAt);
  const notice = useDash((s) => s.notice);
  const mode = useDash((s) => s.mode);
  const noticeBar = notice ? (
    <div className="banner info" role="status" data-testid="banner-notice">
      <span>{notice}</span>
      <button onClick={() => store.getState().setNotice(null)}>Dismiss</button>
    </div>
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
