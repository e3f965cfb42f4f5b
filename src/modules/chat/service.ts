import { cursorInList, readSessions, requireSessionId, sessionNotFound, sessionSql, sessionWorkspaces, type Access } from '../../auth/policy.js';
import type { Prisma, PrismaClient } from '../../generated/prisma/client.js';
import { checkCursor } from '../../ids.js';
import { checkOptionalName } from '../../input-limits.js';

export const messageRoles = ['user', 'assistant', 'system'] as const;
export type MessageRole = (typeof messageRoles)[number];

/** What the chat service uses. */
export type ChatDependencies = { prisma: PrismaClient };

/** The sessions the viewer may see (policy.ts), newest first. */
export function listSessions<Query extends Prisma.ChatSessionFindManyArgs>({ prisma }: ChatDependencies, viewer: Access, query: Query) {
  return readSessions(prisma, viewer, async (db, where) => {
    if (!(await cursorInList(checkCursor(query), (id) => db.chatSession.count({ where: { AND: [where, { id }] } })))) return [];
    return db.chatSession.findMany({ ...query, where, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }] });
  });
}

/** A session the viewer may see; otherwise 404, exactly as for one that does not exist. */
export async function findSession<Query extends Omit<Prisma.ChatSessionFindFirstArgs, 'where'>>(
  { prisma }: ChatDependencies,
  viewer: Access,
  id: string,
  query?: Query,
) {
  const sessionId = requireSessionId(id);
  const session = await readSessions(prisma, viewer, (db, where) => db.chatSession.findFirst({ ...query, where: { ...where, id: sessionId } }));
  if (!session) throw sessionNotFound(id);
  return session;
}

/** Every workspace named must be one the viewer may see (404 naming the first that is not); duplicates collapse. */
export async function createSession<Query extends Omit<Prisma.ChatSessionCreateArgs, 'data'>>(
  { prisma }: ChatDependencies,
  viewer: Access,
  input: { title: string | null; workspaceIds: readonly string[] },
  query?: Query,
) {
  const title = checkOptionalName('title', input.title);
  const workspaceIds = await sessionWorkspaces(prisma, viewer, input.workspaceIds);
  return prisma.chatSession.create({ ...query, data: { userId: viewer.userId, title, workspaceIds } });
}

/** Deletes a session the viewer may see, deciding that in the same statement (messages go with it). */
export async function deleteSession({ prisma }: ChatDependencies, viewer: Access, id: string) {
  const sessionId = requireSessionId(id);
  const count = await prisma.$executeRaw`DELETE FROM chat_sessions s WHERE ${sessionSql('s', viewer, sessionId)}`;
  if (count === 0) throw sessionNotFound(id);
  return { id: sessionId };
}

/** Appends a message; produces no answer (answers come from the agent). */
export async function appendMessage<Query extends Omit<Prisma.ChatMessageCreateArgs, 'data'>>(
  dependencies: ChatDependencies,
  viewer: Access,
  sessionId: string,
  input: { role: MessageRole; content: string },
  query?: Query,
) {
  const { prisma } = dependencies;
  const session = await findSession(dependencies, viewer, sessionId, { select: { id: true } });
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
