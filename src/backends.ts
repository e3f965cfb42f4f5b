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
 * index and the parsing processes. The server (app.ts) and `kb reindex` both compose them here.
 */
export type Backends = {
  embedder: Embedder;
  index: VectorIndex;
  parsePool: ParsePool;
  /** Closes the three, the parsing processes first (a parse may still embed nothing after). */
  close(): Promise<void>;
};

/** What needs no store: the parsing processes and the embedding model. */
export type Models = {
  embedder: Embedder;
  parsePool: ParsePool;
  /** Closes both, once however often it is called. */
  close(): Promise<void>;
};

export type ModelOptions = {
  parseProcesses: number;
  /** Starts the parsing processes now, so that the first upload is parsed at once. */
  warmParsers: boolean;
};

/**
 * Starts the parsing processes and loads the embedding model. Neither needs the store, so a process
 * starts them before it opens the store, and they load while it opens (about 2 s each here).
 */
export async function loadModels(config: Config, options: ModelOptions): Promise<Models> {
  // Its processes load the parsers while the model loads.
  const parsePool = createParsePool(options.parseProcesses, {
    memoryMb: config.ingestion.parseMemoryMb,
    idleSeconds: config.ingestion.parseIdleSeconds,
    warm: options.warmParsers,
    cpus: config.threadPlacement?.allCpus,
  });
  try {
    const embedder = await createEmbedder(config);
    let closing: Promise<void> | undefined;
    return {
      embedder,
      parsePool,
      close: () =>
        (closing ??= (async () => {
          await parsePool.close();
          await embedder.close();
        })()),
    };
  } catch (error) {
    await parsePool.close();
    throw error;
  }
}

/**
 * The same models for a process that does not own them: closing these leaves the models open for
 * their owner, who loaded them once for several servers in one process (the test suite).
 */
export function lentModels({ embedder, parsePool }: Models): Models {
  const leftOpen = async () => {};
  return {
    embedder: { modelId: embedder.modelId, dimensions: embedder.dimensions, embed: (texts, purpose, signal) => embedder.embed(texts, purpose, signal), close: leftOpen },
    parsePool: {
      parse: (task, signal, onProgress) => parsePool.parse(task, signal, onProgress),
      get processes() {
        return parsePool.processes;
      },
      warmed: parsePool.warmed,
      close: leftOpen,
    },
    close: leftOpen,
  };
}

export type BackendOptions = {
  /** The index prepares for searches at start (pgvector: keyword postings); a CLI command that only writes does not. */
  loadAhead?: boolean;
  /** Wraps the model as it is opened (the server meters it). */
  wrapEmbedder?: (embedder: Embedder) => Embedder;
};

/** The index over the store, beside the models (loaded or still loading); closes the models when it fails. */
export async function openBackends(config: Config, db: Database, models: Models | Promise<Models>, options: BackendOptions = {}): Promise<Backends> {
  const loaded = await models;
  try {
    const embedder = options.wrapEmbedder ? options.wrapEmbedder(loaded.embedder) : loaded.embedder;
    const index = await openVectorIndex(config, db, embedder, { loadAhead: options.loadAhead });
    const { parsePool } = loaded;
    return {
      embedder,
      index,
      parsePool,
      close: async () => {
        await parsePool.close();
        await index.close();
        await embedder.close();
      },
    };
  } catch (error) {
    await loaded.close();
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
  options: Omit<JobQueueOptions, 'leaseMs' | 'turnMs'> & { wrapHandlers?: (handlers: JobHandlers) => JobHandlers },
  log: Logger,
): JobQueue {
  const { wrapHandlers, ...queueOptions } = options;
  let queue: JobQueue | undefined;
  const { embedder, index, parsePool } = backends;
  const handlers = ingestionHandlers({ prisma: db.prisma, parsePool, embedder, index, wake: () => queue?.wake() }, ingestionSettings(config));
  queue = startJobQueue(db.prisma, wrapHandlers ? wrapHandlers(handlers) : handlers, { ...queueOptions, leaseMs: config.ingestion.leaseSeconds * 1000, turnMs: config.ingestion.turnSeconds * 1000 }, log);
  return queue;
}
