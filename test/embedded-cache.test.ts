import { rm, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/db/database.js';
import { embeddedCacheGrowth, embeddedCacheMb, embeddedStoreDirectory } from '../src/db/embedded-store.js';
import { Prisma } from '../src/generated/prisma/client.js';
import { openPgvectorIndex } from '../src/modules/retrieval/pgvector-index.js';
import { FreshRowsMerge } from '../src/modules/retrieval/pgvector-merge.js';
import type { VectorIndex } from '../src/modules/retrieval/vector-index.js';
import { migratedDataDir } from './support/server.js';
import { indexedDocuments, model, unit } from './support/vector-index.js';

// The embedded store on every leg of the matrix: PostgreSQL's own cache is its administrator's.
let dataDir: string;

beforeAll(async () => {
  dataDir = await migratedDataDir('kb-cache-');
});

afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

const pageCache = async (environment: Record<string, string>) => {
  const db = await openDatabase(loadConfig({ ...process.env, KB_DATA_DIR: dataDir, DATABASE_URL: '', ...environment }));
  try {
    const [row] = await db.prisma.$queryRawUnsafe<{ shared_buffers: string }[]>('SHOW shared_buffers');
    return row!.shared_buffers;
  } finally {
    await db.close();
  }
};

describe("the embedded store's page cache", () => {
  it('is as large as the tables on disk, in steps of 64 MB, from 128 MB to 1 GB', () => {
    const mb = 1024 * 1024;
    expect(embeddedCacheMb(0)).toBe(128);
    expect(embeddedCacheMb(129 * mb)).toBe(192);
    expect(embeddedCacheMb(839 * mb)).toBe(832 + 64);
    expect(embeddedCacheMb(1024 * mb)).toBe(1024);
    expect(embeddedCacheMb(50 * 1024 * mb)).toBe(1024);
  });

  it('reaches PGlite: sized from the store at each start unless KB_STORE_CACHE_MB sets it', async () => {
    expect(await pageCache({ KB_STORE_CACHE_MB: '' })).toBe('128MB');
    expect(await pageCache({ KB_STORE_CACHE_MB: '48' })).toBe('48MB');
    // A store grown past the floor gets a larger cache at its next start (a sparse file stands in for its tables).
    const grown = path.join(embeddedStoreDirectory(dataDir), 'base', 'grown');
    await writeFile(grown, '');
    await truncate(grown, 300 * 1024 * 1024);
    expect(await pageCache({ KB_STORE_CACHE_MB: '' })).toBe('384MB');
  }, 120_000);
});

describe("the embedded store's page cache as the store grows", () => {
  it('moves to a larger cache once the tables call for half as much again, or for the largest', () => {
    const mb = 1024 * 1024;
    expect(embeddedCacheGrowth(128, 100 * mb)).toBeUndefined();
    expect(embeddedCacheGrowth(128, 120 * mb)).toBeUndefined();
    expect(embeddedCacheGrowth(128, 150 * mb)).toBe(192);
    expect(embeddedCacheGrowth(192, 220 * mb)).toBeUndefined();
    expect(embeddedCacheGrowth(512, 700 * mb)).toBeUndefined();
    expect(embeddedCacheGrowth(512, 760 * mb)).toBe(768);
    expect(embeddedCacheGrowth(768, 3000 * mb)).toBe(1024);
    expect(embeddedCacheGrowth(1024, 3000 * mb)).toBeUndefined();
  });

  it('restarts the open store with it, while requests go on, and loses nothing', async () => {
    const grownDir = await migratedDataDir('kb-cache-grows-');
    const db = await openDatabase(loadConfig({ ...process.env, KB_DATA_DIR: grownDir, DATABASE_URL: '', KB_STORE_CACHE_MB: '' }));
    try {
      const cache = async () => (await db.prisma.$queryRawUnsafe<{ shared_buffers: string }[]>('SHOW shared_buffers'))[0]!.shared_buffers;
      expect(await cache()).toBe('128MB');
      expect(db.pageCacheMb?.()).toBe(128);
      await db.prisma.$executeRawUnsafe('CREATE TABLE cache_probe (n int PRIMARY KEY)');
      await db.prisma.$executeRawUnsafe('INSERT INTO cache_probe SELECT generate_series(1, 1000)');

      const grown = path.join(embeddedStoreDirectory(grownDir), 'base', 'grown');
      await writeFile(grown, '');
      await truncate(grown, 600 * 1024 * 1024);
      // A transaction under way when the growth is noticed, and writes asked while the store restarts.
      const transaction = db.prisma.$transaction(async (tx) => {
        await tx.$executeRawUnsafe('INSERT INTO cache_probe VALUES (1001)');
        await new Promise((resolve) => setTimeout(resolve, 300));
        await tx.$executeRawUnsafe('INSERT INTO cache_probe VALUES (1002)');
      });
      await new Promise((resolve) => setTimeout(resolve, 50));
      const maintained = db.maintain();
      const writes = Array.from({ length: 20 }, (_, i) => db.prisma.$executeRawUnsafe(`INSERT INTO cache_probe VALUES (${2000 + i})`));
      const reads = Array.from({ length: 5 }, () => db.query<{ count: number }>(Prisma.sql`SELECT count(*)::int AS count FROM cache_probe`));
      await Promise.all([transaction, maintained, ...writes, ...reads]);

      expect(await cache()).toBe('640MB');
      expect(db.pageCacheMb?.()).toBe(640);
      expect(db.backgroundWork.states().find((state) => state.task === 'cache_resize')?.runs).toBe(2);
      const [{ count } = { count: -1 }] = await db.query<{ count: number }>(Prisma.sql`SELECT count(*)::int AS count FROM cache_probe`);
      expect(count).toBe(1000 + 2 + 20);
      // Nothing more to do at the same size.
      await db.maintain();
      expect(db.backgroundWork.states().find((state) => state.task === 'cache_resize')?.runs).toBe(2);
    } finally {
      await db.close();
    }
    // What was written reached the files: a new start reads it (and sizes the cache from them).
    const reopened = await openDatabase(loadConfig({ ...process.env, KB_DATA_DIR: grownDir, DATABASE_URL: '', KB_STORE_CACHE_MB: '' }));
    try {
      const [{ count } = { count: -1 }] = await reopened.query<{ count: number }>(Prisma.sql`SELECT count(*)::int AS count FROM cache_probe`);
      expect(count).toBe(1022);
    } finally {
      await reopened.close();
      await rm(grownDir, { recursive: true, force: true });
    }
  }, 120_000);

  it('grows ahead of what its tables are about to gain, as the index estimates it', async () => {
    const aheadDir = await migratedDataDir('kb-cache-ahead-');
    const db = await openDatabase(loadConfig({ ...process.env, KB_DATA_DIR: aheadDir, DATABASE_URL: '', KB_STORE_CACHE_MB: '' }));
    try {
      let expected = 0;
      db.expectTableGrowth!(async () => expected);
      await db.maintain();
      expect(db.pageCacheMb?.()).toBe(128);
      expected = 600 * 1024 * 1024;
      await db.maintain();
      expect(db.pageCacheMb?.()).toBe(640);
      // An estimate that cannot be had counts as none: the cache stays.
      db.expectTableGrowth!(() => Promise.reject(new Error('the index is closed')));
      await db.maintain();
      expect(db.pageCacheMb?.()).toBe(640);
    } finally {
      // Closed while the new cache is read in: the pool's goodbyes reach a stopped thread, and must not fail the process.
      await db.close();
      await rm(aheadDir, { recursive: true, force: true });
    }
  }, 120_000);

  it('stays as KB_STORE_CACHE_MB sets it', async () => {
    const fixedDir = await migratedDataDir('kb-cache-fixed-');
    const db = await openDatabase(loadConfig({ ...process.env, KB_DATA_DIR: fixedDir, DATABASE_URL: '', KB_STORE_CACHE_MB: '64' }));
    try {
      const grown = path.join(embeddedStoreDirectory(fixedDir), 'base', 'grown');
      await writeFile(grown, '');
      await truncate(grown, 600 * 1024 * 1024);
      await db.maintain();
      expect(db.pageCacheMb?.()).toBe(64);
      expect(db.backgroundWork.states().find((state) => state.task === 'cache_resize')?.runs).toBe(0);
    } finally {
      await db.close();
      await rm(fixedDir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe("the embedded store's page cache after a start", () => {
  type Plan = { Plan: Record<string, unknown> & { Plans?: Plan['Plan'][] } };
  /** Blocks a statement found in the page cache and read from the files, from its plan. */
  const blocksOf = async (db: Awaited<ReturnType<typeof openDatabase>>, sql: string) => {
    const [row] = await db.prisma.$queryRawUnsafe<{ 'QUERY PLAN': Plan[] }[]>(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${sql}`);
    const top = row!['QUERY PLAN'][0]!.Plan;
    return { hit: Number(top['Shared Hit Blocks']), read: Number(top['Shared Read Blocks']) };
  };
  const vector = (seed: number) => `[${Array.from({ length: 64 }, (_, i) => Math.sin(seed * 7.3 + i * 1.7).toFixed(4)).join(',')}]`;

  it('holds what searches use, the vector graph first, once the store has read it in after a start', async () => {
    const warmDir = await migratedDataDir('kb-cache-warm-');
    const open = () => openDatabase(loadConfig({ ...process.env, KB_DATA_DIR: warmDir, DATABASE_URL: '', KB_STORE_CACHE_MB: '16' }));
    let db = await open();
    try {
      await db.prisma.$executeRawUnsafe('CREATE EXTENSION IF NOT EXISTS vector');
      await db.prisma.$executeRawUnsafe('CREATE TABLE warm_vectors (id int PRIMARY KEY, embedding vector(64))');
      await db.prisma.$executeRawUnsafe(
        `INSERT INTO warm_vectors SELECT n, (SELECT array_agg(sin(n * 7.3 + i * 1.7))::vector(64) FROM generate_series(0, 63) AS i) FROM generate_series(1, 6000) AS n`,
      );
      await db.prisma.$executeRawUnsafe('CREATE INDEX warm_vectors_graph ON warm_vectors USING hnsw (embedding vector_cosine_ops)');
      // 24 MB the searches never ask for: more than the cache holds.
      await db.prisma.$executeRawUnsafe('CREATE TABLE warm_filler (id int, padding text)');
      await db.prisma.$executeRawUnsafe(`INSERT INTO warm_filler SELECT n, repeat('x', 2000) FROM generate_series(1, 12000) AS n`);
      await db.close();

      db = await open();
      const warmed = await db.pageCacheWarmed!();
      // 16 MB of cache, three quarters of it filled.
      expect(warmed!.blocks).toBe(1536);
      expect(db.backgroundWork.states().find((state) => state.task === 'cache_warm')!.runs).toBeGreaterThanOrEqual(1536 / 128);
      // The first statement after a start reads the catalogs it needs; searches for other
      // vectors then visit other parts of the graph, and other rows.
      await blocksOf(db, `SELECT id FROM warm_vectors ORDER BY embedding <=> '${vector(1)}' LIMIT 10`);
      for (const seed of [2, 3, 4, 5, 6]) {
        const search = await blocksOf(db, `SELECT id FROM warm_vectors ORDER BY embedding <=> '${vector(seed)}' LIMIT 10`);
        expect(search.hit).toBeGreaterThan(0);
        expect(search.read).toBe(0);
      }
      // What did not fit is read from the files: the measure above would have seen a miss.
      const scan = await blocksOf(db, 'SELECT count(*) FROM warm_filler');
      expect(scan.read).toBeGreaterThan(0);
    } finally {
      await db.close();
      await rm(warmDir, { recursive: true, force: true });
    }
  }, 120_000);
});

// The estimate the page cache grows ahead by, on the embedded store that uses it (PostgreSQL's
// cache is its administrator's, and a shared database's statistics count other writers too).
describe('the chunks waiting outside the graph, as the page cache counts them', () => {
  it('are expected to grow the tables by about what their merge adds', async () => {
    const estimateDir = await migratedDataDir('kb-cache-estimate-');
    const db = await openDatabase(loadConfig({ ...process.env, KB_DATA_DIR: estimateDir, DATABASE_URL: '', KB_STORE_CACHE_MB: '' }));
    const index = (await openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 1 << 20, loadAhead: false })) as VectorIndex & Required<Pick<VectorIndex, 'mergeIntoGraph'>>;
    try {
      const userId = (await db.prisma.user.create({ data: { email: `estimate-${Math.random()}@example.com`, name: 'Estimate' } })).id;
      const { workspaceWith } = indexedDocuments(() => ({ db, userId, index }));
      const merge = new FreshRowsMerge(db.prisma);
      expect(await merge.pendingGraphBytes(model.dimensions)).toBe(0);
      const texts = Array.from({ length: 400 }, (_, i) => `kingfisher ${i} dives from the alder by the weir at dawn`);
      await workspaceWith('growth', [{ texts, vectors: texts.map((_, i) => unit(i % 300, 0.01 * i)) }]);
      const expected = await merge.pendingGraphBytes(model.dimensions);
      const graphBytes = async () => (await db.prisma.$queryRaw<{ bytes: number }[]>`SELECT pg_total_relation_size('chunk_index')::float8 AS bytes`)[0]!.bytes;
      const before = await graphBytes();
      while ((await index.mergeIntoGraph(500)) > 0);
      const added = (await graphBytes()) - before;
      expect(expected).toBeGreaterThan(0.6 * added);
      expect(expected).toBeLessThan(1.6 * added);
    } finally {
      await index.close();
      await db.close();
      await rm(estimateDir, { recursive: true, force: true });
    }
  }, 120_000);
});
