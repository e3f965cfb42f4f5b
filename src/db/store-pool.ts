import { createHash } from 'node:crypto';
import { PrismaPg } from '@prisma/adapter-pg';
import type pg from 'pg';
import { PrismaClient, type Prisma } from '../generated/prisma/client.js';
import { BackgroundWork } from '../observability/background-work.js';
import type { Database, StoreKind } from './database.js';
import { applyMigrations, MigrationsPendingError, pendingMigrations, type SqlRunner } from './migrations.js';

export async function openWithPool(
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
