import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// The dashboard is a plain Vite web app; Electron loads the same build from disk and
// browser mode (`baton serve`) serves it from the router host.
export default defineConfig({
  root: 'renderer',
  base: './',
  plugins: [react()],
  build: { outDir: '../dist/renderer', emptyOutDir: true, sourcemap: true },
});
