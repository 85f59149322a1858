import { createRoot } from 'react-dom/client';

// Placeholder until the dashboard lands; keeps the Vite build in `npm test` honest.
createRoot(document.getElementById('root')!).render(<h1>Baton</h1>);
