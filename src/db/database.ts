import type pg from 'pg';
import type { Config } from '../config.js';
import type { PrismaClient, Prisma } from '../generated/prisma/client.js';
import type { Logger } from '../logger.js';
import type { BackgroundWork } from '../observability/background-work.js';
import type { WarmResult } from './embedded-cache-warm.js';
import { openEmbedded } from './embedded-store.js';
import { openPostgres } from './postgres-store.js';

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
  /**
   * Holds `instance` (KB_INSTANCE) as this process's name on a store several processes share
   * (PostgreSQL), for as long as the store is open; rejects with StoreOpenError when a live
   * process holds it already. Undefined on the embedded store, which one process holds.
   */
  readonly claimInstance?: (instance: string) => Promise<void>;
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
   * Tells the embedded store how many bytes its tables are about to gain, asked at each check of
   * its page cache: the cache then grows ahead of them. The pgvector index says what its chunks
   * waiting outside the graph will add once merged, so a bulk load's growth is met while the load
   * runs, not by a restart of the store (and a cold cache) in the middle of the merge after it,
   * when searches come. The latest caller's estimate counts. Undefined on PostgreSQL.
   */
  readonly expectTableGrowth?: (bytes: () => Promise<number>) => void;
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

/** Opens the configured store and brings its schema up to date. */
export async function openDatabase(
  config: Pick<Config, 'databaseUrl' | 'dataDir' | 'storeCacheMb' | 'storeCacheWarmPercent' | 'threadPlacement'> & { migrate?: boolean },
  logger?: Logger,
): Promise<Database> {
  return config.databaseUrl ? openPostgres(config.databaseUrl, logger, config.migrate ?? true) : openEmbedded(config, logger);
}
