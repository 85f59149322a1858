// Start-up: pick the host (Electron's bridge, HTTP, or a trace file served by `baton view`),
// make the store, render.
import { createRoot } from 'react-dom/client';
import { pickHost } from './host/pick.ts';
import { fileFromLocation } from './host/file.ts';
import { createDashStore } from './store/store.ts';
import { hostBackedStorage, syncPrefs } from './store/prefs-sync.ts';
import { DEFAULT_LIMITS, type BookLimits } from './store/request-book.ts';
import { Root } from './views/App.tsx';
import './styles.css';

/**
 * How many finished requests the page holds (`?keep=N&keepNotable=M`): the defaults suit an
 * operator; smaller ones let a test (or a curious user) see what happens once a request has left
 * the list, without waiting minutes.
 */
function limitsFrom(search: string): BookLimits {
  const q = new URLSearchParams(search);
  const n = (key: string, fallback: number) => {
    const v = Number(q.get(key));
    return q.has(key) && Number.isInteger(v) && v >= 0 ? v : fallback;
  };
  const maxFinished = n('keep', DEFAULT_LIMITS.maxFinished);
  const maxNotable = n('keepNotable', DEFAULT_LIMITS.maxNotable ?? 0);
  return { maxFinished, maxNotable, maxTotal: Math.max(DEFAULT_LIMITS.maxTotal, maxFinished + maxNotable + 4000) };
}

const root = document.getElementById('root');
if (!root) throw new Error('#root missing from index.html');
const local = typeof localStorage === 'undefined' ? null : localStorage;
let live = null;
if (!fileFromLocation()) {
  const host = pickHost();
  const store = createDashStore({ storage: hostBackedStorage(local, host), limits: limitsFrom(location.search) });
  void syncPrefs(store, host);
  live = { host, store };
}
createRoot(root).render(<Root live={live} />);
