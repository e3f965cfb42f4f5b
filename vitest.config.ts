import { configDefaults, defineConfig } from 'vitest/config';

// Tests of Elasticsearch itself run on its leg of the matrix only: CI fails on any skipped test,
// so elsewhere the file is left out rather than skipped.
const elasticsearchOnly = ['src/modules/retrieval/elasticsearch-index.test.ts'];

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'clients/**/test/**/*.test.ts'],
    exclude: [...configDefaults.exclude, ...(process.env.ELASTICSEARCH_URL ? [] : elasticsearchOnly)],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each file starts its own server and store; two cores do not gain from more at once.
    maxWorkers: 2,
    reporters: ['default'],
  },
});
