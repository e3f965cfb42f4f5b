import { AppError, missingScope, notFound } from '../errors.js';
import { Prisma, type PrismaClient } from '../generated/prisma/client.js';
import { isUuid, requireUuid } from '../ids.js';
import type { Viewer } from './authenticate.js';
import { allScopes, type Scope } from './scopes.js';

/**
 * Who may see what: the one place that decides it. A user sees their own workspaces and
 * everything in them; an API key restricted to workspaces sees only those, and everything else
 * is reported exactly as if it did not exist (404), so a restricted key learns nothing about
 * the rest. Services ask this module for a condition (Prisma or SQL) or a check; none of them
 * spells the rule itself.
 *
 * - Workspaces, and what lies in them (documents, chunks, search results), are visible when the
 *   workspace is the user's and, for a restricted key, one of its workspaces.
 * - A chat session is the user's; for a restricted key it is visible only when it names at
 *   least one workspace and every workspace it names is one of the key's. A session without
 *   workspaces holds no workspace's content but is the user's own conversation: hidden.
 * - An agent run is the user's; for a restricted key it is visible when every workspace it
 *   searched is the key's and, when it continued a session, the session is visible too (its
 *   question was rewritten from the conversation, so its events may carry what the session's
 *   other workspaces said).
 * - An API key is visible to an unrestricted caller; to a restricted key only when it is itself
 *   restricted to some of the caller's workspaces (so the caller itself, and keys it made).
 * - A restricted key cannot create a workspace, and what it creates (keys, sessions) stays within
 *   its workspaces. No credential can grant a scope it lacks.
 * - JWTs are never restricted.
 */

type Db = PrismaClient | Prisma.TransactionClient;

/** What access depends on: the user, and the workspaces a key is restricted to (null: all of the user's). */
export type Access = Pick<Viewer, 'userId' | 'workspaceIds'>;

/** The most workspaces a key may be restricted to (after duplicates collapse). */
export const maxKeyWorkspaces = 100;

export const isRestricted = (viewer: Access) => viewer.workspaceIds !== null;

const restrictedIds = (viewer: Access) => (viewer.workspaceIds === null ? null : [...viewer.workspaceIds]);

/** `workspace <id> not found`: the one answer for a missing, another user's, or an out-of-restriction workspace. */
export const workspaceNotFound = (id: string) => notFound('workspace', id);

/**
 * The workspaces the viewer may see, as a condition on `workspaces`; with `id` (a checked
 * uuid), only that one. Used for every read and write of a workspace and, through the
 * relation, of its documents.
 */
export function workspaceWhere(viewer: Access, id?: string): Prisma.WorkspaceWhereInput {
  const restricted = viewer.workspaceIds;
  if (id !== undefined) return { userId: viewer.userId, id: restricted === null || restricted.has(id) ? id : { in: [] } };
  return { userId: viewer.userId, ...(restricted !== null && { id: { in: [...restricted] } }) };
}

/** The documents the viewer may see (in `workspaceId` only, when given), as a condition on `documents`. */
export function documentWhere(viewer: Access, documentId: string, workspaceId?: string): Prisma.DocumentWhereInput {
  return { id: documentId, workspace: workspaceWhere(viewer, workspaceId) };
}

/**
 * The workspace rule as a condition on `workspaces` (alias `alias`) for raw statements that
 * check it together with other work: the rows are those of `workspaceIds` (checked uuids) the
 * viewer may see.
 */
export function workspacesSql(alias: string, viewer: Access, workspaceIds: readonly string[]): Prisma.Sql {
  const table = Prisma.raw(alias);
  const ids = restrictedIds(viewer);
  const restriction = ids === null ? Prisma.empty : Prisma.sql` AND ${table}.id = ANY(${ids}::uuid[])`;
  return Prisma.sql`${table}.id = ANY(${[...workspaceIds]}::uuid[]) AND ${table}.user_id = ${viewer.userId}::uuid${restriction}`;
}

/**
 * Every workspace named must be one the viewer may see; the first that is not (not a uuid,
 * missing, another user's, outside the key's restriction) is a 404 naming it. Returns them
 * lower-cased, once each, in the order given.
 */
export async function requireWorkspaces(db: Db, viewer: Access, workspaceIds: readonly string[]): Promise<string[]> {
  const unique = [...new Set(workspaceIds.map((id) => id.toLowerCase()))];
  const invalid = unique.find((id) => !isUuid(id));
  if (invalid !== undefined) throw workspaceNotFound(invalid);
  const visible = unique.length === 0 ? [] : await db.workspace.findMany({ where: { ...workspaceWhere(viewer), id: { in: unique } }, select: { id: true } });
  const visibleIds = new Set(visible.map((workspace) => workspace.id));
  // Checked again in memory: the restriction must hold whatever the condition above became.
  const missing = unique.find((id) => !visibleIds.has(id) || (viewer.workspaceIds !== null && !viewer.workspaceIds.has(id)));
  if (missing !== undefined) throw workspaceNotFound(missing);
  return unique;
}

