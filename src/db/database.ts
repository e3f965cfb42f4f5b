import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import pgListen from 'pg-listen';
import lockfile from 'proper-lockfile';
import type { Config } from '../config.js';
import { PrismaClient, type Prisma } from '../generated/prisma/client.js';
import type { Logger } from '../logger.js';
import { BackgroundWork } from '../observability/background-work.js';
import { warmPageCache, type WarmResult } from './embedded-cache-warm.js';
import { maintainOnce, startEmbeddedMaintenance } from './embedded-maintenance.js';
import { EmbeddedStoreThread } from './embedded-store-thread.js';
import { storeUnavailable } from './store-errors.js';
import { applyMigrations, MigrationsPendingError, pendingMigrations, type SqlRunner } from './migrations.js';

export type StoreKind = 'pglite' | 'postgres';

/**
 * Runs one read-only statement built with `Prisma.sql` straight through the store's pool: the
 * same statement as `prisma.$queryRaw` with it, without Prisma's layers (0.1-0.3 ms a statement
 * here), and as a prepared statement, planned once per connection rather than at every call
 * (the read-back of a search's chunks took 0.2-0.5 ms less). For the few reads every search
 * makes (docs/architecture.md); everything else goes through Prisma. The text of a statement
 * must not vary with its values (lists go as one array parameter), since each distinct text
 * stays prepared. Rows come as `pg` gives them: uuid and text as strings, jsonb parsed.
 */
export type DirectQuery = <Row>(statement: Prisma.Sql) => Promise<Row[]>;

export interface Database {
  readonly kind: StoreKind;
  readonly prisma: PrismaClient;
  readonly query: DirectQuery;
  /**
   * The pool of a store that several processes share (PostgreSQL), for counters that must hold
   * across them (rate limits). Undefined on the embedded store, which one process holds.
   */
  readonly sharedPool?: pg.Pool;
  /**
   * Signals between the processes of one store (PostgreSQL's LISTEN and NOTIFY), such as "a job
   * was queued". Undefined on the embedded store, which one process holds.
   */
  readonly signals?: StoreSignals;
  /** The migrations this opening applied, oldest first (none when the database was up to date, or not migrated: KB_MIGRATE=off). */
  readonly appliedMigrations: string[];
  /** Answers when the store can run a query; used by /readyz. */
  ping(): Promise<void>;
  /**
   * Analyses and vacuums the tables that are due, and grows the embedded store's page cache if
   * its tables outgrew it, now. The embedded store also does it every few seconds by itself;
   * PostgreSQL's autovacuum does it there, so this does nothing.
   */
  maintain(): Promise<{ analyzed: string[]; vacuumed: string[] }>;
  /** What the service does on this store of its own accord, timed by kind (graph merges, ANALYZE, ...). */
  readonly backgroundWork: BackgroundWork;
  /**
   * The embedded store's page cache in MB now. It grows by itself as the store's tables grow
   * (see `maintain`), unless KB_STORE_CACHE_MB fixes it. Undefined on PostgreSQL.
   */
  readonly pageCacheMb?: () => number;
  /**
   * Resolves once the embedded store has read what searches use into its page cache after its
   * latest start (embedded-cache-warm.ts), with how much it read. Undefined on PostgreSQL.
   */
  readonly pageCacheWarmed?: () => Promise<WarmResult | undefined>;
  close(): Promise<void>;
}

export type StoreSignals = {
  /**
   * Tells every other process listening on `channel` (this one tells itself in its own way),
   * with a short message. Never throws: a lost signal only costs a poll interval.
   */
  send(channel: string, message: string): void;
  /**
   * Calls `onSignal` with the message of every signal another process sends on `channel`, and
   * with none once a lost connection is back (signals may have been missed). Resolves once
   * listening.
   */
  listen(channel: string, onSignal: (message: string | undefined) => void): Promise<void>;
};

/** DATABASE_URL names a database this process cannot open. */
export class StoreOpenError extends Error {
  override name = 'StoreOpenError';
}

export class StoreLockedError extends Error {
  constructor(readonly directory: string) {
    super(`the embedded store at ${directory} is open in another process`);
  }
}

/** How often the embedded store checks whether a table needs ANALYZE or VACUUM (see embedded-maintenance.ts). */
const maintenanceCheckMs = 15_000;

