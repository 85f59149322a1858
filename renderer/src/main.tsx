// Start-up: pick the host (Electron's bridge or HTTP), make the store, render.
import { createRoot } from 'react-dom/client';
import { pickHost } from './host/pick.ts';
import { createDashStore } from './store/store.ts';
import { App } from './views/App.tsx';
import './styles.css';

const root = document.getElementById('root');
if (!root) throw new Error('#root missing from index.html');
createRoot(root).render(<App host={pickHost()} store={createDashStore()} />);
