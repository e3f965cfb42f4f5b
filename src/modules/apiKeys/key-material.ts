import { createHash, randomInt, timingSafeEqual } from 'node:crypto';

const base62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const randomLength = 40;
export const apiKeyPattern = /^sk_[0-9A-Za-z]{32,}$/;

/** `sk_` and 40 base62 characters from the CSPRNG (about 238 bits). */
export function generateRawKey(): string {
  let body = '';
  for (let i = 0; i < randomLength; i += 1) body += base62[randomInt(base62.length)];
  return `sk_${body}`;
}

// The key has far more entropy than a password, so a fast hash is enough; nothing slow is
// needed to resist guessing, and lookups stay a single indexed read.
export function hashKey(rawKey: string): string {
  return createHash('sha256').update(rawKey).digest('hex');
}

export function hashesEqual(storedHex: string, candidateHex: string): boolean {
  const stored = Buffer.from(storedHex, 'hex');
  const candidate = Buffer.from(candidateHex, 'hex');
  return stored.length === candidate.length && timingSafeEqual(stored, candidate);
}

export function displayKeyOf(rawKey: string): string {
  return `${rawKey.slice(0, 7)}...${rawKey.slice(-4)}`;
}
