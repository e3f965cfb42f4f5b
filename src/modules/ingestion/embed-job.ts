import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import { EmbedderError } from '../embeddings/embedder.js';
import { advance } from '../jobs/advance.js';
import { DocumentDeletedError, exponentialBackoff, PermanentJobError, type JobHandler } from '../jobs/job-handler.js';
import { analyze } from '../retrieval/analyzer.js';
import type { IndexedChunk } from '../retrieval/vector-index.js';
import { indexedText, nameWords } from './document-name.js';
import { failDocument } from './held-jobs.js';
import type { IngestionDependencies, IngestionSettings } from './handlers.js';

/** An embed claim takes waiting jobs up to this many embedder batches of chunks. */
const EMBED_CLAIM_BATCHES = 2;

function batches<Item>(items: readonly Item[], size: number): Item[][] {
  const result: Item[][] = [];
  for (let start = 0; start < items.length; start += size) result.push(items.slice(start, start + size));
  return result;
}

type PendingChunk = {
  id: string;
  document_id: string;
  chunk_index: number;
  content: string;
  workspace_id: string;
  filename: string;
  index_context: string | null;
  headings: unknown;
};

/** A chunk as the index sees it; a document parsed before contexts were kept has its file name's words. */
const indexedTextOf = (chunk: PendingChunk) =>
  indexedText(
    chunk.index_context ?? nameWords(chunk.filename, ''),
    Array.isArray(chunk.headings) ? chunk.headings.filter((heading): heading is string => typeof heading === 'string') : [],
    chunk.content,
  );

export type ChunkToIndex = PendingChunk & { indexedText: string };

/**
 * The stored chunks of these documents with the text the index takes (what the model embeds is
 * also what the keyword side analyses), in the documents' order; only those not embedded yet
 * when `unembeddedOnly` (the embed stage), all of them otherwise (`kb reindex`).
 */
export async function chunksToIndex(prisma: PrismaClient, documentIds: readonly string[], { unembeddedOnly }: { unembeddedOnly: boolean }): Promise<ChunkToIndex[]> {
  const stored = await prisma.$queryRaw<PendingChunk[]>`
    SELECT c.id, c.document_id, c.chunk_index, c.content, d.workspace_id, d.filename, d.index_context, c.metadata -> 'headings' AS headings
      FROM chunks c JOIN documents d ON d.id = c.document_id
     WHERE c.document_id = ANY(${documentIds}::uuid[]) ${unembeddedOnly ? Prisma.sql`AND c.embedded_at IS NULL` : Prisma.empty}
     ORDER BY array_position(${documentIds}::uuid[], c.document_id), c.chunk_index`;
  return stored.map((chunk) => ({ ...chunk, indexedText: indexedTextOf(chunk) }));
}

/** A chunk and its vector as the index stores them. */
export const indexedChunk = (chunk: ChunkToIndex, embedding: Float32Array): IndexedChunk => ({
  chunkId: chunk.id,
  documentId: chunk.document_id,
  workspaceId: chunk.workspace_id,
  embedding,
  terms: analyze(chunk.indexedText),
});

/**
 * Stage two: embed the documents' chunks that are not embedded yet and write them to the index;
 * a document is ready when all its chunks are. Short documents are embedded together: the queue
 * claims waiting embed jobs with the first one up to `embedClaimChunks` chunks, so a bulk upload
 * of abstracts pays for a claim, an index write and a state change per batch, not per document.
 * The next batch is embedded while the last one is written, so the embedder does not wait on the
 * store. An embedder that is down delays the documents (retries with backoff) rather than
 * failing them at once. A document whose turn is over while other users wait (JobContext.turnOver)
 * is given back between two batches and goes on at its next claim.
 */
