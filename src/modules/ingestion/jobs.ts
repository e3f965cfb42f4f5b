import type { Config } from '../../config.js';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import { EmbedderError, type Embedder } from '../embeddings/embedder.js';
import { DocumentDeletedError, exponentialBackoff, PermanentJobError, stillHeld, type ClaimedJob, type JobHandler, type JobKind } from '../jobs/job-handler.js';
import { analyze } from '../retrieval/analyzer.js';
import type { IndexedChunk, VectorIndex } from '../retrieval/vector-index.js';
import type { DocumentType } from './detect.js';
import { ocrPageSeconds } from './types.js';
import { indexedText, nameWords } from './document-name.js';
import type { ParseLimits } from './parse.js';
import { ParseLimitError, type ParsePool } from './parse-pool.js';
import type { ParseProgress, ParseTaskResult } from './parse-task.js';

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

/** An embed claim takes waiting jobs up to this many embedder batches of chunks. */
const EMBED_CLAIM_BATCHES = 2;

function batches<Item>(items: readonly Item[], size: number): Item[][] {
  const result: Item[][] = [];
  for (let start = 0; start < items.length; start += size) result.push(items.slice(start, start + size));
  return result;
}

/** Fails the job and its document for good, with the reason the document shows; nothing when another worker holds the job now. */
async function failDocument(prisma: PrismaClient, job: ClaimedJob, reason: string) {
  await prisma.$executeRaw`
    WITH failed AS (
      UPDATE jobs SET status = 'failed', lease_expires = NULL, last_error = ${reason}, updated_at = now()
       WHERE id = ${job.id}::uuid AND claim = ${job.claim}::uuid
      RETURNING document_id)
    UPDATE documents SET status = 'failed', error = ${reason}, updated_at = now()
     WHERE id IN (SELECT document_id FROM failed)`;
}

/**
 * The documents of `jobs` whose jobs this worker still holds, for the statements of a transaction
 * that begins with `lockHeld` (so no other worker can claim them before it commits).
 */
const heldDocuments = (jobs: ClaimedJob[]) => Prisma.sql`SELECT document_id FROM jobs WHERE ${stillHeld(jobs)}`;
/**
 * Locks the jobs' documents, then the jobs, in the order a deletion takes them (the document,
 * then by cascade its job), so that a deletion meanwhile waits rather than deadlocks.
 */
const lockHeld = (prisma: PrismaClient, jobs: ClaimedJob[]) => [
  prisma.$queryRaw`
    SELECT id FROM documents WHERE id = ANY(${jobs.map((job) => job.document_id)}::uuid[]) ORDER BY id FOR NO KEY UPDATE`,
  prisma.$queryRaw`SELECT id FROM jobs WHERE ${stillHeld(jobs)} ORDER BY id FOR UPDATE`,
];

/** A parse claim takes at most this many jobs, and only of documents no larger than this. */
const PARSE_CLAIM_JOBS = 16;
const PARSE_COMPANION_MAX_BYTES = 256 * 1024;

type ParseSource = { id: string; filename: string; content_type: string; size_bytes: number; bytes: Uint8Array };
type ParseOutcome = { job: ClaimedJob; failure: string } | (Extract<ParseTaskResult, { ok: true }> & { job: ClaimedJob });

/**
 * Stage one: parse and chunk each document in a worker thread and store its chunks; the same job
 * row then becomes the document's `embed` job (attempts counted afresh). Small documents are
 * parsed together: the queue claims up to PARSE_CLAIM_JOBS of them at once, so a bulk upload of
 * short texts pays one read, one chunk write and one state change per claim, not ten statements
 * per document. A document that cannot be parsed fails alone; the others go on.
 */
