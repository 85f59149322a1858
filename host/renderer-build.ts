// The dashboard's Vite build, made on first use when a fresh clone has none yet (both hosts
// load it from dist/renderer).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { RENDERER_DIST } from './app.ts';

export class RendererBuildError extends Error {}

export async function ensureRendererBuilt(log: (line: string) => void = console.log): Promise<void> {
  if (existsSync(join(RENDERER_DIST, 'index.html'))) return;
  log('baton: building the dashboard (vite build)…');
  let vite: typeof import('vite');
  try {
    vite = await import('vite');
  } catch {
    throw new RendererBuildError(`no dashboard build in ${RENDERER_DIST} and vite is not installed to make one: run 'npm install' then 'npm run build'`);
  }
  await vite.build({ configFile: join(RENDERER_DIST, '../../vite.config.ts'), logLevel: 'warn' });
}