/** Opens the configured store and brings its schema up to date. */
export async function openDatabase(
  config: Pick<Config, 'databaseUrl' | 'dataDir' | 'storeCacheMb' | 'storeCacheWarmPercent'> & { migrate?: boolean },
  logger?: Logger,
): Promise<Database> {
  return config.databaseUrl ? openPostgres(config.databaseUrl, logger, config.migrate ?? true) : openEmbedded(config, logger);
}

export function embeddedStoreDirectory(dataDir: string) {
  return path.join(dataDir, 'pglite');
}

/** Bounds of the embedded store's page cache when it is sized from the store; see embeddedCacheMb. */
const embeddedCacheBoundsMb = { min: 128, max: 1024 };

/**
 * The page cache for an embedded store whose tables and indexes take `tableBytes` on disk: as
 * large as they are, within bounds. PGlite takes the whole cache from the system at start (the
 * process grows by it at once), so a small store keeps PostgreSQL's default of 128 MB. At 100,000
 * chunks a vector search read half its HNSW pages through the WebAssembly file system with 128
 * MB, and took twice as long as with all of them cached (docs/retrieval.md).
 */
export function embeddedCacheMb(tableBytes: number): number {
  const megabytes = Math.ceil(tableBytes / (64 * 1024 * 1024)) * 64;
  return Math.min(embeddedCacheBoundsMb.max, Math.max(embeddedCacheBoundsMb.min, megabytes));
}

/** Bytes of the files under `directory`, subdirectories included; 0 when it does not exist. */
export async function bytesUnder(directory: string): Promise<number> {
  const entries = await readdir(directory, { recursive: true, withFileTypes: true }).catch(() => []);
  let bytes = 0;
  for (const entry of entries) {
    if (entry.isFile()) bytes += await stat(path.join(entry.parentPath, entry.name)).then((info) => info.size, () => 0);
  }
  return bytes;
}

/**
 * The larger page cache an embedded store of `tableBytes` should move to, or undefined to keep
 * `currentMb`. The cache is taken whole at start, so it is sized from the store when it opens; a
 * store that grows from empty (a first bulk import) would keep the smallest cache until the next
 * start. It moves once its tables call for half as much again as the cache, or for the largest
 * one: each move stops the store for a moment (docs/retrieval.md, "The page cache grows with the store").
 */
export function embeddedCacheGrowth(currentMb: number, tableBytes: number): number | undefined {
  const wanted = embeddedCacheMb(tableBytes);
  if (wanted <= currentMb) return undefined;
  return wanted >= 1.5 * currentMb || wanted === embeddedCacheBoundsMb.max ? wanted : undefined;
}

