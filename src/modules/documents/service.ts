import { badRequest, notFound, shownMebibytes } from '../../errors.js';
import type { Document, Prisma, PrismaClient } from '../../generated/prisma/client.js';
import { checkCursor, requireUuid } from '../../ids.js';
import { queueIndexDelete, type JobQueue } from '../jobs/queue.js';
import { findWorkspace } from '../workspaces/service.js';
import { cursorInList, documentWhere, type Access } from '../../auth/policy.js';
import type { FileReadTurns } from './file-reads.js';

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

export async function documentIdIn(dependencies: Pick<DocumentDependencies, 'prisma'>, viewer: Access, { documentId, workspaceId }: DocumentInWorkspace) {
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
