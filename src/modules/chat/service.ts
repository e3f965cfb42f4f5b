import { notFound } from '../../errors.js';
import type { Prisma, PrismaClient } from '../../generated/prisma/client.js';
import { checkCursor, isUuid, requireUuid } from '../../ids.js';
import { checkOptionalName } from '../../input-limits.js';

export const messageRoles = ['user', 'assistant', 'system'] as const;
export type MessageRole = (typeof messageRoles)[number];

export function listSessions<Query extends Prisma.ChatSessionFindManyArgs>(prisma: PrismaClient, userId: string, query: Query) {
  return prisma.chatSession.findMany({ ...checkCursor(query), where: { userId }, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }] });
}

export async function findSession<Query extends Omit<Prisma.ChatSessionFindFirstArgs, 'where'>>(
  prisma: PrismaClient,
  userId: string,
  id: string,
  query?: Query,
) {
  const sessionId = requireUuid(id, 'chat session');
  const session = await prisma.chatSession.findFirst({ ...query, where: { id: sessionId, userId } });
  if (!session) throw notFound('chat session', id);
  return session;
}

/** Every workspace named must be the user's own; the first that is not is a 404. Returns them lower-cased, once each. */
export async function requireOwnWorkspaces(prisma: PrismaClient, userId: string, workspaceIds: readonly string[]) {
  const unique = [...new Set(workspaceIds.map((id) => id.toLowerCase()))];
  const invalid = unique.find((id) => !isUuid(id));
  if (invalid !== undefined) throw notFound('workspace', invalid);
  const owned = await prisma.workspace.findMany({ where: { userId, id: { in: unique } }, select: { id: true } });
  const ownedIds = new Set(owned.map((workspace) => workspace.id));
  const missing = unique.find((id) => !ownedIds.has(id));
  if (missing !== undefined) throw notFound('workspace', missing);
  return unique;
}

export async function createSession<Query extends Omit<Prisma.ChatSessionCreateArgs, 'data'>>(
  prisma: PrismaClient,
  userId: string,
  input: { title: string | null; workspaceIds: readonly string[] },
  query?: Query,
) {
  const title = checkOptionalName('title', input.title);
  const workspaceIds = await requireOwnWorkspaces(prisma, userId, input.workspaceIds);
  return prisma.chatSession.create({ ...query, data: { userId, title, workspaceIds } });
}

export async function deleteSession(prisma: PrismaClient, userId: string, id: string) {
  const sessionId = requireUuid(id, 'chat session');
  const { count } = await prisma.chatSession.deleteMany({ where: { id: sessionId, userId } });
  if (count === 0) throw notFound('chat session', id);
  return { id: sessionId };
}

/** Appends a message; produces no answer (answers come from the agent). */
export async function appendMessage<Query extends Omit<Prisma.ChatMessageCreateArgs, 'data'>>(
  prisma: PrismaClient,
  userId: string,
  sessionId: string,
  input: { role: MessageRole; content: string },
  query?: Query,
) {
  const session = await findSession(prisma, userId, sessionId, { select: { id: true } });
  // The database stamps the message (microseconds keep messages in order); the session's
  // updated_at takes that same stamp, so it is never older than its newest message.
  return prisma.$transaction(async (tx) => {
    const message = await tx.chatMessage.create({
      data: { sessionId: session.id, role: input.role, content: input.content },
      select: { id: true, createdAt: true },
    });
    await tx.chatSession.update({ where: { id: session.id }, data: { updatedAt: message.createdAt } });
    return tx.chatMessage.findUniqueOrThrow({ ...query, where: { id: message.id } });
  });
}