/**
 * Whether a list's cursor names a row of that list. Prisma places a cursor by its row even when
 * the row is outside the list's condition, so a cursor naming a row the viewer cannot see (another
 * workspace, another user's) would page from where that row sits, telling that it exists and
 * when it was made. Lists answer such a cursor as they answer an unknown id: with an empty page.
 */
export async function cursorInList(query: { cursor?: { id?: unknown } }, countInList: (id: string) => Promise<number>): Promise<boolean> {
  const id = query.cursor?.id;
  return typeof id !== 'string' || (await countInList(id)) > 0;
}

/** Why a restricted key may not do what only an unrestricted credential may (create a workspace); null when it may. */
export function unrestrictedOnly(viewer: Access | null, action: string): AppError | null {
  if (!viewer || !isRestricted(viewer)) return null;
  return new AppError('forbidden', `this API key is restricted to workspaces and cannot ${action}; use an unrestricted key`);
}

/**
 * Whether something that names workspaces (a session, a key, an agent run) is the viewer's to see
 * as far as the restriction goes: always for an unrestricted viewer; for a restricted key, when it
 * names at least one workspace and every one is the key's. Ownership is checked separately.
 */
export function withinRestriction(viewer: Access, workspaceIds: readonly string[]): boolean {
  const restricted = viewer.workspaceIds;
  return restricted === null || (workspaceIds.length > 0 && workspaceIds.every((id) => restricted.has(id.toLowerCase())));
}

/**
 * Runs `read` with a condition selecting the rows of `table` (chat sessions or API keys) whose
 * `workspace_ids` lie within the viewer's restriction; for an unrestricted viewer the condition
 * is only the user's own rows. Prisma has no "array contained in" filter, so for a restricted
 * viewer the condition is "names none of the workspace ids the user's rows name outside the
 * key's", computed in the same snapshot as `read` (a repeatable-read transaction): a row written
 * between the two statements cannot slip through.
 */
async function readWithin<Result, Where>(
  prisma: PrismaClient,
  viewer: Access,
  table: 'chat_sessions' | 'api_keys',
  read: (db: Db, where: Where) => Promise<Result>,
): Promise<Result> {
  const ids = restrictedIds(viewer);
  if (ids === null) return read(prisma, { userId: viewer.userId } as Where);
  return prisma.$transaction(
    async (tx) => {
      const outside = await tx.$queryRaw<{ id: string }[]>`
        SELECT DISTINCT named.id::text AS id
          FROM ${Prisma.raw(table)} t CROSS JOIN LATERAL unnest(t.workspace_ids) AS named(id)
         WHERE t.user_id = ${viewer.userId}::uuid AND NOT (named.id = ANY(${ids}::uuid[]))`;
      const where = {
        userId: viewer.userId,
        workspaceIds: { isEmpty: false },
        NOT: { workspaceIds: { hasSome: outside.map((row) => row.id) } },
        ...(table === 'api_keys' && { workspaceRestricted: true }),
      };
      return read(tx, where as Where);
    },
    { isolationLevel: Prisma.TransactionIsolationLevel.RepeatableRead },
  );
}

/** Reads chat sessions with the condition of those the viewer may see (see readWithin). */
export function readSessions<Result>(prisma: PrismaClient, viewer: Access, read: (db: Db, where: Prisma.ChatSessionWhereInput) => Promise<Result>) {
  return readWithin(prisma, viewer, 'chat_sessions', read);
}

/** Reads API keys with the condition of those the viewer may see (see readWithin). */
export function readApiKeys<Result>(prisma: PrismaClient, viewer: Access, read: (db: Db, where: Prisma.ApiKeyWhereInput) => Promise<Result>) {
  return readWithin(prisma, viewer, 'api_keys', read);
}

/**
 * The session rule as a condition on `chat_sessions` (alias `alias`), for statements that must
 * decide it in the same statement as their work (a deletion). `sessionId` must be a checked uuid.
 */
export function sessionSql(alias: string, viewer: Access, sessionId: string): Prisma.Sql {
  const table = Prisma.raw(alias);
  const ids = restrictedIds(viewer);
  const restriction =
    ids === null ? Prisma.empty : Prisma.sql` AND cardinality(${table}.workspace_ids) > 0 AND ${table}.workspace_ids <@ ${ids}::uuid[]`;
  return Prisma.sql`${table}.id = ${sessionId}::uuid AND ${table}.user_id = ${viewer.userId}::uuid${restriction}`;
}

/**
 * Whether the viewer may see this agent run: `run` as stored (its owner, the workspaces it searched,
 * its session); `sessionWorkspaces` reads the workspaces the run's session names (null when the
 * session is gone), asked only for a restricted key.
 */
