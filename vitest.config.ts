import { configDefaults, defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { browserExecutable } from './test/support/browser.js';

// Tests of Elasticsearch itself run on its leg of the matrix only: CI fails on any skipped test,
// so elsewhere the file is left out rather than skipped.
const elasticsearchOnly = ['src/modules/retrieval/elasticsearch-index.test.ts', 'src/modules/retrieval/elasticsearch-lifecycle.test.ts', 'src/modules/retrieval/elasticsearch-migrations.test.ts', 'test/reindex-online.test.ts'];

// pgvector's own workings: the Elasticsearch leg's PostgreSQL has no pgvector, and the embedded
// leg runs them on the embedded store. (The contract all indexes share runs on every leg.)
const pgvectorOnly = [
  'src/modules/retrieval/pgvector-index.test.ts',
  'src/modules/retrieval/mirror-sync.test.ts',
  'src/modules/retrieval/pgvector-graph-read.test.ts',
  'src/modules/retrieval/pgvector-vector-graph.test.ts',
];

// Files about a PostgreSQL server itself (an outage of it, its shared buffers): on the embedded leg
// the store is inside the process, so they are left out there rather than skipped.
const postgresOnly = ['test/across-processes.test.ts', 'test/store-outage.test.ts', 'src/modules/retrieval/pgvector-graph-read.test.ts'];

// Files that use no store, or only an embedded store of their own whatever the leg: the
// PostgreSQL legs would run them again exactly as the embedded leg does.
const storeIndependent = [
  'src/config.test.ts',
  'src/modules/retrieval/vector-graph.test.ts',
  'src/auth/api-key-cache.test.ts',
  'src/http/console.test.ts',
  'src/modules/agent/repetition.test.ts',
  'src/modules/agent/text.test.ts',
  'src/modules/documents/file-reads.test.ts',
  'src/modules/documents/source-groups.test.ts',
  'src/modules/embeddings/embeddings.test.ts',
  'src/modules/embeddings/openai-embedder.test.ts',
  'src/modules/ingestion/chunk.fuzz.test.ts',
  'src/modules/ingestion/chunk.test.ts',
  'src/modules/ingestion/detect.test.ts',
  'src/modules/ingestion/document-name.test.ts',
  'src/modules/ingestion/office.fuzz.test.ts',
  'src/modules/ingestion/parse-pool.test.ts',
  'src/modules/ingestion/parse.test.ts',
  'src/modules/ingestion/parse-text.test.ts',
  'src/modules/retrieval/document-prior.test.ts',
  'src/modules/retrieval/fresh-vectors.test.ts',
  'src/modules/retrieval/input.test.ts',
  'src/modules/retrieval/pgvector-schema.test.ts',
  'src/modules/retrieval/query-focus.test.ts',
  'src/modules/retrieval/reading-ahead.test.ts',
  'src/modules/retrieval/term-postings.test.ts',
  'test/cli-embedded.test.ts',
  'test/embedded-cache.test.ts',
  'test/embedded-maintenance.test.ts',
  'test/embedded-store-thread.test.ts',
  'test/embedding-server.test.ts',
  'test/reindex.test.ts',
  // MCP is a transport over the REST endpoints, which every leg tests on its own store.
  'test/mcp.test.ts',
];

// The console's end-to-end tests drive a browser against the embedded store's leg (the console
// uses the API only, which the other legs test). They need the system's Chromium: CI installs
// it, and fails without it; a machine without one leaves them out and says so.
const endToEnd = ['test/console.e2e.test.ts'];
const runEndToEnd = !process.env.DATABASE_URL && (Boolean(process.env.CI) || browserExecutable() !== null);
if (!process.env.DATABASE_URL && !runEndToEnd) {
  process.stderr.write('vitest: no Chromium found (apt-get install chromium, or set KB_BROWSER): the console end-to-end tests are left out\n');
}

// The chat-model answer path against a real llama.cpp server (.ci/start-llama.sh prints the URL
// to set as KB_TEST_LLAMA_URL). The answer path does not depend on the store: CI runs it on the
// embedded store's leg only. Without the variable the file is left out, and that is said.
const llama = ['test/agent-llama.test.ts'];
const runLlama = !process.env.DATABASE_URL && Boolean(process.env.KB_TEST_LLAMA_URL);
if (!process.env.DATABASE_URL && !runLlama) {
  process.stderr.write('vitest: KB_TEST_LLAMA_URL is not set (bash .ci/start-llama.sh prints it): the llama.cpp answer tests are left out\n');
}

// The service on a three-node Elasticsearch cluster, one node killed (.ci/start-elasticsearch-cluster.sh
// prints the URLs to set as KB_TEST_ES_CLUSTER_URLS): on the Elasticsearch leg only. Without the
// variable the file is left out there, and that is said.
const elasticsearchCluster = ['test/elasticsearch-cluster.test.ts'];
const runElasticsearchCluster = Boolean(process.env.ELASTICSEARCH_URL) && Boolean(process.env.KB_TEST_ES_CLUSTER_URLS);
if (process.env.ELASTICSEARCH_URL && !runElasticsearchCluster) {
  process.stderr.write('vitest: KB_TEST_ES_CLUSTER_URLS is not set (bash .ci/start-elasticsearch-cluster.sh prints it): the Elasticsearch cluster test is left out\n');
}

// Files that took a minute or more on a leg of CI (2 cores), longest first. They start first, so
// that none of them begins last and runs on alone after the other worker has nothing left. A
// clean clone has no vitest cache of durations; vitest then starts the largest files first, and
// the one-test crash file (2-2.5 minutes, 5 KB) began last.
const longRunning = [
  'test/ingestion-crash.test.ts',
  'test/cli.test.ts',
  'test/ingestion-limits.test.ts',
  'test/agent-llama.test.ts',
  'src/modules/ingestion/chunk.fuzz.test.ts',
  'test/cli-embedded.test.ts',
  'test/http-limits.test.ts',
  'test/console.e2e.test.ts',
  'test/agent-resume.test.ts',
  'test/embedded-cache.test.ts',
  'test/embedding-server.test.ts',
];

class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (file: TestSpecification) => {
      const position = longRunning.findIndex((name) => file.moduleId.endsWith(name));
      return position === -1 ? longRunning.length : position;
    };
    const sorted = await super.sort(files);
    return sorted
      .map((file, position) => ({ file, position, rank: rank(file) }))
      .sort((a, b) => a.rank - b.rank || a.position - b.position)
      .map(({ file }) => file);
  }
}

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'clients/**/test/**/*.test.ts'],
    exclude: [
      ...configDefaults.exclude,
      ...(process.env.ELASTICSEARCH_URL ? pgvectorOnly : elasticsearchOnly),
      ...(process.env.DATABASE_URL ? storeIndependent : postgresOnly),
      ...(runEndToEnd ? [] : endToEnd),
      ...(runLlama ? [] : llama),
      ...(runElasticsearchCluster ? [] : elasticsearchCluster),
    ],
    // Placement keeps a server's HTTP thread off one CPU (src/thread-placement.ts): with two
    // workers of servers at once, all of them would share the other. Servers of the suite leave
    // their threads to the scheduler; test/cli-embedded.test.ts starts one placed, as a user's.
    env: { KB_THREAD_PLACEMENT: 'off' },
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/per-file.ts'],
    // The files of a worker share its imported modules: each file's import of the service, Prisma
    // and GraphQL (about 2 s) is paid once per worker. No test mocks a module or changes the
    // environment; per-file work lives in test/support/per-file.ts.
    isolate: false,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each file starts its own server and store; two cores do not gain from more at once.
    maxWorkers: 2,
    sequence: { sequencer: LongestFirstSequencer },
    reporters: ['default'],
  },
});
