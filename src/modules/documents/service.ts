import { createHash } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { RE2JS, RE2JSException } from 're2js';
import { AppError, badRequest, fileTooLarge, notFound, shownMebibytes } from '../../errors.js';
import { Prisma, type Document, type PrismaClient } from '../../generated/prisma/client.js';
import { checkCursor, requireUuid } from '../../ids.js';
import { detectDocumentType } from '../ingestion/detect.js';
import { queueIndexDelete, type JobQueue } from '../jobs/queue.js';
import { findWorkspace } from '../workspaces/service.js';
import { checkFilename, checkMetadata } from '../../input-limits.js';
import { cursorInList, documentWhere, type Access } from '../../auth/policy.js';
import type { FileReadTurns } from './file-reads.js';

export type UploadedFile = { filename: string; bytes: Uint8Array };

export type UploadLimits = { maxFileBytes: number; maxFiles: number };

export type ChunkSettings = { chunkTokens: number; overlapTokens: number };

/** What the document service uses. */
export type DocumentDependencies = {
  prisma: PrismaClient;
  /** The upload limits and the chunking in force (recorded with each upload). */
  config: { uploads: UploadLimits; ingestion: ChunkSettings };
  /** Woken by an upload; told of a deletion, so parses of what was deleted stop. */
  ingestion?: Pick<JobQueue, 'notify' | 'cancelDeleted'>;
};

/**
 * Stores the files and queues them for processing, all or nothing: one unusable file (empty,
 * too large, of an unsupported type) rejects the whole upload. A file whose content is already
 * in the workspace is not stored again; the existing document is returned in its place, and if
 * it had failed, it is processed again from the start (its old chunks replaced).
 */
export async function uploadDocuments(
  dependencies: DocumentDependencies,
  viewer: Access,
  workspaceId: string,
  files: readonly UploadedFile[],
  metadataInput: unknown,
) {
  const documents = await storeUpload(dependencies, viewer, workspaceId, files, metadataInput);
  dependencies.ingestion?.notify();
  return documents;
}

async function storeUpload(
  { prisma, config }: DocumentDependencies,
  viewer: Access,
  workspaceId: string,
  files: readonly UploadedFile[],
  metadataInput: unknown,
) {
  const limits = config.uploads;
  const chunking = { chunkTokens: config.ingestion.chunkTokens, overlapTokens: config.ingestion.overlapTokens };
  const { userId } = viewer;
  if (files.length === 0) throw badRequest('file', 'at least one file is required');
  if (files.length > limits.maxFiles) throw badRequest('file', `at most ${limits.maxFiles} files per upload`);
  const metadata = checkMetadata(metadataInput);
  const prepared = files.map((file) => {
    const filename = checkFilename(file.filename);
    if (file.bytes.byteLength > limits.maxFileBytes) {
      throw fileTooLarge(filename, limits.maxFileBytes);
    }
    if (file.bytes.byteLength === 0) throw badRequest('file', `${filename} is empty`);
    const contentType = detectDocumentType(file.bytes, filename);
    if (!contentType) {
      throw new AppError(
        'unsupported_media_type',
        `${filename}: unsupported type; PDF, DOCX, XLSX, PPTX, EPUB, ODT, ODP, ODS, RTF, HTML, Markdown, plain text, CSV, TSV, JSON and images of pages (PNG, JPEG, WebP, TIFF) are accepted`,
      );
    }
    return { filename, bytes: file.bytes, contentType, sha256: createHash('sha256').update(file.bytes).digest('hex') };
  });
  const workspace = await findWorkspace({ prisma }, viewer, workspaceId, { select: { id: true } });

  return prisma.$transaction(async (tx) => {
    // Uploads to one workspace take turns, so that the same new content arriving in two requests
    // at once is one document: each would otherwise find it missing and store it (PostgreSQL; the
    // embedded store runs one transaction at a time anyway).
    await tx.$executeRaw`SELECT pg_advisory_xact_lock(${uploadLockClass}::int4, hashtext(${workspace.id}))`;
    const existing = await tx.document.findMany({
      where: { workspaceId: workspace.id, sha256: { in: prepared.map((file) => file.sha256) } },
      orderBy: { createdAt: 'asc' },
    });
    const bySha = new Map(existing.map((document) => [document.sha256, document]));
    for (const file of prepared) {
      const document = bySha.get(file.sha256);
      if (document?.status !== 'failed') continue;
      // A failed document is retried; if a request beside this one deleted it meanwhile, the file is new again.
      const { document: retried } = await retryFailed(tx, userId, document.id, chunking);
      if (retried) bySha.set(file.sha256, retried);
      else bySha.delete(file.sha256);
    }
    // Content not stored yet, once (a file repeated in the upload is one document, named after its
    // first copy), in upload order. Two statements for up to 1,000 files, not four per file: a
    // bulk upload of small files spent most of its trips to the store on these.
    const seen = new Set(bySha.keys());
    const fresh = prepared.filter((file) => !seen.has(file.sha256) && seen.add(file.sha256));
    for (let start = 0; start < fresh.length; start += uploadStatementFiles) {
      const part = fresh.slice(start, start + uploadStatementFiles);
      for (const document of await insertDocuments(tx, workspace.id, userId, part, metadata, chunking)) bySha.set(document.sha256, document);
      const stored = part.map((file) => ({ file, document: bySha.get(file.sha256)! }));
      for (const group of sourceGroups(stored)) await storeSourceBytes(tx, group);
    }
    return prepared.map((file) => bySha.get(file.sha256)!);
  }, uploadTransaction);
}

