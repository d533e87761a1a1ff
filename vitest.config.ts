import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // Each file starts its own redis-server and servers on free loopback ports.
    fileParallelism: true,
    maxWorkers: 2,
  },
});
