import { defineConfig } from '@playwright/test';
import { chromiumLaunchOptions } from './e2e/browser.ts';

// End-to-end tests drive the real dashboard against real router and simulated-worker processes.
export default defineConfig({
  testDir: 'e2e',
  testMatch: /.*\.spec\.ts/,
  timeout: 120_000,
  workers: 1,
  retries: 0,
  reporter: [['list'], ['json', { outputFile: 'test-results/e2e.json' }]],
  outputDir: 'test-results/e2e',
  use: {
    headless: true,
    screenshot: 'on',
    launchOptions: chromiumLaunchOptions(),
  },
});
