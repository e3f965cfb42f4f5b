import { mkdir, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import lockfile from 'proper-lockfile';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { Database } from './database.js';
import { warmPageCache, type WarmResult } from './embedded-cache-warm.js';
import { maintainOnce, startEmbeddedMaintenance } from './embedded-maintenance.js';
import { EmbeddedStoreThread } from './embedded-store-thread.js';
import { StoreLockedError } from './store-errors.js';
import { openWithPool } from './store-pool.js';

/** How often the embedded store checks whether a table needs ANALYZE or VACUUM (see embedded-maintenance.ts). */
const maintenanceCheckMs = 15_000;

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

export async function openEmbedded(
  { dataDir, storeCacheMb: configuredCacheMb, storeCacheWarmPercent, threadPlacement: placement }: Pick<Config, 'dataDir' | 'storeCacheMb' | 'storeCacheWarmPercent' | 'threadPlacement'>,
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
  const cpus = placement?.mainCpus;
  let store = new EmbeddedStoreThread({ directory, cacheMb, cpus });
  logger?.info(`embedded store: page cache ${cacheMb} MB${configuredCacheMb === undefined ? ' (sized from its tables; KB_STORE_CACHE_MB sets it)' : ''}`);
  try {
    await store.waitReady;
    if (store.placementProblem) logger?.info(`embedded store: its thread is left to the scheduler, ${store.placementProblem}`);
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
          const started = new EmbeddedStoreThread({ directory, cacheMb: toMb, cpus });
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
          store = new EmbeddedStoreThread({ directory, cacheMb, cpus });
          await store.waitReady;
        } finally {
          // Its socket went with the old thread: dropped, so the pool makes a new connection.
          connection.release(true);
        }
      });
    };
    // One check at a time (the timer's and maintain()'s), each against the cache the one before left.
    let growth: Promise<void> = Promise.resolve();
    let expectedGrowth: () => Promise<number> = async () => 0;
    const growCacheIfOutgrown = () => {
      growth = growth
        .catch(() => {})
        .then(async () => {
          if (configuredCacheMb !== undefined) return;
          const expected = await expectedGrowth().catch((error: unknown) => {
            logger?.error('embedded store: the growth its tables expect could not be read', error);
            return 0;
          });
          const toMb = embeddedCacheGrowth(cacheMb, (await tableBytes()) + expected);
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
      expectTableGrowth: (bytes) => {
        expectedGrowth = bytes;
      },
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