async function openEmbedded(
  { dataDir, storeCacheMb: configuredCacheMb, storeCacheWarmPercent }: Pick<Config, 'dataDir' | 'storeCacheMb' | 'storeCacheWarmPercent'>,
  logger?: Logger,
): Promise<Database> {
  const directory = embeddedStoreDirectory(dataDir);
  await mkdir(directory, { recursive: true });
  // PGlite corrupts its files if two processes open them; the lock makes the second one fail
  // cleanly. A lock left by a killed process goes stale after a few seconds and is taken over.
  const release = await lockfile
    .lock(directory, { stale: 5_000, update: 1_000, retries: { retries: 8, minTimeout: 250, maxTimeout: 1_000 } })
    .catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ELOCKED') throw new StoreLockedError(directory);
      throw error;
    });
  // Tables and indexes live under base/; the write-ahead log beside it is not cached this way.
  const tableBytes = () => bytesUnder(path.join(directory, 'base'));
  let cacheMb = configuredCacheMb ?? embeddedCacheMb(await tableBytes());
  let store = new EmbeddedStoreThread({ directory, cacheMb });
  logger?.info(`embedded store: page cache ${cacheMb} MB${configuredCacheMb === undefined ? ' (sized from its tables; KB_STORE_CACHE_MB sets it)' : ''}`);
  try {
    await store.waitReady;
    // PGlite serves one connection; the pool keeps it open and queues callers for it. A new
    // connection goes to the store thread of the moment (see resizeCache).
    const pool = new pg.Pool({ stream: () => store.socket(), user: 'postgres', database: 'postgres', max: 1, idleTimeoutMillis: 0 });
    // Transactions queue for that one connection, behind a document's chunk writes among others:
    // they may wait longer to start than Prisma's default of 2 s.
    const database = await openWithPool('pglite', pool, { maxWait: 30_000 }, async () => {
      await store.close();
      await release();
    });

    // Reading what searches use into the cache, after each start: one warm-up at a time, the
    // one before stopped first.
    let warming: { stop: AbortController; done: Promise<WarmResult | undefined> } = { stop: new AbortController(), done: Promise.resolve(undefined) };
    const warmCache = () => {
      warming.stop.abort();
      const stop = new AbortController();
      const done = warming.done.then(() =>
        warmPageCache(pool, database.backgroundWork, (cacheMb * storeCacheWarmPercent) / 100, stop.signal).then(
          (result) => {
            logger?.info(`embedded store: ${Math.round(result.blocks / 128)} MB of ${result.relations} tables and indexes read into the page cache`);
            return result;
          },
          (error: unknown) => {
            logger?.error('embedded store: reading tables into the page cache failed', error);
            return undefined;
          },
        ),
      );
      warming = { stop, done };
    };
    warmCache();

    /**
     * Restarts the store with a cache of `toMb`: PostgreSQL sizes its cache only at start. The
     * one connection is taken first, so every statement and transaction already begun ends
     * before, and those asked meanwhile wait in the pool's queue and run on the new thread.
     * Nothing is lost: the old thread writes its cache out as it closes, before the new one
     * opens the same files. If the new size cannot be had, the store reopens with the old one.
     */
    const resizeCache = async (toMb: number) => {
      // Written out first, as a step of its own with searches served before and after it: the
      // restart then has little left to write, and holds the store for less time.
      await database.backgroundWork.turn();
      await database.backgroundWork.time('cache_resize', () => pool.query('CHECKPOINT'));
      await database.backgroundWork.turn();
      await database.backgroundWork.time('cache_resize', async () => {
        const connection = await pool.connect();
        try {
          await store.close();
          const started = new EmbeddedStoreThread({ directory, cacheMb: toMb });
          const failure = await started.waitReady.then(
            () => undefined,
            (error: unknown) => error,
          );
          if (failure === undefined) {
            logger?.info(`embedded store: page cache ${cacheMb} MB -> ${toMb} MB, sized from its tables as they grew`);
            store = started;
            cacheMb = toMb;
            warmCache();
            return;
          }
          logger?.error(`embedded store: a page cache of ${toMb} MB could not be had; it stays at ${cacheMb} MB`, failure);
          store = new EmbeddedStoreThread({ directory, cacheMb });
          await store.waitReady;
        } finally {
          // Its socket went with the old thread: dropped, so the pool makes a new connection.
          connection.release(true);
        }
      });
    };
    // One check at a time (the timer's and maintain()'s), each against the cache the one before left.
    let growth: Promise<void> = Promise.resolve();
    const growCacheIfOutgrown = () => {
      growth = growth
        .catch(() => {})
        .then(async () => {
          if (configuredCacheMb !== undefined) return;
          const toMb = embeddedCacheGrowth(cacheMb, await tableBytes());
          if (toMb !== undefined) await resizeCache(toMb);
        });
      return growth;
    };

    const maintenance = startEmbeddedMaintenance(
      pool,
      database.backgroundWork,
      maintenanceCheckMs,
      (error) => logger?.error('embedded store maintenance (ANALYZE, VACUUM, page cache) failed', error),
      growCacheIfOutgrown,
    );
    return {
      ...database,
      maintain: async () => {
        const done = await maintainOnce(pool, database.backgroundWork);
        await growCacheIfOutgrown();
        return done;
      },
      pageCacheMb: () => cacheMb,
      pageCacheWarmed: () => warming.done,
      close: async () => {
        warming.stop.abort();
        await maintenance.stop();
        await warming.done;
        await database.close();
      },
    };
  } catch (error) {
    await store.close();
    await release();
    throw error;
  }
}

