import { defineConfig } from 'vitest/config';

// Unit, property and HTTP-integration tests. Integration tests spawn real worker and router
// processes on loopback, so they get generous timeouts; the machines are shared and slow.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'test/**/*.test.tsx'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
  },
});
