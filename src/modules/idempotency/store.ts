import type { PrismaClient } from '../../generated/prisma/client.js';
import type { Logger } from '../../logger.js';

/** How long a key and its first response are kept: Stripe's 24 hours, counted from the first request. */
export const idempotencyKeyLifetimeMs = 24 * 60 * 60 * 1000;
/**
 * A request in progress holds its key by this lease, renewed every third of it while it runs.
 * A key whose holder stopped renewing (its process died) is free this long after the last
 * renewal, and the next retry takes it over.
 */
export const idempotencyLeaseMs = 60_000;
/** How often expired keys are deleted. */
const sweepIntervalMs = 15 * 60 * 1000;
/** Rows one sweep statement deletes, so a large backlog is removed in short statements. */
const sweepBatch = 1000;

/** What makes a request the same request: who sent it, under which key, and a digest of the rest. */
export type IdempotentRequest = {
  userId: string;
  key: string;
  method: string;
  path: string;
  /** A digest of everything that identifies the request (method, path, body, credential). */
  requestHash: string;
};

export type StoredResponse = {
  status: number;
  /** Lower-case header names, as they are to be replayed. */
  headers: Record<string, string>;
  body: Uint8Array;
};

/**
 * The outcome of `begin`:
 * - `started`: the caller owns the key and must execute the request, then `complete` (store the
 *   outcome for retries) or `release` (forget the key: the request may be sent again with it).
 *   Until then the lease is renewed by a timer of this process.
 * - `replay`: a request with this key and hash already finished; here is what it answered.
 * - `in_progress`: a request with this key and hash is still being answered.
 * - `mismatch`: the key was used for another request (another hash).
 */
export type BeginResult =
  | { kind: 'started'; claim: IdempotencyClaim }
  | { kind: 'replay'; response: StoredResponse }
  | { kind: 'in_progress' }
  | { kind: 'mismatch'; method: string; path: string };

type Row = {
  method: string;
  path: string;
  request_hash: string;
  response_status: number | null;
  response_headers: Record<string, string> | null;
  response_body: Uint8Array | null;
  live: boolean;
};

/**
 * Idempotency keys in the store (`idempotency_keys`), one row per user and key. The row is
 * inserted when a request starts (`INSERT ... ON CONFLICT`: of two requests at once, on any
 * number of processes, exactly one gets it), holds no response while the request runs, and the
 * response once it ended. An expired row, finished or abandoned, counts as absent: `begin` takes
 * it over, and the sweep deletes it. Times are the store's clock, so processes agree.
 *
 * Generic over what is stored: the REST layer stores whole responses (src/rest/idempotency.ts);
 * a long-running request (an agent stream) can `complete` as soon as it has something to point a
 * retry at (its job id) and serve the retry from there.
 */
export class IdempotencyStore {
  /** Keys this process is answering (`userId key`): known without asking the store. */
  readonly #held = new Map<string, IdempotencyClaim>();
  #sweeper: NodeJS.Timeout | undefined;
  #stopped = false;
  #sweeping: Promise<unknown> = Promise.resolve();

  constructor(
    readonly prisma: PrismaClient,
    private readonly log: Pick<Logger, 'info' | 'error'>,
    readonly options: { lifetimeMs: number; leaseMs: number } = { lifetimeMs: idempotencyKeyLifetimeMs, leaseMs: idempotencyLeaseMs },
  ) {}

  /**
   * Starts the periodic sweep of expired keys. `exclusive`: no other process uses the store (the
   * embedded one), so keys left in progress by an earlier run of this one are abandoned: they
   * are freed now rather than when their lease runs out.
   */
  async start(options: { exclusive: boolean }) {
    if (options.exclusive) {
      const freed = await this.prisma.$executeRaw`DELETE FROM idempotency_keys WHERE response_status IS NULL`;
      if (freed > 0) this.log.info(`idempotency: freed ${freed} keys left in progress by a process that stopped`);
    }
    this.#sweeper = setInterval(() => void this.#sweepInBackground(), sweepIntervalMs);
    this.#sweeper.unref();
    void this.#sweepInBackground();
  }

  async stop() {
    this.#stopped = true;
    clearInterval(this.#sweeper);
    for (const claim of this.#held.values()) claim.stopRenewing();
    await this.#sweeping;
  }

  #sweepInBackground() {
    this.#sweeping = this.sweep().then(
      (deleted) => deleted > 0 && this.log.info(`idempotency: deleted ${deleted} expired keys`),
      (error: unknown) => this.log.error('idempotency: deleting expired keys failed', error),
    );
    return this.#sweeping;
  }