/**
 * An upload's transaction writes up to KB_MAX_UPLOAD_FILES × KB_MAX_UPLOAD_BYTES of bytes, and
 * may first wait for another upload to the same workspace: Prisma's default limit of 5 s is
 * too short for either.
 */
const uploadTransaction = { timeout: 10 * 60_000 };

/** The class of the advisory locks that make a workspace's uploads take turns (the object is the workspace). */
const uploadLockClass = 0x6b62_7570;

/**
 * Files written per statement, at most, whatever KB_MAX_UPLOAD_FILES allows: a few parameters
 * each, well within PostgreSQL's 65,535 per statement.
 */
const uploadStatementFiles = 1_000;
/** Source bytes written per statement, at most; a larger file goes alone. */
const sourceStatementBytes = 8 * 1024 * 1024;

/**
 * The files in order, in groups of at most `maxFiles` files and `maxBytes` of content; a larger
 * file is a group of its own.
 */
export function sourceGroups<Item extends { file: { bytes: Uint8Array } }>(
  items: readonly Item[],
  maxBytes = sourceStatementBytes,
  maxFiles = uploadStatementFiles,
): Item[][] {
  const groups: Item[][] = [];
  let bytes = Infinity;
  for (const item of items) {
    if (bytes + item.file.bytes.byteLength > maxBytes || groups.at(-1)!.length >= maxFiles) {
      groups.push([]);
      bytes = 0;
    }
    groups.at(-1)!.push(item);
    bytes += item.file.bytes.byteLength;
  }
  return groups;
}

/**
 * Queues a failed document again with a fresh parse job (attempts from zero). The job tells the
 * parse stage to clear the document's old index entries first (`reindex`). Only a failed
 * document is touched: the condition holds it against a concurrent retry or deletion, so of
 * retries at once exactly one queues it (`retried`). Its counts start again from zero (the
 * chunks a failure in the embed stage left are replaced by the parse), so that its `stage`
 * reads `parsing` until the new chunks are stored.
 */
