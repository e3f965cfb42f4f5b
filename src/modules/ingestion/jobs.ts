import type { Config } from '../../config.js';
import type { PrismaClient } from '../../generated/prisma/client.js';
import type { Embedder } from '../embeddings/embedder.js';
import { exponentialBackoff, type JobHandler, type JobKind } from '../jobs/job-handler.js';
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
export function ingestionHandlers(dependencies: IngestionDependencies, settings: IngestionSettings): Record<JobKind, JobHandler> {
  return { parse: parseJob(dependencies, settings), embed: embedJob(dependencies, settings), index_delete: indexDeleteJob(dependencies) };
}

/** Removes a deleted document's or workspace's entries from the index, retried until it answers. */
export function indexDeleteJob(dependencies: Pick<IngestionDependencies, 'prisma' | 'index'>): JobHandler {
  const { prisma, index } = dependencies;
  return {
    maxAttempts: 20,
    backoffMs: exponentialBackoff(1_000, 300_000),
    fail: async (job, reason) => {
      await prisma.job.updateMany({ where: { id: job.id, claim: job.claim }, data: { status: 'failed', leaseExpires: null, lastError: reason } });
    },
    async run([job]) {
      const { documentId, workspaceId } = job!.payload as { documentId?: string; workspaceId?: string };
      if (documentId) await index.deleteDocument(documentId);
      if (workspaceId) await index.deleteWorkspace(workspaceId);
      await prisma.job.updateMany({ where: { id: job!.id, claim: job!.claim }, data: { status: 'done', leaseExpires: null, lastError: null } });
    },
  };
}