export function embedJob(dependencies: IngestionDependencies, settings: IngestionSettings): JobHandler<'embed'> {
  const { prisma, embedder, index } = dependencies;
  const claimChunks = settings.embedBatchSize * EMBED_CLAIM_BATCHES;
  return {
    maxAttempts: settings.embedMaxAttempts,
    backoffMs: exponentialBackoff(1_000, settings.embedMaxBackoffMs),
    fail: (job, reason) => failDocument(prisma, job, reason),
    async companions(first) {
      // The oldest waiting embed jobs whose chunks, with the first job's, fill `claimChunks`.
      const rows = await prisma.$queryRaw<{ id: string }[]>`
        WITH first AS (SELECT greatest(chunk_count - embedded_chunks, 1) AS chunks FROM documents WHERE id = ${first.document_id}::uuid),
        waiting AS (
          SELECT j.id, j.run_after, j.created_at, greatest(d.chunk_count - d.embedded_chunks, 1) AS chunks
            FROM jobs j JOIN documents d ON d.id = j.document_id
           WHERE j.kind = 'embed' AND j.status = 'queued' AND j.run_after <= clock_timestamp()
             AND j.id <> ${first.id}::uuid AND NOT coalesce((j.payload ->> 'solo')::boolean, false)
           ORDER BY j.run_after, j.created_at
           LIMIT ${claimChunks})
        SELECT id FROM (
          SELECT id, sum(chunks) OVER (ORDER BY run_after, created_at, id) AS running_total FROM waiting
        ) AS totals
        WHERE running_total + (SELECT chunks FROM first) <= ${claimChunks}`;
      return rows.map((row) => row.id);
    },
    async run(jobs, { signal, turnOver }) {
      const documentIds = jobs.map((job) => job.document_id!);
      const pending = await chunksToIndex(prisma, documentIds, { unembeddedOnly: true });
      const embedBatch = async (batch: typeof pending) => {
        try {
          return { batch, vectors: await embedder.embed(batch.map((chunk) => chunk.indexedText), 'passage', signal) };
        } catch (error) {
          if (error instanceof EmbedderError && error.kind === 'permanent') {
            throw new PermanentJobError(`the embedding model refused the document: ${error.message}`);
          }
          throw error;
        }
      };
      /** Documents deleted while their chunks were embedded: their remaining chunks are skipped. */
      const deleted = new Set<string>();
      const work = batches(pending, settings.embedBatchSize);
      let next = work.length > 0 ? embedBatch(work[0]!) : undefined;
      // Keep the promise handled: its failure is seen when it is awaited.
      next?.catch(() => {});
      for (let position = 0; next; position += 1) {
        const embedded = await next;
        const more = position + 1 < work.length;
        // A long document gives way to other users between batches (claims together are small:
        // at most EMBED_CLAIM_BATCHES). The next batch is not started then, so nothing is wasted.
        const yielding = more && jobs.length === 1 && (await turnOver());
        next = more && !yielding ? embedBatch(work[position + 1]!) : undefined;
        next?.catch(() => {});
        const batch = embedded.batch.filter((chunk) => !deleted.has(chunk.document_id));
        if (batch.length > 0) {
          const vectorOf = new Map(embedded.batch.map((chunk, offset) => [chunk.id, embedded.vectors[offset]!]));
          await index.upsert(
            batch.map((chunk) => indexedChunk(chunk, vectorOf.get(chunk.id)!)),
            signal,
          );
          const chunkIds = batch.map((chunk) => chunk.id);
          const batchDocumentIds = [...new Set(batch.map((chunk) => chunk.document_id))];
          const [marked] = await prisma.$transaction([
            prisma.$queryRaw<{ document_id: string }[]>`
              UPDATE chunks SET embedded_at = now() WHERE id = ANY(${chunkIds}::uuid[]) RETURNING document_id`,
            prisma.$executeRaw`
              UPDATE documents d SET embedded_chunks = (SELECT count(*) FROM chunks c WHERE c.document_id = d.id AND c.embedded_at IS NOT NULL)
               WHERE d.id = ANY(${batchDocumentIds}::uuid[])`,
          ]);
          const alive = new Set(marked.map((row) => row.document_id));
          for (const documentId of batchDocumentIds) {
            if (alive.has(documentId)) continue;
            // Deleted while this batch was embedded (its chunks went with it): its index_delete job
            // may already have run, so take back what was just written (an external index is not
            // cleaned by the cascade).
            deleted.add(documentId);
            await index.deleteDocument(documentId);
          }
          if (deleted.size === documentIds.length) throw new DocumentDeletedError();
        }
        if (yielding) {
          // What is embedded stays embedded: the next claim goes on from the first chunk without a vector.
          await advance(prisma, jobs, { step: 'release' });
          return 'yielded';
        }
      }
      await prisma.$transaction([
        prisma.$executeRaw`
          UPDATE documents SET status = 'ready', error = NULL
           WHERE id = ANY(${documentIds}::uuid[]) AND embedded_chunks = chunk_count`,
        advance(prisma, jobs, { step: 'done' }),
      ]);
      return undefined;
    },
  };
}