async function retryFailed(tx: Prisma.TransactionClient, userId: string, documentId: string, chunking: ChunkSettings) {
  const { count } = await tx.document.updateMany({
    where: { id: documentId, status: 'failed' },
    data: { status: 'queued', error: null, chunkCount: 0, embeddedChunks: 0, ocrPagesDone: 0, ocrPagesTotal: 0 },
  });
  if (count > 0) {
    await tx.job.deleteMany({ where: { documentId } });
    await tx.job.create({
      data: { kind: 'parse', userId, documentId, payload: { chunkTokens: chunking.chunkTokens, overlapTokens: chunking.overlapTokens, reindex: true } },
    });
  }
  return { document: await tx.document.findUnique({ where: { id: documentId } }), retried: count > 0 };
}

/**
 * Processes a failed document again from its kept bytes, as uploading its content again would:
 * queued with a fresh parse job, its error cleared. A document the viewer may not see (or not
 * in `workspaceId`) is a 404; one that has not failed is a 409 `document_not_failed` naming its
 * status. Of concurrent retries of one document exactly one queues it; the others find it
 * queued (409).
 */
export async function retryDocument(dependencies: DocumentDependencies, viewer: Access, where: DocumentInWorkspace) {
  const { prisma, config } = dependencies;
  const found = await findDocument(dependencies, viewer, where.documentId, { workspaceId: where.workspaceId, query: { select: { id: true } } });
  const chunking = { chunkTokens: config.ingestion.chunkTokens, overlapTokens: config.ingestion.overlapTokens };
  const { document, retried } = await prisma.$transaction((tx) => retryFailed(tx, viewer.userId, found.id, chunking));
  // Deleted meanwhile: as if it had never been.
  if (!document) throw notFound('document', where.documentId);
  if (!retried) {
    throw new AppError('document_not_failed', `document ${document.id} is ${document.status}, not failed: only a failed document can be retried`);
  }
  dependencies.ingestion?.notify();
  return document;
}

/**
 * Where a document is in its processing: its status, with `processing` told apart by whether its
 * chunks are stored yet and, before they are, whether OCR is reading its pages.
 */
export type DocumentStage = 'queued' | 'parsing' | 'ocr' | 'embedding' | 'ready' | 'failed';

export function documentStage(document: Pick<Document, 'status' | 'chunkCount' | 'ocrPagesTotal'>): DocumentStage {
  if (document.status !== 'processing') return document.status;
  if (document.chunkCount > 0) return 'embedding';
  return document.ocrPagesTotal > 0 ? 'ocr' : 'parsing';
}

/**
 * The bytes uploaded for a document already shown to the viewer (found with findDocument), as
 * they were received. A document deleted since is a 404, as it would be now.
 */
export async function documentSourceBytes({ prisma }: Pick<DocumentDependencies, 'prisma'>, documentId: string): Promise<Uint8Array> {
  const source = await prisma.documentSource.findUnique({ where: { documentId }, select: { bytes: true } });
  // Deleted since the document was read: gone, as the document is.
  if (!source) throw notFound('document', documentId);
  return source.bytes;
}

/**
 * A document's file in base64 for a GraphQL response, once its size has been taken from what the
 * response may still hold (`budget`): a file that does not fit is a 400 on `base64` that points at
 * the file route, and nothing is read.
 */
export async function documentSourceBase64(
  dependencies: Pick<DocumentDependencies, 'prisma'> & { fileReads: FileReadTurns; signal: AbortSignal },
  reader: { userId: string },
  file: { id: string; workspaceId: string; sizeBytes: number },
  budget: { take(bytes: number): boolean; leftBytes: number; limitBytes: number },
): Promise<string> {
  // Four characters for every three bytes or part of them, and the quotes around the string.
  const encodedBytes = 4 * Math.ceil(file.sizeBytes / 3) + 2;
  if (!budget.take(encodedBytes)) {
    throw badRequest(
      'base64',
      `the file is ${shownMebibytes(file.sizeBytes)}, ${shownMebibytes(encodedBytes)} in base64, more than the ${shownMebibytes(budget.leftBytes)} left of the response limit of ${shownMebibytes(budget.limitBytes)} (KB_MAX_GRAPHQL_RESPONSE_BYTES); download it from GET /v1/kb/documents/${file.id}/file?workspace_id=${file.workspaceId}`,
    );
  }
  return dependencies.fileReads.run(reader.userId, async () => Buffer.from(await documentSourceBytes(dependencies, file.id)).toString('base64'), dependencies.signal);
}

