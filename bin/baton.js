#!/usr/bin/env node
// Entry point for `npx baton ...`. The code base is TypeScript run through tsx's loader, so the
// same sources serve the CLI, the Electron main process and the tests without a build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../cli/main.ts');
await main(process.argv.slice(2));
