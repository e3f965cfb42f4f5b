import { errors as joseErrors, jwtVerify } from 'jose';
import { AppError } from '../errors.js';
import type { PrismaClient } from '../generated/prisma/client.js';
import { apiKeyPattern, hashesEqual, hashKey } from '../modules/apiKeys/key-material.js';
import { isScope, type Scope } from './scopes.js';

export type Viewer = {
  userId: string;
  scopes: ReadonlySet<Scope>;
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
  deps: { prisma: PrismaClient; jwtSecret: string | undefined },
): Promise<Viewer | null> {
  if (authorization === null || authorization.trim() === '') return null;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization);
  if (!match) throw new AppError('unauthorized', 'the Authorization header must be "Bearer <token>"');
  const token = match[1]!;
  if (token.startsWith('sk_')) return authenticateApiKey(token, deps.prisma);
  if (!deps.jwtSecret) throw invalidCredential();
  return authenticateJwt(token, deps.prisma, deps.jwtSecret);
}

async function authenticateApiKey(rawKey: string, prisma: PrismaClient): Promise<Viewer> {
  if (!apiKeyPattern.test(rawKey)) throw invalidCredential();
  const keyHash = hashKey(rawKey);
  // Raw SQL like the search path's other reads: every authenticated request runs it.
  const [key] = await prisma.$queryRaw<{ id: string; userId: string; keyHash: string; scopes: string[]; revokedAt: Date | null; lastUsedAt: Date | null }[]>`
    SELECT id::text, user_id::text AS "userId", key_hash AS "keyHash", scopes, revoked_at AS "revokedAt", last_used_at AS "lastUsedAt"
      FROM api_keys WHERE key_hash = ${keyHash}`;
  if (!key || key.revokedAt !== null || !hashesEqual(key.keyHash, keyHash)) throw invalidCredential();
  const now = new Date();
  if (!key.lastUsedAt || now.getTime() - key.lastUsedAt.getTime() >= lastUsedPrecisionMs) {
    await prisma.apiKey.update({ where: { id: key.id }, data: { lastUsedAt: now } });
  }
  return {
    userId: key.userId,
    scopes: new Set(key.scopes.filter(isScope)),
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
    credential: { kind: 'jwt' },
  };
}