/**
 * How much of a file the file route reads from the store at a time: what a client that stops
 * reading holds in memory (with what its socket holds), not the file.
 */
export const sourceSliceBytes = 1024 * 1024;

/**
 * Up to `length` bytes of a document's uploaded file from `offset`, read without the rest of it
 * (`document_sources.bytes` is stored uncompressed, so PostgreSQL fetches only the TOAST chunks
 * the slice spans); fewer at the end of the file. A document deleted since is a 404.
 */
export async function documentSourceSlice({ prisma }: Pick<DocumentDependencies, 'prisma'>, documentId: string, offset: number, length: number): Promise<Uint8Array> {
  const [source] = await prisma.$queryRaw<{ slice: Uint8Array }[]>`
    SELECT substring(bytes FROM ${offset + 1}::int FOR ${length}::int) AS slice FROM document_sources WHERE document_id = ${documentId}::uuid`;
  if (!source) throw notFound('document', documentId);
  return source.slice;
}

/**
 * A document's uploaded file (of `sizeBytes`, as its document records) as a stream that reads
 * the next slice from the store only when its reader asks for more: a reader that stops reading
 * holds one slice. When the rest cannot be read (the document was deleted meanwhile) the stream
 * ends there, short of `sizeBytes`, rather than failing: a response whose body fails is left
 * open by the HTTP adapter, while one that ends short on a connection marked `close` is closed,
 * which its client sees as a cut transfer.
 */
export function documentSourceStream(
  dependencies: Pick<DocumentDependencies, 'prisma'> & { fileReads: FileReadTurns },
  reader: { userId: string },
  documentId: string,
  sizeBytes: number,
  sliceBytes = sourceSliceBytes,
): ReadableStream<Uint8Array> {
  let offset = 0;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        if (sizeBytes === 0) controller.close();
      },
      async pull(controller) {
        const length = Math.min(sliceBytes, sizeBytes - offset);
        const slice = await dependencies.fileReads.run(reader.userId, () => documentSourceSlice(dependencies, documentId, offset, length)).catch(() => null);
        if (!slice?.byteLength) return controller.close();
        offset += slice.byteLength;
        controller.enqueue(slice);
        if (offset >= sizeBytes) controller.close();
      },
    },
    // Nothing is read ahead of the reader.
    { highWaterMark: 0 },
  );
}

/**
 * The documents of new files and their parse jobs, in one statement. Each row's created_at (and
 * its job's) is the clock plus its position in microseconds: the embedded store's clock moves in
 * milliseconds, and rows written together would otherwise tie, listing and processing an upload
 * in an arbitrary order instead of the order of its files.
 */
