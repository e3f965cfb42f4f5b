import type { Embedder } from '../embeddings/embedder.js';
import { queueIndexDelete, type JobQueue } from '../jobs/queue.js';
import type { VectorIndex } from '../retrieval/vector-index.js';
import type { Access } from '../../auth/policy.js';
import { cursorInList, unrestrictedOnly, workspaceNotFound, workspaceWhere } from '../../auth/policy.js';
import { AppError } from '../../errors.js';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import { checkCursor, requireUuid } from '../../ids.js';
import { checkName, nameKey } from '../../input-limits.js';

/** What the workspace service uses. */
export type WorkspaceDependencies = {
  prisma: PrismaClient;
  /** Deleting a workspace stops the parses of its documents at once. */
  ingestion?: Pick<JobQueue, 'cancelDeleted'>;
  retrieval?: { index: VectorIndex; embedder: Embedder };
};

const newestFirst = [{ createdAt: 'desc' as const }, { id: 'desc' as const }];

/**
 * A 409 for a name whose key (nameKey) another of the user's workspaces holds. When that
 * workspace is written otherwise and the viewer may see it, the message names it as it is written.
 */
function conflictOnDuplicateName(prisma: PrismaClient, viewer: Access, name: string) {
  return async (error: unknown): Promise<never> => {
    if (error instanceof Prisma.PrismaClientKnownRequestError && error.code === 'P2002') {
      const existing = await prisma.workspace.findFirst({ where: { AND: [workspaceWhere(viewer), { nameKey: nameKey(name) }] }, select: { name: true } });
      if (!existing || existing.name === name) throw new AppError('conflict', `a workspace named "${name}" already exists`);
      throw new AppError(
        'conflict',
        `a workspace named "${existing.name}" already exists, and "${name}" is the same name (names are compared ignoring case, compatibility forms and invisible characters)`,
      );
    }
    throw error;
  };
}

/** The workspaces the viewer may see (policy.ts), newest first. */
export async function listWorkspaces<Query extends Prisma.WorkspaceFindManyArgs>({ prisma }: WorkspaceDependencies, viewer: Access, query: Query) {
  const where = workspaceWhere(viewer);
  if (!(await cursorInList(checkCursor(query), (id) => prisma.workspace.count({ where: { AND: [where, { id }] } })))) return [];
  return prisma.workspace.findMany({ ...query, where, orderBy: newestFirst });
}

/** A workspace the viewer may not see (another user's, outside a key's restriction) is reported exactly like a missing one. */
export async function findWorkspace<Query extends Omit<Prisma.WorkspaceFindFirstArgs, 'where'>>(
  { prisma }: Pick<WorkspaceDependencies, 'prisma'>,
  viewer: Access,
  id: string,
  query?: Query,
) {
  const workspaceId = requireUuid(id, 'workspace');
  const workspace = await prisma.workspace.findFirst({ ...query, where: workspaceWhere(viewer, workspaceId) });
  if (!workspace) throw workspaceNotFound(id);
  return workspace;
}

/** A key restricted to workspaces cannot create one (403); the operation gate refuses it before this, by the same rule. */
export async function createWorkspace<Query extends Omit<Prisma.WorkspaceCreateArgs, 'data'>>(
  { prisma }: WorkspaceDependencies,
  viewer: Access,
  nameInput: string,
  query?: Query,
) {
  const refusal = unrestrictedOnly(viewer, 'create a workspace');
  if (refusal) throw refusal;
  const name = checkName('name', nameInput);
  return prisma.workspace
    .create({ ...query, data: { userId: viewer.userId, name, nameKey: nameKey(name) } })
    .catch(conflictOnDuplicateName(prisma, viewer, name));
}

export async function renameWorkspace<Query extends Omit<Prisma.WorkspaceUpdateArgs, 'data' | 'where'>>(
  dependencies: WorkspaceDependencies,
  viewer: Access,
  id: string,
  nameInput: string,
  query?: Query,
) {
  const name = checkName('name', nameInput);
  const workspace = await findWorkspace(dependencies, viewer, id, { select: { id: true } });
  return dependencies.prisma.workspace
    .update({ ...query, where: { id: workspace.id }, data: { name, nameKey: nameKey(name) } })
    .catch(conflictOnDuplicateName(dependencies.prisma, viewer, name));
}

/**
 * Deletes the workspace; its documents and chunks go with it (ON DELETE CASCADE), the removal
 * of its index entries is queued, and parses of its documents under way stop.
 */
export async function deleteWorkspace({ prisma, ingestion }: WorkspaceDependencies, viewer: Access, id: string) {
  const workspaceId = requireUuid(id, 'workspace');
  await prisma.$transaction(async (tx) => {
    const { count } = await tx.workspace.deleteMany({ where: workspaceWhere(viewer, workspaceId) });
    if (count === 0) throw workspaceNotFound(id);
    await queueIndexDelete(tx, viewer.userId, { workspaceId });
  });
  await ingestion?.cancelDeleted();
  return { id: workspaceId };
}

