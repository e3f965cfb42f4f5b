import { createHash, randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { migrationSteps } from './migration-steps.js';

const migrationsDirectory = fileURLToPath(new URL('../../prisma/migrations/', import.meta.url));

/** The two statements a migration run needs from either store. */
export interface SqlRunner {
  exec(sql: string): Promise<void>;
  query<Row>(sql: string, params?: unknown[]): Promise<Row[]>;
  transaction(work: (runner: SqlRunner) => Promise<void>): Promise<void>;
}

// Same bookkeeping table and columns as `prisma migrate deploy`, so Prisma's own tools agree
// about which migrations a database has.
const createBookkeepingTable = `
CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
  "id" VARCHAR(36) PRIMARY KEY NOT NULL,
  "checksum" VARCHAR(64) NOT NULL,
  "finished_at" TIMESTAMPTZ,
  "migration_name" VARCHAR(255) NOT NULL,
  "logs" TEXT,
  "rolled_back_at" TIMESTAMPTZ,
  "started_at" TIMESTAMPTZ NOT NULL DEFAULT now(),
  "applied_steps_count" INTEGER NOT NULL DEFAULT 0
)`;

/** A process told not to migrate (KB_MIGRATE=off) found the database behind its version. */
export class MigrationsPendingError extends Error {
  override name = 'MigrationsPendingError';
  constructor(what: string) {
    super(`${what}; run kb migrate with this version first (this process has KB_MIGRATE=off)`);
  }
}

/** The migrations of this version that `runner`'s database lacks (all of them on a new one). */
export async function pendingMigrations(runner: SqlRunner): Promise<string[]> {
  const migrations = await readMigrations();
  const [exists] = await runner.query<{ present: boolean }>(`SELECT to_regclass('"_prisma_migrations"') IS NOT NULL AS present`);
  if (!exists?.present) return migrations.map((migration) => migration.name);
  const rows = await runner.query<{ migration_name: string }>(
    'SELECT migration_name FROM "_prisma_migrations" WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL',
  );
  const done = new Set(rows.map((row) => row.migration_name));
  return migrations.filter((migration) => !done.has(migration.name)).map((migration) => migration.name);
}

// Arbitrary constant: serialises concurrent starts against one PostgreSQL database.
const migrationLockKey = 72707369;

export async function applyMigrations(runner: SqlRunner): Promise<string[]> {
  const migrations = await readMigrations();
  const applied: string[] = [];
  await runner.query('SELECT pg_advisory_lock($1)', [migrationLockKey]);
  try {
    await runner.exec(createBookkeepingTable);
    const rows = await runner.query<{ migration_name: string; checksum: string }>(
      'SELECT migration_name, checksum FROM "_prisma_migrations" WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL',
    );
    const done = new Map(rows.map((row) => [row.migration_name, row.checksum]));
    for (const migration of migrations) {
      const recorded = done.get(migration.name);
      if (recorded !== undefined) {
        if (recorded !== migration.checksum) {
          throw new Error(`migration ${migration.name} was changed after it was applied to this database`);
        }
        continue;
      }
      await runner.transaction(async (tx) => {
        await tx.exec(migration.sql);
        await migrationSteps[migration.name]?.(tx);
        await tx.query(
          `INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at, finished_at, applied_steps_count)
           VALUES ($1, $2, $3, now(), now(), 1)`,
          [randomUUID(), migration.checksum, migration.name],
        );
      });
      applied.push(migration.name);
    }
  } finally {
    await runner.query('SELECT pg_advisory_unlock($1)', [migrationLockKey]);
  }
  return applied;
}

async function readMigrations() {
  const entries = await readdir(migrationsDirectory, { withFileTypes: true });
  const names = entries.filter((entry) => entry.isDirectory()).map((entry) => entry.name).sort();
  return Promise.all(
    names.map(async (name) => {
      const sql = await readFile(path.join(migrationsDirectory, name, 'migration.sql'), 'utf8');
      return { name, sql, checksum: createHash('sha256').update(sql).digest('hex') };
    }),
  );
}
