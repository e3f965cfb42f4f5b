import type { Embedder } from '../embeddings/embedder.js';
import { queueIndexDelete } from '../jobs/queue.js';
import type { VectorIndex } from '../retrieval/vector-index.js';
import { AppError, notFound } from '../../errors.js';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import { checkCursor, requireUuid } from '../../ids.js';
import { checkName } from '../../input-limits.js';

const newestFirst = [{ createdAt: 'desc' as const }, { id: 'desc' as const }];

const nameKeyOf = (name: string) => name.toLowerCase();

function conflictOnDuplicateName(name: string) {
  return (error: unknown): never => {
    if (error instanceof Prisma.PrismaClientKnownRequestError && error.code === 'P2002') {
      throw new AppError('conflict', `a workspace named "${name}" already exists`);
    }
    throw error;
  };
}

export function listWorkspaces<Query extends Prisma.WorkspaceFindManyArgs>(prisma: PrismaClient, userId: string, query: Query) {
  return prisma.workspace.findMany({ ...checkCursor(query), where: { userId }, orderBy: newestFirst });
}

/**
 * The ownership rule of findWorkspace, as a condition on `workspaces` (alias `alias`) for raw
 * statements that must check it together with other work. The id must be a checked uuid.
 */
export function ownedWorkspaceCondition(alias: string, userId: string, workspaceId: string): Prisma.Sql {
  return Prisma.sql`${Prisma.raw(alias)}.id = ${workspaceId}::uuid AND ${Prisma.raw(alias)}.user_id = ${userId}::uuid`;
}

/** Another user's workspace is reported exactly like a missing one. */
export async function findWorkspace<Query extends Omit<Prisma.WorkspaceFindFirstArgs, 'where'>>(
  prisma: PrismaClient,
  userId: string,
  id: string,
  query?: Query,
) {
  const workspaceId = requireUuid(id, 'workspace');
  const workspace = await prisma.workspace.findFirst({ ...query, where: { id: workspaceId, userId } });
  if (!workspace) throw notFound('workspace', id);
  return workspace;
}

export function createWorkspace<Query extends Omit<Prisma.WorkspaceCreateArgs, 'data'>>(
  prisma: PrismaClient,
  userId: string,
  nameInput: string,
  query?: Query,
) {
  const name = checkName('name', nameInput);
  return prisma.workspace
    .create({ ...query, data: { userId, name, nameKey: nameKeyOf(name) } })
    .catch(conflictOnDuplicateName(name));
}

export async function renameWorkspace<Query extends Omit<Prisma.WorkspaceUpdateArgs, 'data' | 'where'>>(
  prisma: PrismaClient,
  userId: string,
  id: string,
  nameInput: string,
  query?: Query,
) {
  const name = checkName('name', nameInput);
  const workspace = await findWorkspace(prisma, userId, id, { select: { id: true } });
  return prisma.workspace
    .update({ ...query, where: { id: workspace.id }, data: { name, nameKey: nameKeyOf(name) } })
    .catch(conflictOnDuplicateName(name));
}

/**
 * Deletes the workspace; its documents and chunks go with it (ON DELETE CASCADE), and the removal
 * of its index entries is queued.
 */
export async function deleteWorkspace(prisma: PrismaClient, userId: string, id: string) {
  const workspaceId = requireUuid(id, 'workspace');
  await prisma.$transaction(async (tx) => {
    const { count } = await tx.workspace.deleteMany({ where: { id: workspaceId, userId } });
    if (count === 0) throw notFound('workspace', id);
    await queueIndexDelete(tx, userId, { workspaceId });
  });
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

/** Stats of several workspaces in one query, in the order asked (for DataLoader batching). */
export async function workspaceStatsMany(prisma: PrismaClient, workspaceIds: readonly string[]) {
  const groups = await prisma.document.groupBy({
    by: ['workspaceId', 'status'],
    where: { workspaceId: { in: [...workspaceIds] } },
    _count: { _all: true },
    _sum: { sizeBytes: true, chunkCount: true, embeddedChunks: true },
  });
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
    return {
      workspaceId,
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
 * the index counts them), so a mismatch between store and index is visible; and the model.
 */
export async function workspaceScan(prisma: PrismaClient, index: VectorIndex, embedder: Embedder, workspaceId: string) {
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