export function parseJob(dependencies: Pick<IngestionDependencies, 'prisma' | 'parsePool' | 'index' | 'wake'>, settings: IngestionSettings): JobHandler {
  const { prisma, parsePool, index } = dependencies;
  const timeoutSecondsFor = (sizeBytes: number) =>
    Math.ceil(settings.parseTimeoutSeconds.base + (settings.parseTimeoutSeconds.perMegabyte * sizeBytes) / (1024 * 1024));

  /** The document's chunks, or the reason it fails for good; a transient failure throws. */
  const parseOne = async (job: ClaimedJob, source: ParseSource, signal: AbortSignal): Promise<ParseOutcome> => {
    // The file's allowance, and as much again as a page may take for each page read by OCR.
    const started = Date.now();
    let timeoutSeconds = timeoutSecondsFor(source.size_bytes);
    let ocrPages = 0;
    const deadline = new AbortController();
    let timer = setTimeout(() => deadline.abort(), timeoutSeconds * 1000);
    const timeout = deadline.signal;
    // Where OCR is, written for every process to show (the document's `stage` is `ocr`), one write at a time and in order.
    let progressWritten = Promise.resolve();
    const onProgress = ({ ocrPage, pageCount }: ParseProgress) => {
      ocrPages += 1;
      timeoutSeconds += ocrPageSeconds;
      clearTimeout(timer);
      timer = setTimeout(() => deadline.abort(), started + timeoutSeconds * 1000 - Date.now());
      progressWritten = progressWritten.then(() =>
        prisma.$executeRaw`
          UPDATE documents SET ocr_pages_done = ${ocrPage - 1}, ocr_pages_total = ${pageCount}
           WHERE id = ${source.id}::uuid AND status = 'processing' AND chunk_count = 0`.then(
          () => undefined,
          // Progress is only shown: the parse goes on without it.
          () => undefined,
        ),
      );
    };
    try {
      const result = await parsePool.parse(
        {
          bytes: source.bytes,
          type: source.content_type as DocumentType,
          filename: source.filename,
          chunkOptions: { chunkTokens: Number(job.payload.chunkTokens), overlapTokens: Number(job.payload.overlapTokens) },
          limits: settings.parseLimits,
        },
        AbortSignal.any([signal, timeout]),
        onProgress,
      );
      return result.ok ? { job, ...result } : { job, failure: result.error };
    } catch (error) {
      if (timeout.aborted && !signal.aborted) {
        const what = ocrPages === 0 ? 'a file of this size' : `a file of this size with ${ocrPages} pages read by OCR`;
        return { job, failure: `parsing took longer than the limit of ${timeoutSeconds} s for ${what}` };
      }
      // Over a limit of memory: the same file would fail the same way again.
      if (error instanceof ParseLimitError) return { job, failure: error.message };
      throw error;
    } finally {
      clearTimeout(timer);
      await progressWritten;
    }
  };

  return {
    maxAttempts: 3,
    backoffMs: exponentialBackoff(1_000, 60_000),
    fail: (job, reason) => failDocument(prisma, job, reason),
    async companions(first) {
      // The same user's oldest waiting parse jobs of small documents, when the first one is small
      // too. Only the same user's: the queue gives users turns, and a claim is one user's turn.
      const rows = await prisma.$queryRaw<{ id: string }[]>`
        SELECT j.id FROM jobs j JOIN documents d ON d.id = j.document_id
         WHERE j.kind = 'parse' AND j.status = 'queued' AND j.run_after <= clock_timestamp()
           AND j.user_id IS NOT DISTINCT FROM ${first.user_id}::uuid
           AND j.id <> ${first.id}::uuid AND NOT coalesce((j.payload ->> 'solo')::boolean, false)
           AND d.size_bytes <= ${PARSE_COMPANION_MAX_BYTES}
           AND (SELECT size_bytes FROM documents WHERE id = ${first.document_id}::uuid) <= ${PARSE_COMPANION_MAX_BYTES}
         ORDER BY j.run_after, j.created_at
         LIMIT ${PARSE_CLAIM_JOBS - 1}`;
      return rows.map((row) => row.id);
    },
    async run(jobs, { signal }) {
      const documentIds = jobs.map((job) => job.document_id!);
      // Documents deleted since their jobs were claimed are simply not found.
      const sources = await prisma.$queryRaw<ParseSource[]>`
        SELECT d.id::text, d.filename, d.content_type, d.size_bytes, s.bytes
          FROM documents d JOIN document_sources s ON s.document_id = d.id
         WHERE d.id = ANY(${documentIds}::uuid[])`;
      const sourceOf = new Map(sources.map((source) => [source.id, source]));
      const present = jobs.filter((job) => sourceOf.has(job.document_id!));
      if (present.length === 0) return;
      // A failed document uploaded again (documents/service.ts): the index may hold entries of its
      // old chunks, which the parse below replaces under new ids. An index outside the store
      // keeps them otherwise; an unreachable one fails this attempt like any transient error.
      for (const job of present) if (job.payload.reindex === true) await index.deleteDocument(job.document_id!);
      await prisma.$executeRaw`UPDATE documents SET status = 'processing', error = NULL, updated_at = now() WHERE id IN (${heldDocuments(present)})`;
      try {
        await parseAndStore(present, sourceOf, signal);
      } catch (error) {
        // A failure that cannot be pinned on one document of the batch (a parser thread that
        // died, a write the store refused): each runs again alone, this attempt not counted, so
        // one bad document cannot fail the others with it.
        if (present.length > 1 && !signal.aborted) {
          throw new PermanentJobError(`parsing ${present.length} documents together failed; each runs again alone: ${(error as Error).message}`);
        }
        throw error;
      }
    },
  };

  async function parseAndStore(present: ClaimedJob[], sourceOf: Map<string, ParseSource>, signal: AbortSignal) {
    // One after another: each parse's time limit starts with it, not while it waits for a parser
    // thread behind the rest of the batch. Small documents take milliseconds each.
    const outcomes: ParseOutcome[] = [];
    for (const job of present) outcomes.push(await parseOne(job, sourceOf.get(job.document_id!)!, signal));
    for (const outcome of outcomes) if ('failure' in outcome) await failDocument(prisma, outcome.job, outcome.failure);
    const parsed = outcomes.flatMap((outcome) => ('failure' in outcome ? [] : [outcome]));
    if (parsed.length === 0) return;

    // Columns as arrays (text goes as text, as a single insert's parameters would, not as JSON
    // strings that jsonb would read back).
    const chunkRows = parsed.flatMap(({ job, chunks }) => chunks.map((chunk) => ({ documentId: job.document_id!, ...chunk })));
    const parsedIds = parsed.map(({ job }) => job.document_id!);
    const parsedJobs = parsed.map(({ job }) => job);
    const held = heldDocuments(parsedJobs);
    const toEmbed = parsed.filter(({ chunks }) => chunks.length > 0).map(({ job }) => job.id);
    const finished = parsed.filter(({ chunks }) => chunks.length === 0).map(({ job }) => job.id);
    // Only documents whose jobs this worker still holds: one deleted meanwhile (its job went with
    // it) or taken over by another worker after this one's lease ran out is left as it is.
    await prisma.$transaction([
      ...lockHeld(prisma, parsedJobs),
      prisma.$executeRaw`DELETE FROM chunks WHERE document_id = ANY(${parsedIds}::uuid[]) AND document_id IN (${held})`,
      prisma.$executeRaw`
        INSERT INTO chunks (id, document_id, chunk_index, content, token_count, metadata)
        SELECT gen_random_uuid(), r.document_id, r.chunk_index, r.content, r.token_count, r.metadata::jsonb
          FROM unnest(${chunkRows.map((row) => row.documentId)}::uuid[], ${chunkRows.map((row) => row.chunkIndex)}::integer[],
                      ${chunkRows.map((row) => row.content)}::text[], ${chunkRows.map((row) => row.tokenCount)}::integer[],
                      ${chunkRows.map((row) => JSON.stringify(row.metadata))}::text[])
               AS r(document_id, chunk_index, content, token_count, metadata)
         WHERE r.document_id IN (${held})`,
      // A document with nothing to embed is ready at once.
      prisma.$executeRaw`
        UPDATE documents d
           SET status = CASE WHEN r.chunk_count = 0 THEN 'ready'::document_status ELSE 'processing'::document_status END,
               error = NULL, text = r.text, page_count = r.page_count, chunk_count = r.chunk_count, embedded_chunks = 0, updated_at = now(),
               ocr_pages_done = d.ocr_pages_total,
               title = r.title, index_context = r.index_context, name_words = r.name_words
          FROM unnest(${parsedIds}::uuid[], ${parsed.map(({ text }) => text)}::text[], ${parsed.map(({ pageCount }) => pageCount)}::integer[],
                      ${parsed.map(({ chunks }) => chunks.length)}::integer[], ${parsed.map(({ title }) => title)}::text[],
                      ${parsed.map(({ context }) => context)}::text[], ${parsed.map(({ nameWords }) => nameWords)}::text[])
                      AS r(id, text, page_count, chunk_count, title, index_context, name_words)
         WHERE d.id = r.id AND d.id IN (${held})`,
      prisma.$executeRaw`
        UPDATE jobs SET kind = 'embed', status = 'queued', attempts = 0, lease_expires = NULL, claim = NULL, last_error = NULL, run_after = now(), updated_at = now(),
                      payload = payload - 'solo' - 'reindex'
         WHERE id = ANY(${toEmbed}::uuid[]) AND document_id IN (${held})`,
      prisma.$executeRaw`
        UPDATE jobs SET status = 'done', lease_expires = NULL, last_error = NULL, updated_at = now()
         WHERE id = ANY(${finished}::uuid[]) AND document_id IN (${held})`,
    ]);
    if (toEmbed.length > 0) dependencies.wake();
  }
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
 * failing them at once.
 */
export function embedJob(dependencies: IngestionDependencies, settings: IngestionSettings): JobHandler {
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
    async run(jobs, { signal }) {
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
        next = position + 1 < work.length ? embedBatch(work[position + 1]!) : undefined;
        next?.catch(() => {});
        const batch = embedded.batch.filter((chunk) => !deleted.has(chunk.document_id));
        if (batch.length === 0) continue;
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
      await prisma.$transaction([
        prisma.$executeRaw`
          UPDATE documents SET status = 'ready', error = NULL
           WHERE id = ANY(${documentIds}::uuid[]) AND embedded_chunks = chunk_count`,
        prisma.job.updateMany({
          where: { id: { in: jobs.map((job) => job.id) }, claim: { in: jobs.map((job) => job.claim) }, status: 'running' },
          data: { status: 'done', leaseExpires: null, lastError: null },
        }),
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
