import { describe, expect, it } from 'vitest';
import { ApiKeyCache } from './api-key-cache.js';

const key = { id: 'k1', userId: 'u1', scopes: ['kb:read'], workspaceIds: null, lastUsedAt: null };

describe('ApiKeyCache', () => {
  it('keeps a key read while nothing was revoked', () => {
    const cache = new ApiKeyCache();
    const generation = cache.generation;
    cache.remember('hash', key, generation);
    expect(cache.get('hash')).toBe(key);
  });

  it('does not keep a key whose read began before a revocation, so a racing read cannot bring it back', () => {
    const cache = new ApiKeyCache();
    const generation = cache.generation;
    // The store was read here (the key still valid), then another request revoked a key.
    cache.invalidate();
    cache.remember('hash', key, generation);
    expect(cache.get('hash')).toBeUndefined();
    cache.remember('hash', key, cache.generation);
    expect(cache.get('hash')).toBe(key);
  });

  it('carries a key restricted to workspaces with its restriction, and forgets it on a revocation like any other', () => {
    const cache = new ApiKeyCache();
    const restricted = { ...key, id: 'k3', workspaceIds: new Set(['w1', 'w2']) };
    cache.remember('r', restricted, cache.generation);
    expect(cache.get('r')?.workspaceIds).toEqual(new Set(['w1', 'w2']));
    cache.remember('u', key, cache.generation);
    expect(cache.get('u')?.workspaceIds).toBeNull();
    cache.invalidate();
    expect(cache.get('r')).toBeUndefined();
  });

  it('forgets every key on a revocation', () => {
    const cache = new ApiKeyCache();
    cache.remember('a', key, cache.generation);
    cache.remember('b', { ...key, id: 'k2' }, cache.generation);
    cache.invalidate();
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('b')).toBeUndefined();
  });

  it('holds at most its bound, dropping the least recently used', () => {
    const cache = new ApiKeyCache(2);
    cache.remember('a', key, cache.generation);
    cache.remember('b', key, cache.generation);
    cache.get('a');
    cache.remember('c', key, cache.generation);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBe(key);
    expect(cache.get('c')).toBe(key);
  });
});
