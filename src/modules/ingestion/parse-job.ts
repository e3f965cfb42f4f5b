import { advance } from '../jobs/advance.js';
import { exponentialBackoff, PermanentJobError, type ClaimedJob as AnyClaimedJob, type JobHandler } from '../jobs/job-handler.js';
import type { DocumentType } from './detect.js';
import { failDocument, heldDocuments, lockHeld } from './held-jobs.js';
import type { IngestionDependencies, IngestionSettings } from './handlers.js';
import { ParseLimitError } from './parse-pool.js';
import type { ParseProgress, ParseTaskResult } from './parse-task.js';
import { ocrPageSeconds } from './types.js';

/** A parse claim takes at most this many jobs, and only of documents no larger than this. */
const PARSE_CLAIM_JOBS = 16;
const PARSE_COMPANION_MAX_BYTES = 256 * 1024;

type ParseSource = { id: string; filename: string; content_type: string; size_bytes: number; bytes: Uint8Array };
type ClaimedJob = AnyClaimedJob<'parse'>;

type ParseOutcome = { job: ClaimedJob; failure: string } | (Extract<ParseTaskResult, { ok: true }> & { job: ClaimedJob });

/**
 * Stage one: parse and chunk each document in a parsing process and store its chunks; the same job
 * row then becomes the document's `embed` job (attempts counted afresh). Small documents are
 * parsed together: the queue claims up to PARSE_CLAIM_JOBS of them at once, so a bulk upload of
 * short texts pays one read, one chunk write and one state change per claim, not ten statements
 * per document. A document that cannot be parsed fails alone; the others go on.
 */
export function parseJob(dependencies: Pick<IngestionDependencies, 'prisma' | 'parsePool' | 'index' | 'wake'>, settings: IngestionSettings): JobHandler<'parse'> {
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
          chunkOptions: { chunkTokens: job.payload.chunkTokens, overlapTokens: job.payload.overlapTokens },
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
      // A failed document uploaded again (documents/upload.ts): the index may hold entries of its
      // old chunks, which the parse below replaces under new ids. An index outside the store
      // keeps them otherwise; an unreachable one fails this attempt like any transient error.
      for (const job of present) if (job.payload.reindex) await index.deleteDocument(job.document_id!);
      await prisma.$executeRaw`UPDATE documents SET status = 'processing', error = NULL, updated_at = now() WHERE id IN (${heldDocuments(present)})`;
      try {
        await parseAndStore(present, sourceOf, signal);
      } catch (error) {
        // A failure that cannot be pinned on one document of the batch (a parsing process that
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
    const toEmbed = parsed.filter(({ chunks }) => chunks.length > 0).map(({ job }) => job);
    const finished = parsed.filter(({ chunks }) => chunks.length === 0).map(({ job }) => job);
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
      advance(prisma, toEmbed, { step: 'next', kind: 'embed', payload: {} }),
      advance(prisma, finished, { step: 'done' }),
    ], resultsTransaction);
    if (toEmbed.length > 0) dependencies.wake();
  }
}

/**
 * A parse's results are up to the text limit of text and its chunks: Prisma's default limit of 5 s
 * is too short to write them. A sheet of a million rows (6.9 million characters, under the default
 * limit of 10 million) took 5.5-6.1 s to write on the embedded store, and failed every attempt.
 */
const resultsTransaction = { timeout: 10 * 60_000 };
