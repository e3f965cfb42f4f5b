import { LRUCache } from 'lru-cache';

/** What authentication needs of a valid API key. */
export type CachedApiKey = {
  id: string;
  userId: string;
  scopes: readonly string[];
  /** The workspaces the key is restricted to; null: every workspace of its user. Keys never change after creation. */
  workspaceIds: ReadonlySet<string> | null;
  /** When `last_used_at` was last written (or read as written). */
  lastUsedAt: Date | null;
};

/**
 * Valid API keys by hash, so that an authenticated request does not read `api_keys` each time
 * (about 0.6 ms of a search on the embedded store, docs/benchmarks.md).
 *
 * Exact only when every change to `api_keys` goes through this process: the embedded store,
 * which one process holds at a time (embedded-store.ts locks it). A revocation empties the cache and
 * moves its generation on; a key read from the store is kept only if no revocation happened
 * while it was being read, so a read that raced a revocation can never put the revoked key back.
 */
export class ApiKeyCache {
  readonly #keys: LRUCache<string, CachedApiKey>;
  #generation = 0;

  constructor(maxKeys = 10_000) {
    this.#keys = new LRUCache({ max: maxKeys });
  }

  /** Stamp to hand back to `remember` after reading the store. */
  get generation(): number {
    return this.#generation;
  }

  get(keyHash: string): CachedApiKey | undefined {
    return this.#keys.get(keyHash);
  }

  /** Keeps a valid key read from the store when the read began at `generation`. */
  remember(keyHash: string, key: CachedApiKey, generation: number) {
    if (generation === this.#generation) this.#keys.set(keyHash, key);
  }

  /** A key was revoked (after the store has it): nothing read before counts any more. */
  invalidate() {
    this.#generation += 1;
    this.#keys.clear();
  }
}