function insertDocuments(
  tx: Prisma.TransactionClient,
  workspaceId: string,
  userId: string,
  files: readonly { filename: string; contentType: string; bytes: Uint8Array; sha256: string }[],
  metadata: Record<string, unknown>,
  chunking: ChunkSettings,
) {
  const payload = { chunkTokens: chunking.chunkTokens, overlapTokens: chunking.overlapTokens };
  return tx.$queryRaw<Document[]>`
    WITH files AS (
      SELECT f.filename, f.content_type, f.size_bytes, f.sha256, f.position,
             clock_timestamp() + f.position * interval '1 microsecond' AS written_at
        FROM unnest(${files.map((file) => file.filename)}::text[], ${files.map((file) => file.contentType)}::text[],
                    ${files.map((file) => file.bytes.byteLength)}::integer[], ${files.map((file) => file.sha256)}::text[])
             WITH ORDINALITY AS f(filename, content_type, size_bytes, sha256, position)
    ), created AS (
      INSERT INTO documents (id, workspace_id, filename, content_type, size_bytes, sha256, metadata, created_at, updated_at)
      SELECT gen_random_uuid(), ${workspaceId}::uuid, filename, content_type, size_bytes, sha256, ${JSON.stringify(metadata)}::jsonb, written_at, written_at
        FROM files ORDER BY position
      RETURNING *
    ), queued AS (
      INSERT INTO jobs (id, kind, document_id, user_id, payload, run_after, created_at, updated_at)
      SELECT gen_random_uuid(), 'parse', id, ${userId}::uuid, ${JSON.stringify(payload)}::jsonb, created_at, created_at, created_at FROM created
    )
    SELECT id, workspace_id AS "workspaceId", filename, content_type AS "contentType", size_bytes AS "sizeBytes", sha256,
           status::text AS status, error, page_count AS "pageCount", chunk_count AS "chunkCount", embedded_chunks AS "embeddedChunks",
           ocr_pages_done AS "ocrPagesDone", ocr_pages_total AS "ocrPagesTotal", metadata, text, created_at AS "createdAt", updated_at AS "updatedAt"
      FROM created ORDER BY created_at`;
}

/** One statement for the files of a group (sourceGroups). */
function storeSourceBytes(tx: Prisma.TransactionClient, sources: readonly { document: { id: string }; file: { bytes: Uint8Array } }[]) {
  const rows = sources.map(({ document, file }) => Prisma.sql`(${document.id}::uuid, ${file.bytes})`);
  return tx.$executeRaw`INSERT INTO document_sources (document_id, bytes) VALUES ${Prisma.join(rows)}`;
}

/** The documents of a workspace the viewer may see (404 otherwise), newest first. */
export async function listDocuments<Query extends Prisma.DocumentFindManyArgs>(
  { prisma }: Pick<DocumentDependencies, 'prisma'>,
  viewer: Access,
  workspaceId: string,
  query: Query,
) {
  const workspace = await findWorkspace({ prisma }, viewer, workspaceId, { select: { id: true } });
  const where = { workspaceId: workspace.id };
  if (!(await cursorInList(checkCursor(query), (id) => prisma.document.count({ where: { ...where, id } })))) return [];
  return prisma.document.findMany({ ...query, where, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }] });
}

/**
 * The document if it is in a workspace the viewer may see (and in `workspaceId`, when the
 * endpoint names one); otherwise 404, exactly as for a document that does not exist.
 */
export async function findDocument<Query extends Omit<Prisma.DocumentFindFirstArgs, 'where'>>(
  { prisma }: Pick<DocumentDependencies, 'prisma'>,
  viewer: Access,
  id: string,
  options: { workspaceId?: string; query?: Query } = {},
) {
  const documentId = requireUuid(id, 'document');
  const workspaceId = options.workspaceId === undefined ? undefined : requireUuid(options.workspaceId, 'document', id);
  const document = await prisma.document.findFirst({ ...options.query, where: documentWhere(viewer, documentId, workspaceId) });
  if (!document) throw notFound('document', id);
  return document;
}

/** A document's id in a workspace, once both are known to be the viewer's to see (404 otherwise). */
export type DocumentInWorkspace = { documentId: string; workspaceId: string };

async function documentIdIn(dependencies: Pick<DocumentDependencies, 'prisma'>, viewer: Access, { documentId, workspaceId }: DocumentInWorkspace) {
  return (await findDocument(dependencies, viewer, documentId, { workspaceId, query: { select: { id: true } } })).id;
}

/**
 * Deletes the document with its chunks, source and job (ON DELETE CASCADE), queues the
 * removal of its index entries (an external index cannot take part in the transaction), and
 * stops its parse if one is under way.
 */
