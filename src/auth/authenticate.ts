import { errors as joseErrors, jwtVerify } from 'jose';
import { AppError } from '../errors.js';
import type { PrismaClient } from '../generated/prisma/client.js';
import { apiKeyPattern, hashesEqual, hashKey } from '../modules/apiKeys/key-material.js';
import type { ApiKeyCache, CachedApiKey } from './api-key-cache.js';
import { isScope, type Scope } from './scopes.js';
import { timedPart } from '../observability/request-context.js';

/** What authentication reads: the store, the JWT secret, and the cache of valid keys where one is exact. */
export type AuthDependencies = {
  prisma: PrismaClient;
  jwtSecret: string | undefined;
  /** Only on a store that one process holds (the embedded one); see api-key-cache.ts. */
  apiKeyCache: ApiKeyCache | null;
};

export type Viewer = {
  userId: string;
  scopes: ReadonlySet<Scope>;
  /**
   * The workspaces an API key is restricted to; null: every workspace of the user (JWTs and
   * unrestricted keys). What it allows is decided in policy.ts.
   */
  workspaceIds: ReadonlySet<string> | null;
  credential: { kind: 'api_key'; apiKeyId: string } | { kind: 'jwt' };
};

/** `last_used_at` is kept to this precision: a key used many times a second is not written each time. */
const lastUsedPrecisionMs = 60_000;

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const invalidCredential = () => new AppError('unauthorized', 'invalid, expired or revoked credential');

/**
 * Resolves the `Authorization` header to a viewer. No header: `null` (anonymous). A header
 * that is malformed or names a credential that is not valid right now: 401.
 */
export async function authenticate(
  authorization: string | null,
  deps: AuthDependencies,
): Promise<Viewer | null> {
  if (authorization === null || authorization.trim() === '') return null;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization);
  if (!match) throw new AppError('unauthorized', 'the Authorization header must be "Bearer <token>"');
  const token = match[1]!;
  if (token.startsWith('sk_')) return timedPart('auth', authenticateApiKey(token, deps));
  if (!deps.jwtSecret) throw invalidCredential();
  return timedPart('auth', authenticateJwt(token, deps.prisma, deps.jwtSecret));
}

async function authenticateApiKey(rawKey: string, { prisma, apiKeyCache }: AuthDependencies): Promise<Viewer> {
  if (!apiKeyPattern.test(rawKey)) throw invalidCredential();
  const keyHash = hashKey(rawKey);
  let key = apiKeyCache?.get(keyHash);
  if (!key) {
    const generation = apiKeyCache?.generation;
    // Raw SQL like the search path's other reads: every authenticated request without a cache runs it.
    const [row] = await prisma.$queryRaw<(Omit<CachedApiKey, 'workspaceIds'> & { keyHash: string; revokedAt: Date | null; restricted: boolean; workspaceIds: string[] | null })[]>`
      SELECT id::text, user_id::text AS "userId", key_hash AS "keyHash", scopes, revoked_at AS "revokedAt", last_used_at AS "lastUsedAt",
             workspace_restricted AS restricted, workspace_ids::text[] AS "workspaceIds"
        FROM api_keys WHERE key_hash = ${keyHash}`;
    if (!row || row.revokedAt !== null || !hashesEqual(row.keyHash, keyHash)) throw invalidCredential();
    key = {
      id: row.id,
      userId: row.userId,
      scopes: row.scopes,
      // A restricted key whose list is somehow missing sees nothing, never everything.
      workspaceIds: row.restricted ? new Set(row.workspaceIds ?? []) : null,
      lastUsedAt: row.lastUsedAt,
    };
    apiKeyCache?.remember(keyHash, key, generation!);
  }
  const now = new Date();
  if (!key.lastUsedAt || now.getTime() - key.lastUsedAt.getTime() >= lastUsedPrecisionMs) {
    // Set before the write: requests meanwhile do not write it again.
    key.lastUsedAt = now;
    await prisma.apiKey.update({ where: { id: key.id }, data: { lastUsedAt: now } });
  }
  return {
    userId: key.userId,
    scopes: new Set(key.scopes.filter(isScope)),
    workspaceIds: key.workspaceIds,
    credential: { kind: 'api_key', apiKeyId: key.id },
  };
}

async function authenticateJwt(token: string, prisma: PrismaClient, secret: string): Promise<Viewer> {
  let payload;
  try {
    ({ payload } = await jwtVerify(token, new TextEncoder().encode(secret), {
      algorithms: ['HS256'],
      requiredClaims: ['sub', 'exp'],
    }));
  } catch (error) {
    if (error instanceof joseErrors.JOSEError) throw invalidCredential();
    throw error;
  }
  const userId = payload.sub!;
  if (!uuidPattern.test(userId)) throw invalidCredential();
  const user = await prisma.user.findUnique({ where: { id: userId }, select: { id: true } });
  if (!user) throw invalidCredential();
  const scopeClaim = typeof payload.scope === 'string' ? payload.scope : '';
  return {
    userId,
    scopes: new Set(scopeClaim.split(' ').filter(isScope)),
    // A JWT speaks for the user: never restricted to workspaces.
    workspaceIds: null,
    credential: { kind: 'jwt' },
  };
}