  /**
   * Deletes expired keys, a batch at a time; returns how many. A key this process still answers
   * whose lease ran out may go too: `begin` still knows it is held, and its response is then not kept.
   */
  async sweep(): Promise<number> {
    let deleted = 0;
    for (;;) {
      const count = await this.prisma.$executeRaw`
        DELETE FROM idempotency_keys WHERE ctid IN (
          SELECT ctid FROM idempotency_keys WHERE expires_at <= clock_timestamp() LIMIT ${sweepBatch})`;
      deleted += count;
      if (count < sweepBatch || this.#stopped) return deleted;
    }
  }

  /** The live (not expired) record of a key, or null. */
  async lookup(userId: string, key: string): Promise<(Omit<Row, 'live'> & { inProgress: boolean }) | null> {
    const [row] = await this.#read(userId, key);
    if (!row?.live) return null;
    const { live: _live, ...record } = row;
    return { ...record, inProgress: row.response_status === null || this.#held.has(heldKey(userId, key)) };
  }

  /** Claims the key for this request, or says why not (see BeginResult). */
  async begin(request: IdempotentRequest): Promise<BeginResult> {
    const { userId, key, method, path, requestHash } = request;
    const held = this.#held.get(heldKey(userId, key));
    // This process is answering it: its lease may be late (a store busy with one long
    // statement), which must not let a retry in.
    if (held) return held.requestHash === requestHash ? { kind: 'in_progress' } : { kind: 'mismatch', method: held.method, path: held.path };
    // The row may expire or be deleted between the two statements below; then try again.
    for (let attempt = 0; attempt < 5; attempt += 1) {
      const [claimed] = await this.prisma.$queryRaw<{ token: string }[]>`
        INSERT INTO idempotency_keys (user_id, key, method, path, request_hash, expires_at)
        VALUES (${userId}::uuid, ${key}, ${method}, ${path}, ${requestHash}, clock_timestamp() + ${this.options.leaseMs} * interval '1 millisecond')
        ON CONFLICT (user_id, key) DO UPDATE SET
          method = EXCLUDED.method, path = EXCLUDED.path, request_hash = EXCLUDED.request_hash,
          response_status = NULL, response_headers = NULL, response_body = NULL,
          created_at = clock_timestamp(), expires_at = EXCLUDED.expires_at
          WHERE idempotency_keys.expires_at <= clock_timestamp()
        RETURNING created_at::text AS token`;
      if (claimed) {
        const claim = new IdempotencyClaim(this, request, claimed.token);
        this.#held.set(heldKey(userId, key), claim);
        return { kind: 'started', claim };
      }
      const [row] = await this.#read(userId, key);
      if (!row?.live) continue;
      if (row.request_hash !== requestHash) return { kind: 'mismatch', method: row.method, path: row.path };
      if (row.response_status === null) return { kind: 'in_progress' };
      return {
        kind: 'replay',
        response: { status: row.response_status, headers: row.response_headers ?? {}, body: row.response_body ?? new Uint8Array() },
      };
    }
    // Expiring under our feet five times running: only a store clock gone wrong does that.
    return { kind: 'in_progress' };
  }

  #read(userId: string, key: string) {
    return this.prisma.$queryRaw<Row[]>`
      SELECT method, path, request_hash, response_status, response_headers, response_body, expires_at > clock_timestamp() AS live
        FROM idempotency_keys WHERE user_id = ${userId}::uuid AND key = ${key}`;
  }

  /** @internal: a claim's end. */
  forget(claim: IdempotencyClaim) {
    if (this.#held.get(heldKey(claim.userId, claim.key)) === claim) this.#held.delete(heldKey(claim.userId, claim.key));
  }

  /** @internal: for the claim's lease timer. */
  get logger() {
    return this.log;
  }
}

const heldKey = (userId: string, key: string) => `${userId} ${key}`;

/**
 * A key this process is answering. Its row is identified by the user, the key and the time it
 * was claimed (`token`, the row's `created_at` to the microsecond): a row taken over by another
 * request after this one's lease ran out has another token, and is not touched.
 */
export class IdempotencyClaim {
  readonly userId: string;
  readonly key: string;
  readonly method: string;
  readonly path: string;
  readonly requestHash: string;
  #renewal: NodeJS.Timeout | undefined;
  #settled = false;

  constructor(
    private readonly store: IdempotencyStore,
    request: IdempotentRequest,
    private readonly token: string,
  ) {
    ({ userId: this.userId, key: this.key, method: this.method, path: this.path, requestHash: this.requestHash } = request);
    this.#renewal = setInterval(() => void this.#renew(), Math.max(50, store.options.leaseMs / 3));
    this.#renewal.unref();
  }

  async #renew() {
    try {
      await this.store.prisma.$executeRaw`
        UPDATE idempotency_keys SET expires_at = clock_timestamp() + ${this.store.options.leaseMs} * interval '1 millisecond'
         WHERE user_id = ${this.userId}::uuid AND key = ${this.key} AND created_at = ${this.token}::timestamptz AND response_status IS NULL`;
    } catch (error) {
      if (!this.#settled) this.store.logger.error(`idempotency: renewing the lease of a key in progress failed`, error);
    }
  }

  stopRenewing() {
    clearInterval(this.#renewal);
  }

  /**
   * Stores the outcome; retries get it until the key expires, `lifetimeMs` after the first
   * request. False when the row was no longer this request's (its lease ran out and a retry took
   * it over, or the sweep deleted it): the outcome is then not kept.
   */
  async complete(response: StoredResponse): Promise<boolean> {
    this.#settle();
    try {
      const count = await this.store.prisma.$executeRaw`
        UPDATE idempotency_keys
           SET response_status = ${response.status}, response_headers = ${JSON.stringify(response.headers)}::jsonb,
               response_body = ${Buffer.from(response.body.buffer, response.body.byteOffset, response.body.byteLength)},
               expires_at = created_at + ${this.store.options.lifetimeMs} * interval '1 millisecond'
         WHERE user_id = ${this.userId}::uuid AND key = ${this.key} AND created_at = ${this.token}::timestamptz AND response_status IS NULL`;
      if (count === 0) this.store.logger.error(`idempotency: a key's lease ran out before its request ended; its response is not kept`);
      return count > 0;
    } finally {
      this.store.forget(this);
    }
  }

  /** Forgets the key, as if it had never been sent: a retry with it runs as a new request. */
  async release(): Promise<void> {
    this.#settle();
    try {
      await this.store.prisma.$executeRaw`
        DELETE FROM idempotency_keys
         WHERE user_id = ${this.userId}::uuid AND key = ${this.key} AND created_at = ${this.token}::timestamptz AND response_status IS NULL`;
    } finally {
      this.store.forget(this);
    }
  }

  #settle() {
    if (this.#settled) throw new Error('an idempotency claim is completed or released once');
    this.#settled = true;
    this.stopRenewing();
  }
}
