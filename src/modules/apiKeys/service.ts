import type { AuthDependencies, Viewer } from '../../auth/authenticate.js';
import { apiKeyVisible, cursorInList, grantFor, readApiKeys, type Access } from '../../auth/policy.js';
import { allScopes, type Scope } from '../../auth/scopes.js';
import { notFound } from '../../errors.js';
import type { Prisma, PrismaClient } from '../../generated/prisma/client.js';
import { checkCursor, requireUuid } from '../../ids.js';
import { checkName } from '../../input-limits.js';
import { displayKeyOf, generateRawKey, hashKey } from './key-material.js';

type Db = PrismaClient | Prisma.TransactionClient;

/** What the API-key service uses: the store and the cache of valid keys a revocation empties. */
export type ApiKeyDependencies = { auth: Pick<AuthDependencies, 'prisma' | 'apiKeyCache'> };

/** `workspaceIds`: null when the key sees every workspace of its user. */
export type NewApiKey = { id: string; name: string; displayKey: string; rawKey: string; scopes: string[]; workspaceIds: string[] | null };

/**
 * Creates a key and returns its raw value; only its hash is stored, so this is the one chance to
 * see it. No checks of who asks: `createApiKey` is the API's way in, `kb users create` the other.
 */
export async function issueApiKey(
  prisma: Db,
  userId: string,
  nameInput: string,
  scopes: readonly Scope[],
  workspaceIds: readonly string[] | null = null,
): Promise<NewApiKey> {
  const name = checkName('name', nameInput);
  const rawKey = generateRawKey();
  const orderedScopes = allScopes.filter((scope) => scopes.includes(scope));
  const key = await prisma.apiKey.create({
    data: {
      userId,
      name,
      keyHash: hashKey(rawKey),
      displayKey: displayKeyOf(rawKey),
      scopes: orderedScopes,
      workspaceRestricted: workspaceIds !== null,
      workspaceIds: [...(workspaceIds ?? [])],
    },
  });
  return { id: key.id, name: key.name, displayKey: key.displayKey, rawKey, scopes: key.scopes, workspaceIds: workspaceIdsOf(key) };
}

/** A key's workspaces as the API shows them: null when it is not restricted. */
export const workspaceIdsOf = (key: { workspaceRestricted: boolean; workspaceIds: string[] }) => (key.workspaceRestricted ? key.workspaceIds : null);

/**
 * A key for the viewer's user, carrying no more than the viewer may grant (policy.ts,
 * `grantFor`): scopes it holds, and, from a key restricted to workspaces, some of its workspaces.
 */
export async function createApiKey(
  { auth }: ApiKeyDependencies,
  viewer: Viewer,
  input: { name: string; scopes: readonly Scope[]; workspaceIds?: readonly string[] | null },
) {
  const name = checkName('name', input.name);
  const grant = await grantFor(auth.prisma, viewer, { scopes: input.scopes, workspaceIds: input.workspaceIds });
  return issueApiKey(auth.prisma, viewer.userId, name, grant.scopes, grant.workspaceIds);
}

/** The viewer's active keys it may see (policy.ts), newest first. */
export function listApiKeys<Query extends Prisma.ApiKeyFindManyArgs>({ auth }: ApiKeyDependencies, viewer: Access, query: Query) {
  return readApiKeys(auth.prisma, viewer, async (db, where) => {
    const active = { AND: [where, { revokedAt: null }] };
    if (!(await cursorInList(checkCursor(query), (id) => db.apiKey.count({ where: { AND: [active, { id }] } })))) return [];
    return db.apiKey.findMany({ ...query, where: active, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }] });
  });
}

/**
 * Revokes at once: authentication reads the key from the store on every request, except through
 * the cache of valid keys, which this empties once the store has the revocation. A key the
 * viewer may not see is a 404; a key's workspaces never change, so checking first is exact.
 */
export async function revokeApiKey({ auth }: ApiKeyDependencies, viewer: Access, id: string) {
  const { prisma, apiKeyCache } = auth;
  const keyId = requireUuid(id, 'API key');
  const key = await prisma.apiKey.findFirst({
    where: { id: keyId, userId: viewer.userId, revokedAt: null },
    select: { userId: true, workspaceRestricted: true, workspaceIds: true },
  });
  if (!key || !apiKeyVisible(viewer, key)) throw notFound('API key', id);
  const { count } = await prisma.apiKey.updateMany({
    where: { id: keyId, userId: viewer.userId, revokedAt: null },
    data: { revokedAt: new Date() },
  });
  if (count === 0) throw notFound('API key', id);
  apiKeyCache?.invalidate();
  return { id: keyId };
}