export async function deleteDocument(dependencies: Pick<DocumentDependencies, 'prisma' | 'ingestion'>, viewer: Access, id: string) {
  const { prisma } = dependencies;
  const document = await findDocument(dependencies, viewer, id, { query: { select: { id: true } } });
  await prisma.$transaction(async (tx) => {
    const { count } = await tx.document.deleteMany({ where: { id: document.id } });
    if (count > 0) await queueIndexDelete(tx, viewer.userId, { documentId: document.id });
  });
  await dependencies.ingestion?.cancelDeleted();
  return { id: document.id };
}

/** The chunks of a document the viewer may see in `workspaceId`, in reading order. */
export async function listChunks<Query extends Prisma.ChunkFindManyArgs>(
  dependencies: Pick<DocumentDependencies, 'prisma'>,
  viewer: Access,
  where: DocumentInWorkspace,
  query: Query,
) {
  const { prisma } = dependencies;
  const documentId = await documentIdIn(dependencies, viewer, where);
  if (!(await cursorInList(checkCursor(query), (id) => prisma.chunk.count({ where: { documentId, id } })))) return [];
  return prisma.chunk.findMany({ ...query, where: { documentId }, orderBy: { chunkIndex: 'asc' } });
}

/** The first chunks of a document already shown to the viewer (the preview's). */
export function firstChunks({ prisma }: Pick<DocumentDependencies, 'prisma'>, documentId: string, count: number) {
  return prisma.chunk.findMany({ where: { documentId }, orderBy: { chunkIndex: 'asc' }, take: count });
}

/**
 * The chunk at `chunkIndex` of a document the viewer may see in `workspaceId`, with up to
 * `before` chunks ahead of it and `after` behind, clamped at the edges.
 */
export async function chunkContext(
  dependencies: Pick<DocumentDependencies, 'prisma'>,
  viewer: Access,
  where: DocumentInWorkspace,
  { chunkIndex, before, after }: { chunkIndex: number; before: number; after: number },
) {
  const { prisma } = dependencies;
  const documentId = await documentIdIn(dependencies, viewer, where);
  const chunks = await prisma.chunk.findMany({
    where: { documentId, chunkIndex: { gte: Math.max(0, chunkIndex - before), lte: chunkIndex + after } },
    orderBy: { chunkIndex: 'asc' },
  });
  if (!chunks.some((chunk) => chunk.chunkIndex === chunkIndex)) throw notFound('chunk', String(chunkIndex));
  return { documentId, chunkIndex, chunks: chunks.map((chunk) => ({ ...chunk, isTarget: chunk.chunkIndex === chunkIndex })) };
}

export const maxPatternLength = 1000;
const highlightStart = '<mark>';
const highlightEnd = '</mark>';

/**
 * Regular-expression search over a document's chunks with RE2 semantics: matching time is
 * linear in the text, so no pattern can stall the server. Empty matches are skipped.
 */
export type GrepPattern = { pattern: string; caseSensitive: boolean; expression: RE2JS };

/** Checks and compiles a grep pattern; a 400 comes before any lookup, as the contract orders errors. */
export function compileGrepPattern(pattern: string, caseSensitive: boolean): GrepPattern {
  if (pattern.length === 0) throw badRequest('pattern', 'must not be empty');
  if (pattern.length > maxPatternLength) throw badRequest('pattern', `must be at most ${maxPatternLength} characters`);
  try {
    return { pattern, caseSensitive, expression: RE2JS.compile(pattern, caseSensitive ? 0 : RE2JS.CASE_INSENSITIVE) };
  } catch (error) {
    if (error instanceof RE2JSException) throw badRequest('pattern', `invalid regular expression: ${syntaxErrorOf(pattern, error)}`);
    throw error;
  }
}

