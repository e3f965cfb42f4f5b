import type { Config } from '../../config.js';
import type { Database } from '../../db/database.js';
import type { Embedder } from '../embeddings/embedder.js';
import { openPgvectorIndex } from './pgvector-index.js';
import type { VectorIndex } from './vector-index.js';

/** Whether the pgvector index keeps its held workspaces' vectors in graphs in memory (`KB_VECTORS_IN_MEMORY`; `auto`: on the embedded store). */
export const keepsVectorsInMemory = (config: Config) => config.vectorsInMemory === 'on' || (config.vectorsInMemory === 'auto' && !config.databaseUrl);

/**
 * The one place the index is chosen: Elasticsearch when ELASTICSEARCH_URL is set, otherwise
 * pgvector in the store. A new index records the configured model; an existing one keeps the
 * model it was built with (compared at start: see modelMismatch).
 */
export async function openVectorIndex(
  config: Config,
  db: Database,
  embedder: Pick<Embedder, 'modelId' | 'dimensions'>,
  options: { loadAhead?: boolean } = {},
): Promise<VectorIndex> {
  const model = { model: embedder.modelId, dimensions: embedder.dimensions };
  if (config.elasticsearch) {
    const { openElasticsearchIndex } = await import('./elasticsearch-index.js');
    return openElasticsearchIndex(config.elasticsearch, model, { timeoutMs: config.searchTimeoutSeconds * 1000, migrate: config.migrate });
  }
  return openPgvectorIndex(db.prisma, model, {
    keywordMemoryBytes: config.keywordMemoryBytes,
    backgroundWork: db.backgroundWork,
    loadAhead: options.loadAhead,
    readGraphAhead: db.kind === 'postgres' && options.loadAhead !== false,
    vectorsInMemory: keepsVectorsInMemory(config),
    migrate: config.migrate,
    snapshotDirectory: config.indexSnapshotDir,
    expectTableGrowth: db.expectTableGrowth,
  });
}
