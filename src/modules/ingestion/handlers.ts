import type { Config } from '../../config.js';
import type { PrismaClient } from '../../generated/prisma/client.js';
import type { Embedder } from '../embeddings/embedder.js';
import { advance } from '../jobs/advance.js';
import { exponentialBackoff, type JobHandler, type JobHandlers } from '../jobs/job-handler.js';
import type { VectorIndex } from '../retrieval/vector-index.js';
import { embedJob } from './embed-job.js';
import type { ParseLimits } from './parse.js';
import { parseJob } from './parse-job.js';
import type { ParsePool } from './parse-pool.js';

export type IngestionDependencies = {
  prisma: PrismaClient;
  parsePool: ParsePool;
  embedder: Embedder;
  index: VectorIndex;
  /** Wakes the queue: a document moved on to its next stage. */
  wake(): void;
};

export type IngestionSettings = {
  /** A parse may take `base + perMegabyte × the file's size in MiB` seconds; longer fails the document. */
  parseTimeoutSeconds: { base: number; perMegabyte: number };
  parseLimits: ParseLimits;
  /** Chunks sent to the embedder at once. */
  embedBatchSize: number;
  /** Attempts of the embed stage before its document fails; the embedder may be down meanwhile. */
  embedMaxAttempts: number;
  /** Longest wait between two attempts of the embed stage. */
  embedMaxBackoffMs: number;
};

/** The ingestion settings of the configuration. */
export function ingestionSettings(config: Config): IngestionSettings {
  return {
    parseTimeoutSeconds: config.ingestion.parseTimeoutSeconds,
    parseLimits: {
      maxUnpackedBytes: config.ingestion.maxUnpackedBytes,
      maxTextCharacters: config.ingestion.maxTextCharacters,
      ocr: config.ingestion.ocr,
      maxOcrPages: config.ingestion.maxOcrPages,
    },
    embedBatchSize: config.embeddings.batchSize,
    embedMaxAttempts: config.ingestion.embedMaxAttempts,
    embedMaxBackoffMs: config.ingestion.embedMaxBackoffSeconds * 1000,
  };
}

/** The handler of every ingestion job kind, for the queue. */
export function ingestionHandlers(dependencies: IngestionDependencies, settings: IngestionSettings): JobHandlers {
  return { parse: parseJob(dependencies, settings), embed: embedJob(dependencies, settings), index_delete: indexDeleteJob(dependencies) };
}

/** Removes a deleted document's or workspace's entries from the index, retried until it answers. */
export function indexDeleteJob(dependencies: Pick<IngestionDependencies, 'prisma' | 'index'>): JobHandler<'index_delete'> {
  const { prisma, index } = dependencies;
  return {
    maxAttempts: 20,
    backoffMs: exponentialBackoff(1_000, 300_000),
    fail: async (job, reason) => {
      await advance(prisma, [job], { step: 'failed', reason });
    },
    async run([job]) {
      const target = job!.payload;
      if ('documentId' in target) await index.deleteDocument(target.documentId);
      else await index.deleteWorkspace(target.workspaceId);
      await advance(prisma, [job!], { step: 'done' });
    },
  };
}
