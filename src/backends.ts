import type { Config } from './config.js';
import type { Database } from './db/database.js';
import type { Logger } from './logger.js';
import type { Embedder } from './modules/embeddings/embedder.js';
import { createEmbedder } from './modules/embeddings/select.js';
import { ingestionHandlers, ingestionSettings } from './modules/ingestion/handlers.js';
import { createParsePool, type ParsePool } from './modules/ingestion/parse-pool.js';
import type { JobHandlers } from './modules/jobs/job-handler.js';
import { startJobQueue, type JobQueue, type JobQueueOptions } from './modules/jobs/queue.js';
import { openVectorIndex } from './modules/retrieval/select.js';
import type { VectorIndex } from './modules/retrieval/vector-index.js';

/**
 * What every process that ingests or searches opens beside its store: the embedding model, the
 * index and the parsing threads. The server (app.ts) and `kb reindex` both compose them here.
 */
export type Backends = {
  embedder: Embedder;
  index: VectorIndex;
  parsePool: ParsePool;
  /** Closes the three, the parsing threads first (a parse may still embed nothing after). */
  close(): Promise<void>;
};

export type BackendOptions = {
  parseThreads: number;
  /** Starts the parsing threads now, so that the first upload is parsed at once. */
  warmParsers: boolean;
  /** The index prepares for searches at start (pgvector: keyword postings); a CLI command that only writes does not. */
  loadAhead?: boolean;
  /** Wraps the model as it is opened (the server meters it). */
  wrapEmbedder?: (embedder: Embedder) => Embedder;
};

export async function openBackends(config: Config, db: Database, options: BackendOptions): Promise<Backends> {
  // Its threads load the parsers while the model loads.
  const parsePool = createParsePool(options.parseThreads, {
    memoryMb: config.ingestion.parseMemoryMb,
    idleSeconds: config.ingestion.parseThreadIdleSeconds,
    warm: options.warmParsers,
  });
  let embedder: Embedder | undefined;
  try {
    const opened = await createEmbedder(config);
    embedder = options.wrapEmbedder ? options.wrapEmbedder(opened) : opened;
    const index = await openVectorIndex(config, db, embedder, { loadAhead: options.loadAhead });
    const model = embedder;
    return {
      embedder: model,
      index,
      parsePool,
      close: async () => {
        await parsePool.close();
        await index.close();
        await model.close();
      },
    };
  } catch (error) {
    await embedder?.close();
    await parsePool.close();
    throw error;
  }
}

/**
 * The queue's workers with the ingestion jobs (parse, embed, index_delete) over the backends.
 * `wrapHandlers` lets the server meter them.
 */
export function startIngestionQueue(
  config: Config,
  db: Database,
  backends: Pick<Backends, 'embedder' | 'index' | 'parsePool'>,
  options: Omit<JobQueueOptions, 'leaseMs'> & { wrapHandlers?: (handlers: JobHandlers) => JobHandlers },
  log: Logger,
): JobQueue {
  const { wrapHandlers, ...queueOptions } = options;
  let queue: JobQueue | undefined;
  const { embedder, index, parsePool } = backends;
  const handlers = ingestionHandlers({ prisma: db.prisma, parsePool, embedder, index, wake: () => queue?.wake() }, ingestionSettings(config));
  queue = startJobQueue(db.prisma, wrapHandlers ? wrapHandlers(handlers) : handlers, { ...queueOptions, leaseMs: config.ingestion.leaseSeconds * 1000 }, log);
  return queue;
}
