import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { openDatabase, type Database } from '../src/db/database.js';
import { vacuumAfterMergeMs } from '../src/db/embedded-maintenance.js';
import { migratedDataDir } from './support/server.js';

// The embedded store on every leg of the matrix: it is the one without autovacuum.
let dataDir: string;
let db: Database;

beforeAll(async () => {
  dataDir = await migratedDataDir('kb-maintenance-');
  db = await openDatabase(loadConfig({ ...process.env, KB_DATA_DIR: dataDir, DATABASE_URL: '' }));
}, 60_000);

afterAll(async () => {
  await db?.close();
  await rm(dataDir, { recursive: true, force: true });
});

const estimatedRows = async (table: string) => {
  const [row] = await db.prisma.$queryRaw<{ tuples: number }[]>`SELECT reltuples::float8 AS tuples FROM pg_class WHERE relname = ${table}`;
  return row!.tuples;
};

describe('the embedded store', () => {
  it('analyses a table once enough of it changed, and vacuums it once enough of it is dead', async () => {
    // The check made at open analysed the empty tables; settle it before counting.
    await db.maintain();
    const user = await db.prisma.user.create({ data: { email: `maintenance-${Math.random()}@example.com`, name: 'Upkeep' } });
    const workspace = await db.prisma.workspace.create({ data: { userId: user.id, name: 'w', nameKey: 'w' } });
    const document = await db.prisma.document.create({
      data: { workspaceId: workspace.id, filename: 'a.txt', contentType: 'text/plain', sizeBytes: 1, sha256: 'x', status: 'ready' },
    });
    await db.prisma.chunk.createMany({ data: Array.from({ length: 2_000 }, (_, chunkIndex) => ({ documentId: document.id, chunkIndex, content: `chunk ${chunkIndex}`, tokenCount: 2 })) });

    const first = await db.maintain();
    expect(first.analyzed).toContain('chunks');
    expect(await estimatedRows('chunks')).toBe(2_000);
    expect((await db.maintain()).analyzed).not.toContain('chunks');

    // 150 changes of 2,000 rows is under 50 + 10%: not yet.
    await db.prisma.chunk.updateMany({ where: { chunkIndex: { lt: 150 } }, data: { tokenCount: 3 } });
    expect((await db.maintain()).analyzed).not.toContain('chunks');

    await db.prisma.chunk.deleteMany({ where: { chunkIndex: { gte: 500 } } });
    const afterDelete = await db.maintain();
    expect(afterDelete.vacuumed).toContain('chunks');
    expect(await estimatedRows('chunks')).toBe(500);
  });

  it('puts VACUUM off while a graph merge runs, and analyses all the same', async () => {
    const prisma = db.prisma;
    await prisma.$executeRawUnsafe('CREATE TABLE drained_rows (id serial PRIMARY KEY, body text)');
    await prisma.$executeRawUnsafe("INSERT INTO drained_rows (body) SELECT 'row ' || n FROM generate_series(1, 1000) AS n");
    await db.maintain();
    await prisma.$executeRawUnsafe('DELETE FROM drained_rows WHERE id > 200');
    const vacuums = () => db.backgroundWork.states().find((state) => state.task === 'vacuum')!.runs;
    // A merge slice has just ended.
    await db.backgroundWork.time('graph_merge', async () => {});
    const vacuumsBefore = vacuums();
    const during = await db.maintain();
    expect(during.vacuumed).toEqual([]);
    expect(during.analyzed).toContain('drained_rows');
    expect(await estimatedRows('drained_rows')).toBe(200);
    // The merge over, the VACUUM comes: from this call, or from the store's own check (every
    // 15 s) if that came first once the merge was far enough behind.
    while (db.backgroundWork.sinceLastRunMs('graph_merge') < vacuumAfterMergeMs) await new Promise((resolve) => setTimeout(resolve, 250));
    await db.maintain();
    expect(vacuums()).toBeGreaterThan(vacuumsBefore);
    // Nothing left dead: the table was vacuumed, not put off again.
    expect((await db.maintain()).vacuumed).toEqual([]);
  }, 30_000);

  it('analyses a table with an HNSW index but never vacuums it (that would hold the store for many seconds)', async () => {
    const prisma = db.prisma;
    await prisma.$executeRawUnsafe('CREATE EXTENSION IF NOT EXISTS vector');
    await prisma.$executeRawUnsafe('CREATE TABLE graph_rows (id serial PRIMARY KEY, v vector(2))');
    await prisma.$executeRawUnsafe('CREATE INDEX graph_rows_v ON graph_rows USING hnsw (v vector_cosine_ops)');
    await prisma.$executeRawUnsafe('INSERT INTO graph_rows (v) SELECT ARRAY[random() + 0.01, random()]::vector FROM generate_series(1, 600)');
    expect((await db.maintain()).analyzed).toContain('graph_rows');
    await prisma.$executeRawUnsafe('DELETE FROM graph_rows WHERE id > 100');
    const after = await db.maintain();
    expect(after.analyzed).toContain('graph_rows');
    expect(after.vacuumed).not.toContain('graph_rows');
  });
});
