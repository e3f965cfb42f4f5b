// Migrations that change rows already stored, run on a store holding such rows: the store is
// brought to the state before them, their records are removed, and the store is opened again.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { openDatabase, type Database } from '../src/db/database.js';
import { AppError } from '../src/errors.js';
import { createWorkspace } from '../src/modules/workspaces/service.js';
import { createOwnDatabase } from './support/server.js';

let dataDir: string;
let ownDatabase: Awaited<ReturnType<typeof createOwnDatabase>> | undefined;
let db: Database;

const open = () => openDatabase(loadConfig({ ...process.env, KB_DATA_DIR: dataDir, DATABASE_URL: ownDatabase?.url ?? '' }));

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'kb-migrations-'));
  if (process.env.DATABASE_URL) ownDatabase = await createOwnDatabase(process.env.DATABASE_URL);
  db = await open();
}, 60_000);

afterAll(async () => {
  await db?.close();
  await ownDatabase?.drop();
  await rm(dataDir, { recursive: true, force: true });
});

/** Removes the records of `names` and opens the store again, which runs them again. */
async function runAgain(...names: string[]) {
  await db.prisma.$executeRaw`DELETE FROM "_prisma_migrations" WHERE migration_name = ANY(${names}::text[])`;
  await db.close();
  db = await open();
}

describe('migrations of stored rows', () => {
  it('writes every workspace name key anew; of look-alikes that were both allowed, both stay and the older keeps the name', async () => {
    const user = await db.prisma.user.create({ data: { email: `names-${Math.random()}@example.com`, name: 'Names' } });
    // Keys as they were: the name in lower case.
    const written = async (name: string) => db.prisma.workspace.create({ data: { userId: user.id, name, nameKey: name.toLowerCase() } });
    const older = await written('Straße');
    const later = await written('STRASSE');
    const invisible = await written('Pa\u200bpers');
    const visible = await written('Papers');
    const wide = await written('Ｒｅｐｏｒｔｓ');
    const document = await db.prisma.document.create({
      data: { workspaceId: later.id, filename: 'kept.txt', contentType: 'text/plain', sizeBytes: 4, sha256: 'x' },
    });

    await runAgain('20261127020100_workspace_name_keys');
    const rows = await db.prisma.workspace.findMany({ where: { userId: user.id }, select: { id: true, name: true, nameKey: true, updatedAt: true } });
    const keyOf = (id: string) => rows.find((row) => row.id === id)?.nameKey;
    expect(rows).toHaveLength(5);
    expect(keyOf(older.id)).toBe('strasse');
    expect(keyOf(later.id)).toBe(`strasse\u0001${later.id}`);
    expect(keyOf(invisible.id)).toBe('papers');
    expect(keyOf(visible.id)).toBe(`papers\u0001${visible.id}`);
    expect(keyOf(wide.id)).toBe('reports');
    // Names, contents and times are as they were.
    expect(rows.map((row) => row.name).sort()).toEqual(['Papers', 'Pa\u200bpers', 'STRASSE', 'Straße', 'Ｒｅｐｏｒｔｓ'].sort());
    expect(rows.find((row) => row.id === later.id)!.updatedAt).toEqual(later.updatedAt);
    expect(await db.prisma.document.findUnique({ where: { id: document.id } })).not.toBeNull();

    // The older holds the name: a new workspace that looks like it is refused.
    const refusal = await createWorkspace({ prisma: db.prisma }, { userId: user.id, workspaceIds: null }, 'strasse').catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(AppError);
    expect((refusal as AppError).code).toBe('conflict');
  });

  it('stores uploaded files uncompressed, so that a slice of one is read without the rest; files stored compressed are rewritten', async () => {
    // As before: the column's default storage, which compresses a value that compresses.
    await db.prisma.$executeRawUnsafe('ALTER TABLE document_sources ALTER COLUMN bytes SET STORAGE EXTENDED');
    const user = await db.prisma.user.create({ data: { email: `sources-${Math.random()}@example.com`, name: 'Sources' } });
    const workspace = await db.prisma.workspace.create({ data: { userId: user.id, name: 'sources', nameKey: 'sources' } });
    const text = Buffer.from(`${'the same words again and again. '.repeat(64 * 1024)}${randomBytes(16).toString('hex')}`);
    const document = await db.prisma.document.create({
      data: { workspaceId: workspace.id, filename: 'a.txt', contentType: 'text/plain', sizeBytes: text.byteLength, sha256: 'x', source: { create: { bytes: text } } },
    });
    const stored = async () =>
      (
        await db.prisma.$queryRaw<{ compression: string | null; storage: string }[]>`
          SELECT pg_column_compression(s.bytes) AS compression, a.attstorage::text AS storage
            FROM document_sources s, pg_attribute a
           WHERE s.document_id = ${document.id}::uuid AND a.attrelid = 'document_sources'::regclass AND a.attname = 'bytes'`
      )[0]!;
    expect(await stored()).toEqual({ compression: 'pglz', storage: 'x' });

    await runAgain('20261127020000_document_sources_uncompressed');
    expect(await stored()).toEqual({ compression: null, storage: 'e' });
    const source = await db.prisma.documentSource.findUnique({ where: { documentId: document.id } });
    expect(Buffer.from(source!.bytes).equals(text)).toBe(true);
  });

  it("index the documents that are not ready, which every search lists, whether or not the store made the index at start as it did before", async () => {
    const definition = async () =>
      (await db.prisma.$queryRaw<{ indexdef: string }[]>`SELECT indexdef FROM pg_indexes WHERE indexname = 'documents_not_ready'`)[0]?.indexdef;
    expect(await definition()).toMatch(/ON public\.documents USING btree \(workspace_id\) WHERE \(status <> 'ready'::document_status\)$/);
    await runAgain('20261202160000_documents_not_ready');
    expect(await definition()).toMatch(/WHERE \(status <> 'ready'/);
    await db.prisma.$executeRawUnsafe('DROP INDEX documents_not_ready');
    await runAgain('20261202160000_documents_not_ready');
    expect(await definition()).toMatch(/WHERE \(status <> 'ready'/);
  });
});
