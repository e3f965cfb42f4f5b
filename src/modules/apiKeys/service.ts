import type { AuthDependencies } from '../../auth/authenticate.js';
import { allScopes, type Scope } from '../../auth/scopes.js';
import { notFound } from '../../errors.js';
import type { Prisma, PrismaClient } from '../../generated/prisma/client.js';
import { checkCursor, requireUuid } from '../../ids.js';
import { checkName } from '../../input-limits.js';
import { displayKeyOf, generateRawKey, hashKey } from './key-material.js';

type Db = PrismaClient | Prisma.TransactionClient;

export type NewApiKey = { id: string; name: string; displayKey: string; rawKey: string; scopes: string[] };

/** Creates a key and returns its raw value; only its hash is stored, so this is the one chance to see it. */
export async function issueApiKey(prisma: Db, userId: string, nameInput: string, scopes: readonly Scope[]): Promise<NewApiKey> {
  const name = checkName('name', nameInput);
  const rawKey = generateRawKey();
  const orderedScopes = allScopes.filter((scope) => scopes.includes(scope));
  const key = await prisma.apiKey.create({
    data: { userId, name, keyHash: hashKey(rawKey), displayKey: displayKeyOf(rawKey), scopes: orderedScopes },
  });
  return { id: key.id, name: key.name, displayKey: key.displayKey, rawKey, scopes: key.scopes };
}

export function listApiKeys<Query extends Prisma.ApiKeyFindManyArgs>(prisma: PrismaClient, userId: string, query: Query) {
  return prisma.apiKey.findMany({
    ...checkCursor(query),
    where: { userId, revokedAt: null },
    orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
  });
}

/**
 * Revokes at once: authentication reads the key from the store on every request, except through
 * the cache of valid keys, which this empties once the store has the revocation.
 */
export async function revokeApiKey({ prisma, apiKeyCache }: Pick<AuthDependencies, 'prisma' | 'apiKeyCache'>, userId: string, id: string) {
  const keyId = requireUuid(id, 'API key');
  const { count } = await prisma.apiKey.updateMany({
    where: { id: keyId, userId, revokedAt: null },
    data: { revokedAt: new Date() },
  });
  if (count === 0) throw notFound('API key', id);
  apiKeyCache?.invalidate();
  return { id: keyId };
}
