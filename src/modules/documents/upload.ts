import { createHash } from 'node:crypto';
import { AppError, badRequest, fileTooLarge, notFound } from '../../errors.js';
import { Prisma, type Document } from '../../generated/prisma/client.js';
import { detectDocumentType } from '../ingestion/detect.js';
import type { JobPayload } from '../jobs/payloads.js';
import { findWorkspace } from '../workspaces/service.js';
import { checkFilename, checkMetadata } from '../../input-limits.js';
import type { Access } from '../../auth/policy.js';
import { findDocument, type ChunkSettings, type DocumentDependencies, type DocumentInWorkspace } from './service.js';

export type UploadedFile = { filename: string; bytes: Uint8Array };

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
      data: { kind: 'parse', userId, documentId, payload: { chunkTokens: chunking.chunkTokens, overlapTokens: chunking.overlapTokens, reindex: true } satisfies JobPayload<'parse'> },
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
  const payload: JobPayload<'parse'> = { chunkTokens: chunking.chunkTokens, overlapTokens: chunking.overlapTokens };
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