/** The compile error of the pattern as sent: compiled case-insensitively, RE2JS quotes it with a `(?i)` the user never typed. */
function syntaxErrorOf(pattern: string, error: RE2JSException): string {
  try {
    RE2JS.compile(pattern);
  } catch (plain) {
    if (plain instanceof RE2JSException) return plain.message;
  }
  return error.message;
}

/**
 * What one grep may return and spend. Matching stops at whichever comes first, and the result
 * says `truncated`: the caller asked for more than one answer should carry.
 */
export const grepLimits = {
  maxMatches: 1000,
  /** Characters of `content` and `highlighted` together, over all returned chunks. */
  maxResponseCharacters: 2_000_000,
  /** Wall-clock time spent reading and matching. */
  maxMilliseconds: 5_000,
};

/** Chunks read from the store at a time, so a document of any size is never held whole. */
const grepPageSize = 200;
/** Longest stretch of matching before other requests get the event loop back. */
const grepSliceMilliseconds = 10;

/** Greps a document the viewer may see in `workspaceId` (the pattern is compiled first: a 400 comes before a 404). */
export async function grepDocument(
  dependencies: Pick<DocumentDependencies, 'prisma'>,
  viewer: Access,
  where: DocumentInWorkspace,
  grep: GrepPattern,
  limits = grepLimits,
  signal?: AbortSignal,
) {
  return grepChunks(dependencies, await documentIdIn(dependencies, viewer, where), grep, limits, signal);
}

async function grepChunks(
  { prisma }: Pick<DocumentDependencies, 'prisma'>,
  documentId: string,
  { pattern, caseSensitive, expression }: GrepPattern,
  limits: typeof grepLimits,
  signal?: AbortSignal,
) {
  const started = performance.now();
  let sliceStarted = started;
  const matched = [];
  let totalMatches = 0;
  let responseCharacters = 0;
  let truncated = false;
  let nextIndex = 0;
  pages: for (;;) {
    const page = await prisma.chunk.findMany({
      where: { documentId, chunkIndex: { gte: nextIndex } },
      orderBy: { chunkIndex: 'asc' },
      take: grepPageSize,
      select: { chunkIndex: true, content: true, metadata: true },
    });
    for (const chunk of page) {
      signal?.throwIfAborted();
      if (performance.now() - sliceStarted > grepSliceMilliseconds) {
        await nextTurn();
        sliceStarted = performance.now();
      }
      if (performance.now() - started > limits.maxMilliseconds) {
        truncated = true;
        break pages;
      }
      const matches: { start: number; end: number }[] = [];
      const matcher = expression.matcher(chunk.content);
      while (matcher.find()) {
        if (matcher.end() === matcher.start()) continue;
        if (totalMatches + matches.length === limits.maxMatches) {
          truncated = true;
          break;
        }
        matches.push({ start: matcher.start(), end: matcher.end() });
      }
      if (matches.length > 0) {
        const highlighted = highlight(chunk.content, matches);
        if (responseCharacters + chunk.content.length + highlighted.length > limits.maxResponseCharacters) {
          truncated = true;
          break pages;
        }
        responseCharacters += chunk.content.length + highlighted.length;
        totalMatches += matches.length;
        matched.push({ chunkIndex: chunk.chunkIndex, content: chunk.content, highlighted, matches, metadata: chunk.metadata });
      }
      if (truncated) break pages;
    }
    if (page.length < grepPageSize) break;
    nextIndex = page[page.length - 1]!.chunkIndex + 1;
  }
  return { documentId, pattern, caseSensitive, totalMatches, truncated, chunks: matched };
}

function highlight(content: string, matches: readonly { start: number; end: number }[]) {
  let highlighted = '';
  let position = 0;
  for (const { start, end } of matches) {
    highlighted += content.slice(position, start) + highlightStart + content.slice(start, end) + highlightEnd;
    position = end;
  }
  return highlighted + content.slice(position);
}
