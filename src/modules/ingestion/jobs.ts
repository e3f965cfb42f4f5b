import type { PrismaClient } from '../../generated/prisma/client.js';
import { readSourceBytes } from '../documents/service.js';
import { EmbedderError, type Embedder } from '../embeddings/embedder.js';
import { DocumentDeletedError, exponentialBackoff, PermanentJobError, type ClaimedJob, type JobHandler } from '../jobs/queue.js';
import { analyze } from '../retrieval/analyzer.js';
import type { VectorIndex } from '../retrieval/vector-index.js';
import type { DocumentType } from './detect.js';
import type { ParseLimits } from './parse.js';
import { ParseLimitError, type ParsePool } from './parse-pool.js';

export type IngestionDependencies = {
  prisma: PrismaClient;
  parsePool: ParsePool;
  embedder: Embedder;
  index: VectorIndex;
  /** Wakes the queue: a document moved on to its next stage. */
  notify(): void;
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

const CHUNK_WRITE_BATCH = 100;

function batches<Item>(items: readonly Item[], size: number): Item[][] {
  const result: Item[][] = [];
  for (let start = 0; start < items.length; start += size) result.push(items.slice(start, start + size));
  return result;
}

/** Fails the job and its document for good, with the reason the document shows. */
async function failDocument(prisma: PrismaClient, job: ClaimedJob, reason: string) {
  await prisma.$transaction([
    prisma.document.updateMany({ where: { id: job.document_id! }, data: { status: 'failed', error: reason } }),
    prisma.job.updateMany({ where: { id: job.id }, data: { status: 'failed', leaseExpires: null, lastError: reason } }),
  ]);
}

/**
 * Stage one: parse and chunk the document in a worker thread and store its chunks; the same job
 * row then becomes the document's `embed` job (attempts counted afresh).
 */
export function parseJob(dependencies: IngestionDependencies, settings: IngestionSettings): JobHandler {
  const { prisma, parsePool } = dependencies;
  const timeoutSecondsFor = (sizeBytes: number) =>
    Math.ceil(settings.parseTimeoutSeconds.base + (settings.parseTimeoutSeconds.perMegabyte * sizeBytes) / (1024 * 1024));
  return {
    maxAttempts: 3,
    backoffMs: exponentialBackoff(1_000, 60_000),
    fail: (job, reason) => failDocument(prisma, job, reason),
    async run(job, { signal }) {
      const documentId = job.document_id!;
      const document = await prisma.document.findUnique({ where: { id: documentId }, select: { contentType: true, sizeBytes: true } });
      const bytes = document && (await readSourceBytes(prisma, documentId));
      if (!document || !bytes) return;
      const { count } = await prisma.document.updateMany({ where: { id: documentId }, data: { status: 'processing', error: null } });
      if (count === 0) return;
      const timeoutSeconds = timeoutSecondsFor(document.sizeBytes);
      const timeout = AbortSignal.timeout(timeoutSeconds * 1000);
      let result;
      try {
        result = await parsePool.parse(
          {
            bytes,
            type: document.contentType as DocumentType,
            chunkOptions: { chunkTokens: Number(job.payload.chunkTokens), overlapTokens: Number(job.payload.overlapTokens) },
            limits: settings.parseLimits,
          },
          AbortSignal.any([signal, timeout]),
        );
      } catch (error) {
        if (timeout.aborted && !signal.aborted) {
          throw new PermanentJobError(`parsing took longer than the limit of ${timeoutSeconds} s for a file of this size`);
        }
        // Over a limit of memory: the same file would fail the same way again.
        if (error instanceof ParseLimitError) throw new PermanentJobError(error.message);
        throw error;
      }
      if (!result.ok) throw new PermanentJobError(result.error);
      const parsed = result;
      const empty = parsed.chunks.length === 0;
      await prisma.$transaction(
        async (tx) => {
          await tx.chunk.deleteMany({ where: { documentId } });
          // A statement per batch keeps each within PostgreSQL's limit of 65,535 parameters.
          for (const batch of batches(parsed.chunks, CHUNK_WRITE_BATCH)) {
            await tx.chunk.createMany({
              data: batch.map((chunk) => ({
                documentId,
                chunkIndex: chunk.chunkIndex,
                content: chunk.content,
                tokenCount: chunk.tokenCount,
                metadata: chunk.metadata,
              })),
            });
          }
          await tx.document.update({
            where: { id: documentId },
            data: {
              // Nothing to embed: ready at once.
              status: empty ? 'ready' : 'processing',
              error: null,
              text: parsed.text,
              pageCount: parsed.pageCount,
              chunkCount: parsed.chunks.length,
              embeddedChunks: 0,
            },
          });
          await tx.job.update({
            where: { id: job.id },
            data: empty
              ? { status: 'done', leaseExpires: null, lastError: null }
              : { kind: 'embed', status: 'queued', attempts: 0, leaseExpires: null, lastError: null, runAfter: new Date() },
          });
        },
        { timeout: 120_000 },
      );
      if (!empty) dependencies.notify();
    },
  };
}

type PendingChunk = { id: string; chunk_index: number; content: string; workspace_id: string };

/**
 * Stage two: embed the document's chunks that are not embedded yet, in batches, and write them
 * to the index; the document is ready when all are. The next batch is embedded while the last
 * one is written, so the embedder does not wait on the store. An embedder that is down delays
 * the document (retries with backoff) rather than failing it at once.
 */
export function embedJob(dependencies: IngestionDependencies, settings: IngestionSettings): JobHandler {
  const { prisma, embedder, index } = dependencies;
  return {
    maxAttempts: settings.embedMaxAttempts,
    backoffMs: exponentialBackoff(1_000, settings.embedMaxBackoffMs),
    fail: (job, reason) => failDocument(prisma, job, reason),
    async run(job, { signal }) {
      const documentId = job.document_id!;
      const pending = await prisma.$queryRaw<PendingChunk[]>`
        SELECT c.id, c.chunk_index, c.content, d.workspace_id FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE c.document_id = ${documentId}::uuid AND c.embedded_at IS NULL
         ORDER BY c.chunk_index`;
      const embedBatch = async (batch: PendingChunk[]) => {
        try {
          return { batch, vectors: await embedder.embed(batch.map((chunk) => chunk.content), 'passage', signal) };
        } catch (error) {
          if (error instanceof EmbedderError && error.kind === 'permanent') {
            throw new PermanentJobError(`the embedding model refused the document: ${error.message}`);
          }
          throw error;
        }
      };
      const work = batches(pending, settings.embedBatchSize);
      let next = work.length > 0 ? embedBatch(work[0]!) : undefined;
      // Keep the promise handled: its failure is seen when it is awaited.
      next?.catch(() => {});
      for (let position = 0; next; position += 1) {
        const { batch, vectors } = await next;
        next = position + 1 < work.length ? embedBatch(work[position + 1]!) : undefined;
        next?.catch(() => {});
        await index.upsert(
          batch.map((chunk, offset) => ({
            chunkId: chunk.id,
            documentId,
            workspaceId: chunk.workspace_id,
            embedding: vectors[offset]!,
            terms: analyze(chunk.content),
          })),
          signal,
        );
        const chunkIds = batch.map((chunk) => chunk.id);
        const [marked] = await prisma.$transaction([
          prisma.$executeRaw`UPDATE chunks SET embedded_at = now() WHERE id = ANY(${chunkIds}::uuid[])`,
          prisma.$executeRaw`
            UPDATE documents SET embedded_chunks = (SELECT count(*) FROM chunks WHERE document_id = ${documentId}::uuid AND embedded_at IS NOT NULL)
             WHERE id = ${documentId}::uuid`,
        ]);
        if (marked === 0) {
          // Deleted while this batch was embedded: its index_delete job may already have run, so
          // take back what was just written (an external index is not cleaned by the cascade).
          await index.deleteDocument(documentId);
          throw new DocumentDeletedError();
        }
      }
      await prisma.$transaction([
        prisma.$executeRaw`
          UPDATE documents SET status = 'ready', error = NULL
           WHERE id = ${documentId}::uuid AND embedded_chunks = chunk_count`,
        prisma.job.updateMany({ where: { id: job.id }, data: { status: 'done', leaseExpires: null, lastError: null } }),
      ]);
    },
  };
}

/** Removes a deleted document's or workspace's entries from the index, retried until it answers. */
export function indexDeleteJob(dependencies: Pick<IngestionDependencies, 'prisma' | 'index'>): JobHandler {
  const { prisma, index } = dependencies;
  return {
    maxAttempts: 20,
    backoffMs: exponentialBackoff(1_000, 300_000),
    fail: async (job, reason) => {
      await prisma.job.updateMany({ where: { id: job.id }, data: { status: 'failed', leaseExpires: null, lastError: reason } });
    },
    async run(job) {
      const { documentId, workspaceId } = job.payload as { documentId?: string; workspaceId?: string };
      if (documentId) await index.deleteDocument(documentId);
      if (workspaceId) await index.deleteWorkspace(workspaceId);
      await prisma.job.updateMany({ where: { id: job.id }, data: { status: 'done', leaseExpires: null, lastError: null } });
    },
  };
}
