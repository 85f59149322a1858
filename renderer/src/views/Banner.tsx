// Host errors never blank the screen: a banner says what happened and offers a retry, while the
// last picture stays visible under it.
import { useDash, useHost } from './context.ts';

export function Banner() {
  const host = useHost();
  const connection = useDash((s) => s.connection);
  if (connection.status === 'live') return null;
  if (connection.status === 'connecting') {
    return <div className="banner connecting" data-testid="banner-connecting">Connecting to the host…</div>;
  }
  return (
    <div className="banner" role="alert" data-testid="banner-connection">
      <span>{connection.message ?? 'Connection to the host lost.'} The data below may be stale.</span>
      <button onClick={() => host.retry()} data-testid="banner-retry">Retry</button>
    </div>
  );
}
