import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOwnDatabase, migratedDataDir } from '../../../test/support/server.js';
import { holdTableLocked, seeded } from '../../../test/support/vector-index.js';
import { loadConfig } from '../../config.js';
import { openDatabase, type Database } from '../../db/database.js';
import { analyze } from './analyzer.js';
import { readGraphIntoBuffers } from './pgvector-graph-read.js';
import { openPgvectorIndex } from './pgvector-index.js';
import type { VectorIndex } from './vector-index.js';

// Reading the HNSW graph into PostgreSQL's shared buffers by walking it, on the pgvector leg's
// PostgreSQL, in a database of this file's own (a serving process on the embedded store does not).
let dataDir: string;
let ownDatabase: Awaited<ReturnType<typeof createOwnDatabase>> | undefined;
let db: Database;
let index: Required<Pick<VectorIndex, 'mergeIntoGraph' | 'upsert' | 'close'>>;
const dimensions = 384;
const running = () => new AbortController().signal;

beforeAll(async () => {
  dataDir = await migratedDataDir('kb-graph-read-');
  ownDatabase = await createOwnDatabase(process.env.DATABASE_URL!);
  const config = loadConfig({ ...process.env, KB_DATA_DIR: dataDir, DATABASE_URL: ownDatabase.url });
  db = await openDatabase(config);
  index = (await openPgvectorIndex(db.prisma, { model: 'bge-small-en-v1.5-q', dimensions }, { keywordMemoryBytes: 16 * 1024 * 1024, loadAhead: false })) as typeof index;
}, 60_000);

afterAll(async () => {
  await index?.close();
  await db?.close();
  await ownDatabase?.drop();
  await rm(dataDir, { recursive: true, force: true });
});

describe('reading the graph into the buffers', () => {
  it('says an empty graph has nothing to read, then walks every chunk of a filled one', async () => {
    expect(await readGraphIntoBuffers(db.prisma, running())).toMatchObject({ read: false, reason: 'empty' });
    const user = await db.prisma.user.create({ data: { email: `graph-read-${Math.random()}@example.com`, name: 'Graph read' } });
    const workspaceId = (await db.prisma.workspace.create({ data: { userId: user.id, name: 'graph read', nameKey: `graph-read-${Math.random()}` } })).id;
    const documentId = (await db.prisma.document.create({ data: { workspaceId, filename: 'a.txt', contentType: 'text/plain', sizeBytes: 1, sha256: `${Math.random()}`, status: 'ready' } })).id;
    const chunks = await db.prisma.chunk.createManyAndReturn({ data: Array.from({ length: 1_500 }, (_, n) => ({ documentId, chunkIndex: n, content: `pebble ${n}`, tokenCount: 2 })) });
    const random = seeded(7);
    await index.upsert(
      chunks.map((chunk) => ({
        chunkId: chunk.id,
        documentId,
        workspaceId,
        embedding: Float32Array.from({ length: dimensions }, () => random() - 0.5),
        terms: analyze(chunk.content),
      })),
    );
    while ((await index.mergeIntoGraph(500)) > 0);

    const outcome = await readGraphIntoBuffers(db.prisma, running());
    // Every element of the graph passed the walk (and its filter turned each away).
    expect(outcome).toMatchObject({ read: true, rows: 1_500 });
    const [graph] = await db.prisma.$queryRaw<{ pages: number }[]>`SELECT (pg_relation_size('chunk_index_embedding') / current_setting('block_size')::int)::int AS pages`;
    expect(outcome.read && outcome.pages).toBeGreaterThanOrEqual(graph!.pages);
  }, 120_000);

  it('leaves a graph larger than its share of the buffers alone', async () => {
    const outcome = await readGraphIntoBuffers(db.prisma, running(), 8192);
    expect(outcome).toMatchObject({ read: false, reason: 'too large', budgetBytes: 8192 });
    expect(!outcome.read && 'bytes' in outcome && outcome.bytes).toBeGreaterThan(8192);
  });

  it('walks in one process at a time, and stops at once when asked, even while it waits for the table', async () => {
    // Another process holds the read's lock while it walks.
    const other = await db.prisma.$transaction(async (tx) => {
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(7241601::int8)`;
      return readGraphIntoBuffers(db.prisma, running());
    });
    expect(other).toEqual({ read: false, reason: 'another process reads it' });

    const release = await holdTableLocked(db, 'chunk_index');
    try {
      const stop = new AbortController();
      const reading = readGraphIntoBuffers(db.prisma, stop.signal);
      await new Promise((resolve) => setTimeout(resolve, 500));
      const stoppedAt = performance.now();
      stop.abort();
      expect(await reading).toEqual({ read: false, reason: 'stopped' });
      // Cancelled on the server: it did not wait for the table to be let go.
      expect(performance.now() - stoppedAt).toBeLessThan(5_000);
    } finally {
      await release();
    }
  }, 60_000);
});
