import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.js';
import { openDatabase, type Database } from '../../db/database.js';
import { MigrationsPendingError } from '../../db/migrations.js';
import { openPgvectorIndex } from './pgvector-index.js';
import { indexMigrations, legacyFingerprint } from './pgvector-schema.js';

// The pgvector index's tables as versioned migrations, on an embedded store of this file's own
// (the statements are the same on PostgreSQL, where test/across-processes.test.ts runs kb migrate).
let dataDir: string;
let db: Database;
const model = { model: 'bge-small-en-v1.5-q', dimensions: 384 };
const latest = indexMigrations.map((migration) => `${migration.version}_${migration.name}`);

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'kb-index-schema-'));
  db = await openDatabase(loadConfig({ KB_DATA_DIR: dataDir, DATABASE_URL: '', ELASTICSEARCH_URL: '' }));
}, 60_000);

afterAll(async () => {
  await db?.close();
  await rm(dataDir, { recursive: true, force: true });
});

const open = async (migrate = true) => {
  const index = await openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 1 << 20, loadAhead: false, migrate });
  await index.close();
  return index;
};
const recorded = async () => (await db.prisma.$queryRawUnsafe<{ version: number }[]>('SELECT version FROM chunk_index_migrations ORDER BY version')).map((row) => Number(row.version));
const tableExists = async (table: string) =>
  (await db.prisma.$queryRawUnsafe<{ present: boolean }[]>(`SELECT to_regclass('${table}') IS NOT NULL AS present`))[0]!.present;

describe("the pgvector index's tables", () => {
  it('are made by the migrations, each applied once and recorded', async () => {
    expect((await open()).appliedMigrations).toEqual(latest);
    expect(await recorded()).toEqual(indexMigrations.map((migration) => migration.version));
    expect((await open()).appliedMigrations).toEqual([]);
    expect((await open(false)).appliedMigrations).toEqual([]);
  });

  it('are taken over from a store that recorded a fingerprint: the matching version is recorded without running again', async () => {
    const fingerprinted = async (fingerprint: string) => {
      await db.prisma.$executeRawUnsafe('DROP TABLE IF EXISTS chunk_index_migrations');
      await db.prisma.$executeRawUnsafe('CREATE TABLE chunk_index_schema (only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row), fingerprint text NOT NULL)');
      await db.prisma.$executeRaw`INSERT INTO chunk_index_schema (fingerprint) VALUES (${fingerprint})`;
    };
    await fingerprinted(legacyFingerprint(model.dimensions));
    expect((await open()).appliedMigrations).toEqual(latest.slice(1));
    expect(await recorded()).toEqual(indexMigrations.map((migration) => migration.version));
    expect(await tableExists('chunk_index_schema')).toBe(false);

    // Another version's DDL: version 1 runs again (its statements bring any earlier layout to it).
    await fingerprinted('the digest of an older version');
    expect((await open()).appliedMigrations).toEqual(latest);
    expect(await tableExists('chunk_index_schema')).toBe(false);
  });

  it('are only checked by a process told not to migrate, which refuses a store that lacks one', async () => {
    await db.prisma.$executeRaw`DELETE FROM chunk_index_migrations WHERE version = ${indexMigrations.at(-1)!.version}`;
    const refused = open(false);
    await expect(refused).rejects.toBeInstanceOf(MigrationsPendingError);
    await expect(refused).rejects.toThrow(`the pgvector index lacks 1 migrations of this version (${latest.at(-1)})`);
    expect((await open()).appliedMigrations).toEqual([latest.at(-1)]);
  });

  it('are made anew by a reset (kb reindex), for the new model', async () => {
    const index = await openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 1 << 20, loadAhead: false });
    await index.reset({ model: 'another-model', dimensions: 8 });
    await index.close();
    expect(await recorded()).toEqual(indexMigrations.map((migration) => migration.version));
    const [column] = await db.prisma.$queryRawUnsafe<{ type: string }[]>(
      "SELECT format_type(atttypid, atttypmod) AS type FROM pg_attribute WHERE attrelid = 'chunk_index'::regclass AND attname = 'embedding'",
    );
    expect(column!.type).toBe('vector(8)');
  });
});