export async function agentRunVisible(
  viewer: Access,
  run: { userId: string; workspaceIds: readonly string[] | null; sessionId: string | null },
  sessionWorkspaces: (sessionId: string) => Promise<readonly string[] | null>,
): Promise<boolean> {
  if (run.userId !== viewer.userId || !withinRestriction(viewer, run.workspaceIds ?? [])) return false;
  if (run.sessionId === null || viewer.workspaceIds === null) return true;
  const named = await sessionWorkspaces(run.sessionId);
  return named === null || withinRestriction(viewer, named);
}

/** Whether the viewer may see (and so revoke) this key of the user's. */
export function apiKeyVisible(viewer: Access, key: { userId: string; workspaceRestricted: boolean; workspaceIds: readonly string[] }): boolean {
  if (key.userId !== viewer.userId) return false;
  return viewer.workspaceIds === null || (key.workspaceRestricted && withinRestriction(viewer, key.workspaceIds));
}

/** What a new key may carry: scopes in canonical order, and its workspaces (null: every workspace of the user). */
export type Grant = { scopes: Scope[]; workspaceIds: string[] | null };

/**
 * What the viewer may put on a key it creates. No escalation: every scope asked for must be one
 * the caller holds (403 naming it), and a restricted key can only make keys restricted to some
 * of its own workspaces (403 when it asks for every workspace, 404 for a workspace it cannot
 * see). An empty list is a 400 (leave the field out for every workspace); duplicates collapse.
 */
export async function grantFor(
  db: Db,
  viewer: Access & Pick<Viewer, 'scopes'>,
  requested: { scopes: readonly Scope[]; workspaceIds: readonly string[] | null | undefined },
): Promise<Grant> {
  const scopes = allScopes.filter((scope) => requested.scopes.includes(scope));
  const lacking = scopes.find((scope) => !viewer.scopes.has(scope));
  if (lacking) throw new AppError('forbidden', `${missingScope(lacking).message}, so it cannot grant it to a new key`);
  if (requested.workspaceIds === undefined || requested.workspaceIds === null) {
    const refusal = unrestrictedOnly(viewer, 'create a key for every workspace; name workspace_ids among its own');
    if (refusal) throw refusal;
    return { scopes, workspaceIds: null };
  }
  const unique = new Set(requested.workspaceIds.map((id) => id.toLowerCase()));
  if (unique.size === 0) throw new AppError('bad_request', 'workspace_ids: must name at least one workspace; leave it out for a key that sees every workspace', { field: 'workspace_ids' });
  if (unique.size > maxKeyWorkspaces) throw new AppError('bad_request', `workspace_ids: must name at most ${maxKeyWorkspaces} workspaces`, { field: 'workspace_ids' });
  return { scopes, workspaceIds: await requireWorkspaces(db, viewer, requested.workspaceIds) };
}

/**
 * The workspaces a chat session created by the viewer names: those asked for, each one the
 * viewer may see. A restricted key must name some (a session without workspaces is one it could
 * not see afterwards): 403.
 */
export async function sessionWorkspaces(db: Db, viewer: Access, workspaceIds: readonly string[]): Promise<string[]> {
  if (workspaceIds.length === 0) {
    const refusal = unrestrictedOnly(viewer, 'create a chat session without workspaces; name workspace_ids among its own');
    if (refusal) throw refusal;
  }
  return requireWorkspaces(db, viewer, workspaceIds);
}

/** A chat session the viewer may see; otherwise 404, as for one that does not exist. */
export function sessionNotFound(id: string) {
  return notFound('chat session', id);
}

/** A checked session id: a string that is not a uuid is a 404, like any unknown id. */
export const requireSessionId = (id: string) => requireUuid(id, 'chat session');

/**
 * Whether a request is made with the same credential as another (the same API key, or a JWT of
 * the same user with the same scopes) and so may use what that one reserved: a graphql-sse
 * stream carries the results of every operation sent to it, so a narrower credential of the
 * same user must not open or feed a stream a broader one reserved.
 */
export function sameCredential(a: Viewer, b: Viewer): boolean {
  if (a.userId !== b.userId || a.credential.kind !== b.credential.kind) return false;
  if (a.credential.kind === 'api_key' && b.credential.kind === 'api_key' && a.credential.apiKeyId !== b.credential.apiKeyId) return false;
  return sameSet(a.scopes, b.scopes) && sameWorkspaces(a, b);
}

const sameSet = <T>(a: ReadonlySet<T>, b: ReadonlySet<T>) => a.size === b.size && [...a].every((item) => b.has(item));

function sameWorkspaces(a: Access, b: Access): boolean {
  if (a.workspaceIds === null || b.workspaceIds === null) return a.workspaceIds === b.workspaceIds;
  return sameSet(a.workspaceIds, b.workspaceIds);
}