const documentStatuses = ['queued', 'processing', 'ready', 'failed'] as const;
type DocumentStatusName = (typeof documentStatuses)[number];

/** idle: nothing waiting; processing: something queued or running; failed: something failed and nothing waits. */
function processingStatusOf(byStatus: Record<DocumentStatusName, number>) {
  if (byStatus.queued + byStatus.processing > 0) return 'processing';
  if (byStatus.failed > 0) return 'failed';
  return 'idle';
}

/**
 * Stats of several workspaces in one query, in the order asked (for DataLoader batching). The
 * ids are of workspaces the viewer was shown already (the field hangs off a Workspace).
 */
export async function workspaceStatsMany({ prisma }: WorkspaceDependencies, workspaceIds: readonly string[]) {
  const [groups, reading] = await Promise.all([
    prisma.document.groupBy({
      by: ['workspaceId', 'status'],
      where: { workspaceId: { in: [...workspaceIds] } },
      _count: { _all: true },
      _sum: { sizeBytes: true, chunkCount: true, embeddedChunks: true },
    }),
    // Documents in stage `ocr` (documentStage): being parsed, OCR reading their pages.
    prisma.document.groupBy({
      by: ['workspaceId'],
      where: { workspaceId: { in: [...workspaceIds] }, status: 'processing', chunkCount: 0, ocrPagesTotal: { gt: 0 } },
      _count: { _all: true },
      _sum: { ocrPagesDone: true, ocrPagesTotal: true },
    }),
  ]);
  return workspaceIds.map((workspaceId) => {
    const documentsByStatus = Object.fromEntries(documentStatuses.map((status) => [status, 0])) as Record<DocumentStatusName, number>;
    let chunkCount = 0;
    let totalSizeBytes = 0;
    let embeddedChunkCount = 0;
    for (const group of groups) {
      if (group.workspaceId !== workspaceId) continue;
      documentsByStatus[group.status] = group._count._all;
      chunkCount += group._sum.chunkCount ?? 0;
      totalSizeBytes += group._sum.sizeBytes ?? 0;
      embeddedChunkCount += group._sum.embeddedChunks ?? 0;
    }
    const ocr = reading.find((group) => group.workspaceId === workspaceId);
    return {
      workspaceId,
      ocr: { documents: ocr?._count._all ?? 0, pagesDone: ocr?._sum.ocrPagesDone ?? 0, pagesTotal: ocr?._sum.ocrPagesTotal ?? 0 },
      documentCount: Object.values(documentsByStatus).reduce((sum, count) => sum + count, 0),
      chunkCount,
      embeddedChunkCount,
      totalSizeBytes,
      processingStatus: processingStatusOf(documentsByStatus),
      documentsByStatus,
    };
  });
}

/**
 * Per document: chunks, chunks embedded (as the store records it) and chunks the index holds (as
 * the index counts them), so a mismatch between store and index is visible; and the model. The
 * workspace is one the viewer was shown already (the field hangs off a Workspace).
 */
export async function workspaceScan({ prisma, retrieval }: Required<Pick<WorkspaceDependencies, 'prisma' | 'retrieval'>>, workspaceId: string) {
  const { index, embedder } = retrieval;
  const [documents, indexed] = await Promise.all([
    prisma.document.findMany({
      where: { workspaceId },
      orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      select: { id: true, filename: true, status: true, chunkCount: true, embeddedChunks: true },
    }),
    index.countByDocument(workspaceId).catch(() => null),
  ]);
  const rows = documents.map((document) => ({
    documentId: document.id,
    filename: document.filename,
    status: document.status,
    chunkCount: document.chunkCount,
    embeddedChunks: document.embeddedChunks,
    indexedChunks: indexed ? (indexed.get(document.id) ?? 0) : null,
  }));
  const built = index.builtWith;
  return {
    workspaceId,
    embedding: {
      model: embedder.modelId,
      dimensions: embedder.dimensions,
      index: index.kind,
      indexModel: built.model,
      indexDimensions: built.dimensions,
      modelMismatch: built.model !== embedder.modelId || built.dimensions !== embedder.dimensions,
    },
    documents: rows,
    totals: {
      documentCount: rows.length,
      chunkCount: rows.reduce((sum, row) => sum + row.chunkCount, 0),
      embeddedChunks: rows.reduce((sum, row) => sum + row.embeddedChunks, 0),
      // Null when the index did not answer.
      indexedChunks: indexed ? [...indexed.values()].reduce((sum, count) => sum + count, 0) : null,
    },
  };
}
