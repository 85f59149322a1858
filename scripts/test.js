#!/usr/bin/env node
// `npm test`: every check, in order: typecheck, lint, dashboard build, unit/property/integration
// tests (vitest), end-to-end tests (Playwright). Ends with one line "N passed, N failed, N skipped".
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, mkdirSync } from 'node:fs';

const totals = { passed: 0, failed: 0, skipped: 0 };
let failedSteps = [];

function step(name, cmd, args, env = {}) {
  console.log(`\n=== ${name}: ${cmd} ${args.join(' ')}`);
  const r = spawnSync(cmd, args, { stdio: 'inherit', env: { ...process.env, ...env } });
  if (r.status !== 0) failedSteps.push(name);
  return r.status === 0;
}

function readJson(path) {
  try { return JSON.parse(readFileSync(path, 'utf8')); } catch { return null; }
}

mkdirSync('test-results', { recursive: true });
const only = process.argv.slice(2);
const want = (s) => only.length === 0 || only.includes(s);

if (want('typecheck')) step('typecheck', 'npx', ['tsc', '-p', 'tsconfig.json', '--noEmit']);
if (want('lint')) step('lint', 'npx', ['eslint', '.']);
if (want('build')) step('build', 'npx', ['vite', 'build', '--logLevel', 'warn']);

if (want('unit')) {
  step('vitest', 'npx', ['vitest', 'run', '--reporter=default', '--reporter=json', '--outputFile.json=test-results/vitest.json']);
  const v = readJson('test-results/vitest.json');
  if (v) {
    totals.passed += v.numPassedTests ?? 0;
    totals.failed += v.numFailedTests ?? 0;
    totals.skipped += (v.numPendingTests ?? 0) + (v.numTodoTests ?? 0);
  }
}

if (want('e2e')) {
  const system = ['/usr/bin/chromium', '/usr/bin/chromium-browser', process.env.BATON_CHROMIUM].filter(Boolean).some((p) => existsSync(p));
  if (!system) {
    // No system Chromium: try Playwright's own browser. Where there is no network this fails and
    // the e2e step fails with Playwright's own message naming the missing browser.
    console.log('no system Chromium found; trying `npx playwright install chromium`');
    spawnSync('npx', ['playwright', 'install', 'chromium'], { stdio: 'inherit', timeout: 300_000 });
  }
  step('e2e', 'npx', ['playwright', 'test']);
  const e = readJson('test-results/e2e.json');
  if (e?.stats) {
    totals.passed += e.stats.expected ?? 0;
    totals.failed += (e.stats.unexpected ?? 0) + (e.stats.flaky ?? 0);
    totals.skipped += e.stats.skipped ?? 0;
  }
}

if (failedSteps.length > 0) console.log(`\nfailed steps: ${failedSteps.join(', ')}`);
if (failedSteps.length > 0 && totals.failed === 0) totals.failed = failedSteps.length;
console.log(`\n${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
process.exit(failedSteps.length > 0 ? 1 : 0);
