import { defineConfig } from 'vitest/config';

// Unit tests live beside the code (src/**/*.test.ts); end-to-end, simulation and
// cross-module suites live in test/. E2E tests start real processes from dist/,
// so `npm test` builds before it runs vitest.
export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default'],
  },
});