async function openPostgres(url: string, logger: Logger | undefined, migrate: boolean): Promise<Database> {
  // A server that does not answer (a host gone, a network partition) fails a connection attempt
  // after 5 s, and the request answers 503, rather than after the system's TCP timeout of minutes.
  const pool = new pg.Pool({ connectionString: url, max: 10, connectionTimeoutMillis: 5_000 });
  // An idle connection the server ends (a restart, an administrator) is an 'error' event on the
  // pool, which would end the process if nothing listened. The pool drops that connection and
  // opens another when asked; requests meanwhile get 503 (store-errors.ts).
  pool.on('error', (error) => logger?.info(`PostgreSQL closed an idle connection: ${error.message}`));
  // One connection of its own listens; it reconnects after an outage however long, and listens again.
  // pg-listen is CommonJS with its function as `exports.default`.
  const subscriber = pgListen.default(
    { connectionString: url },
    { retryTimeout: 0, retryInterval: (attempt) => Math.min(10_000, 250 * 2 ** attempt), paranoidChecking: 30_000 },
  );
  const afterReconnect = new Set<() => void>();
  // A process tells itself directly: its own signals, which PostgreSQL delivers to it too, are dropped.
  const sender = randomUUID();
  let closed = false;
  subscriber.events.on('error', (error) => logger?.info(`PostgreSQL signals: ${error.message}`));
  subscriber.events.on('reconnect', (attempt) => {
    if (attempt === 1) logger?.info('PostgreSQL signals: the listening connection was lost; reconnecting');
  });
  subscriber.events.on('connected', () => {
    // A reconnection that was under way when the store closed ends the connection it made.
    if (closed) subscriber.close().catch(() => {});
    else for (const onSignal of afterReconnect) onSignal();
  });
  let listening: Promise<void> | undefined;
  const signals: StoreSignals = {
    send(channel, message) {
      pool.query('SELECT pg_notify($1, $2)', [channel, JSON.stringify({ sender, message })]).catch(() => {});
    },
    async listen(channel, onSignal) {
      subscriber.notifications.on(channel, (payload: { sender?: string; message?: string } | undefined) => {
        if (payload?.sender !== sender) onSignal(payload?.message);
      });
      // A first connection that fails is not tried again: the queue finds work by polling then.
      listening ??= subscriber.connect();
      await listening;
      await subscriber.listenTo(channel);
      // After the first connection: its own 'connected' missed nothing.
      afterReconnect.add(() => onSignal(undefined));
    },
  };
  const database = await openWithPool('postgres', pool, { migrate }, async () => {
    closed = true;
    if (listening) await subscriber.close().catch(() => {});
  }).catch((error: unknown) => {
    // No such database, refused credentials, no server: the operator's to fix, said in a line.
    const code = (error as { code?: unknown }).code;
    if (storeUnavailable(error) || code === '3D000' || code === 'ENOTFOUND' || (typeof code === 'string' && code.startsWith('28'))) {
      throw new StoreOpenError(`cannot open the PostgreSQL database of DATABASE_URL: ${(error as Error).message}`);
    }
    throw error;
  });
  return { ...database, signals };
}

async function openWithPool(
  kind: StoreKind,
  pool: pg.Pool,
  { migrate = true, ...transactionOptions }: { maxWait?: number; migrate?: boolean },
  afterClose: () => Promise<void>,
): Promise<Database> {
  let appliedMigrations: string[] = [];
  try {
    const client = await pool.connect();
    try {
      const runner: SqlRunner = {
        exec: async (sql) => void (await client.query(sql)),
        query: async (sql, params) => (await client.query(sql, params)).rows,
        transaction: async (work) => {
          await client.query('BEGIN');
          try {
            await work(runner);
            await client.query('COMMIT');
          } catch (error) {
            await client.query('ROLLBACK');
            throw error;
          }
        },
      };
      if (migrate) appliedMigrations = await applyMigrations(runner);
      else {
        const pending = await pendingMigrations(runner);
        if (pending.length > 0) throw new MigrationsPendingError(`the database lacks ${pending.length} migrations of this version (${pending.join(', ')})`);
      }
    } finally {
      client.release();
    }
  } catch (error) {
    await pool.end();
    throw error;
  }
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool), transactionOptions });
  return {
    kind,
    appliedMigrations,
    prisma,
    ...(kind === 'postgres' && { sharedPool: pool }),
    query: async <Row>(statement: Prisma.Sql) => {
      const text = statement.text;
      // Prepared once per connection under a name taken from its text, then planned no more.
      const name = `direct_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
      const client = await pool.connect();
      try {
        try {
          return (await client.query({ name, text, values: statement.values })).rows as Row[];
        } catch (error) {
          // 42P05: the server holds this name while the client has lost its record of it (seen on
          // the embedded store when the fuzzer piled up concurrent requests after failed ones).
          // The name is the text's hash, so dropping it and preparing again is exact.
          if ((error as { code?: string }).code !== '42P05') throw error;
          await client.query(`DEALLOCATE ${name}`);
          return (await client.query({ name, text, values: statement.values })).rows as Row[];
        }
      } finally {
        client.release();
      }
    },
    ping: async () => void (await pool.query('SELECT 1')),
    maintain: async () => ({ analyzed: [], vacuumed: [] }),
    backgroundWork: new BackgroundWork(),
    close: async () => {
      await prisma.$disconnect();
      await pool.end();
      await afterClose();
    },
  };
}
