import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { PrismaPGlite } from 'pglite-prisma-adapter';
import lockfile from 'proper-lockfile';
import type { Config } from '../config.js';
import { PrismaClient } from '../generated/prisma/client.js';
import { applyMigrations, type SqlRunner } from './migrations.js';

export type StoreKind = 'pglite' | 'postgres';

export interface Database {
  readonly kind: StoreKind;
  readonly prisma: PrismaClient;
  /** Answers when the store can run a query; used by /readyz. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export class StoreLockedError extends Error {
  constructor(readonly directory: string) {
    super(`the embedded store at ${directory} is open in another process`);
  }
}

/** Opens the configured store and brings its schema up to date. */
export async function openDatabase(config: Pick<Config, 'databaseUrl' | 'dataDir'>): Promise<Database> {
  return config.databaseUrl ? openPostgres(config.databaseUrl) : openEmbedded(config.dataDir);
}

export function embeddedStoreDirectory(dataDir: string) {
  return path.join(dataDir, 'pglite');
}

async function openEmbedded(dataDir: string): Promise<Database> {
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
  try {
    const pglite = await PGlite.create(directory);
    const runner: SqlRunner = {
      exec: async (sql) => void (await pglite.exec(sql)),
      query: async (sql, params) => (await pglite.query(sql, params)).rows as never[],
      transaction: (work) =>
        pglite.transaction(async (tx) => {
          await work({
            exec: async (sql) => void (await tx.exec(sql)),
            query: async (sql, params) => (await tx.query(sql, params)).rows as never[],
            transaction: () => Promise.reject(new Error('nested transaction')),
          });
        }),
    };
    await applyMigrations(runner);
    const prisma = new PrismaClient({ adapter: new PrismaPGlite(pglite) });
    return {
      kind: 'pglite',
      prisma,
      ping: async () => void (await pglite.query('SELECT 1')),
      close: async () => {
        await prisma.$disconnect();
        await pglite.close();
        await release();
      },
    };
  } catch (error) {
    await release();
    throw error;
  }
}

async function openPostgres(url: string): Promise<Database> {
  const pool = new pg.Pool({ connectionString: url, max: 10 });
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
      await applyMigrations(runner);
    } finally {
      client.release();
    }
  } catch (error) {
    await pool.end();
    throw error;
  }
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool) });
  return {
    kind: 'postgres',
    prisma,
    ping: async () => void (await pool.query('SELECT 1')),
    close: async () => {
      await prisma.$disconnect();
      await pool.end();
    },
  };
}
