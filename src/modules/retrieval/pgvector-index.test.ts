import { rm } from 'node:fs/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.js';
import { openDatabase, type Database } from '../../db/database.js';
import { BackgroundWork } from '../../observability/background-work.js';
import { analyze, termFrequencies } from './analyzer.js';
import { parseSketch, sketchOf } from './fresh-vectors.js';
import { workspacesInIndex, workspacesLargestFirst } from './indexed-workspaces.js';
import { openPgvectorIndex } from './pgvector-index.js';
import type { VectorIndex } from './vector-index.js';
import { dimensions, holdTableLocked, indexedDocuments, model, seeded, unit } from '../../../test/support/vector-index.js';
import { createOwnDatabase, migratedDataDir } from '../../../test/support/server.js';

// What only pgvector does (the contract all indexes share is vector-index.test.ts): keyword
// postings kept in memory and followed through the change log, and the merge of chunks written
// outside the HNSW graph. On the leg's store; the Elasticsearch leg, whose PostgreSQL has no
// pgvector, leaves this file out. On PostgreSQL a second connection can hold a transaction open,
// in a database of this file's own: the follower of the log loads every workspace written, and
// counting its loads must not count other files' workspaces.
const onPostgres = Boolean(process.env.DATABASE_URL);
let ownDatabase: Awaited<ReturnType<typeof createOwnDatabase>> | undefined;
/** This file's own database on the leg's server. */
let postgresUrl: string | undefined;
let dataDir: string;
let db: Database;
let index: VectorIndex;
let userId: string;
const { addDocuments, workspaceWith, keywordTexts } = indexedDocuments(() => ({ db, userId, index }));
const openIndex = () => openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 64 * 1024 * 1024 });
// Exact, where graphBacklog estimates once the table has grown past a few megabytes (earlier
// tests' merged rows count towards that until a vacuum, so whether it does depends on timing).
const waitingRows = async () => (await db.prisma.$queryRaw<{ rows: number }[]>`SELECT count(*)::int AS rows FROM chunk_index_fresh`)[0]!.rows;

beforeAll(async () => {
  dataDir = await migratedDataDir('kb-pgvector-');
  ownDatabase = onPostgres ? await createOwnDatabase(process.env.DATABASE_URL!) : undefined;
  postgresUrl = ownDatabase?.url;
  const config = loadConfig({ ...process.env, KB_DATA_DIR: dataDir, DATABASE_URL: postgresUrl ?? '' });
  db = await openDatabase(config);
  index = await openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: config.keywordMemoryBytes });
  userId = (await db.prisma.user.create({ data: { email: `pgvector-${Math.random()}@example.com`, name: 'Index' } })).id;
}, 60_000);

afterAll(async () => {
  await index?.close();
  await db?.close();
  await ownDatabase?.drop();
  await rm(dataDir, { recursive: true, force: true });
});

describe('the pgvector index', () => {
  it("loads a workspace's keyword side ahead of its first search once chunks are written to it", async () => {
    const backgroundWork = new BackgroundWork();
    const ahead = await openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 64 * 1024 * 1024, backgroundWork });
    const loads = () => backgroundWork.states().find((state) => state.task === 'keyword_load')!.runs;
    try {
      // The follower's first reading marks where the log stands; what is written after it is followed.
      await new Promise((resolve) => setTimeout(resolve, 5_500));
      const { workspaceId } = await workspaceWith('ahead', [{ texts: ['lighthouse keepers log storms', 'lighthouse lamps turn'], vectors: [unit(80), unit(81)] }]);
      for (let waited = 0; loads() === 0 && waited < 15_000; waited += 100) await new Promise((resolve) => setTimeout(resolve, 100));
      expect(loads()).toBe(1);
      // The first search finds the postings loaded: no load of its own.
      expect((await keywordTexts(ahead, workspaceId, 'lighthouse')).sort()).toEqual(['lighthouse keepers log storms', 'lighthouse lamps turn']);
      expect(loads()).toBe(1);
      // Chunks written later are synced ahead too, and found.
      await addDocuments(workspaceId, [{ texts: ['lighthouse foghorn'], vectors: [unit(82)] }]);
      expect(await keywordTexts(ahead, workspaceId, 'foghorn')).toEqual(['lighthouse foghorn']);
      expect(loads()).toBe(1);
    } finally {
      await ahead.close();
    }
  }, 40_000);

  // The follower's sync of a workspace waits for the searches in progress before it starts, and
  // a search of that workspace waits for the follower's sync: without care each waits for the
  // other until the longest yield is over (a second by default; here two minutes).
  it('keeps no search waiting for background work on the workspace it searches', async () => {
    const backgroundWork = new BackgroundWork({ longestYieldMs: 120_000 });
    const ahead = await openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 64 * 1024 * 1024, backgroundWork });
    const loads = () => backgroundWork.states().find((state) => state.task === 'keyword_load')!;
    try {
      // The follower's first reading marks where the log stands; what is written after it is followed.
      await new Promise((resolve) => setTimeout(resolve, 5_500));
      await backgroundWork.foreground(async () => {
        const { workspaceId } = await workspaceWith('awaited', [{ texts: ['beacon on the headland', 'beacon fires'], vectors: [unit(85), unit(86)] }]);
        // The follower reads the log within its period and waits for this request's work to end.
        await new Promise((resolve) => setTimeout(resolve, 6_000));
        expect(loads()).toMatchObject({ runs: 0, running: 0 });
        expect((await keywordTexts(ahead, workspaceId, 'beacon')).sort()).toEqual(['beacon fires', 'beacon on the headland']);
        // The follower's load served the search: one load, not a second of the search's own.
        expect(loads().runs).toBe(1);
      });
    } finally {
      await ahead.close();
    }
  }, 40_000);

  if (onPostgres) {
    it('opens beside another process that is writing and merging, without taking a lock on the tables', async () => {
      const client = new pg.Client({ connectionString: postgresUrl });
      await client.connect();
      try {
        // What an upsert or a merge of another process holds while it runs; any DDL would wait for it.
        await client.query('BEGIN');
        await client.query('LOCK TABLE chunk_index, chunk_index_fresh, chunk_index_log IN ROW EXCLUSIVE MODE');
        const opened = await Promise.race([
          openIndex().then(async (other) => {
            await other.close();
            return 'opened';
          }),
          new Promise((resolve) => setTimeout(() => resolve('still waiting after 5 s'), 5_000)),
        ]);
        expect(opened).toBe('opened');
      } finally {
        await client.query('ROLLBACK');
        await client.end();
      }
    });

    // As a merge of another process holds rows it moves; on a loaded store for seconds.
    it('writes a chunk again while another transaction holds its row for longer than 5 s', async () => {
      const { workspaceId, documentIds } = await workspaceWith('held-row', [{ texts: ['moored barge'], vectors: [unit(90)] }]);
      const chunk = await db.prisma.chunk.findFirstOrThrow({ where: { documentId: documentIds[0]! } });
      const client = new pg.Client({ connectionString: postgresUrl });
      await client.connect();
      try {
        await client.query('BEGIN');
        const held = await client.query('SELECT 1 FROM chunk_index_fresh WHERE chunk_id = $1 FOR UPDATE', [chunk.id]);
        expect(held.rowCount).toBe(1);
        let settled = false;
        const written = index.upsert([{ chunkId: chunk.id, documentId: chunk.documentId, workspaceId, embedding: unit(91), terms: analyze('moored barge') }]).finally(() => (settled = true));
        written.catch(() => undefined);
        await new Promise((resolve) => setTimeout(resolve, 6_000));
        expect(settled).toBe(false);
        await client.query('COMMIT');
        await written;
        const { vector } = await index.search({ workspaceIds: [workspaceId], vector: unit(91), terms: [], limit: 1, excludeDocumentIds: [] });
        expect(vector[0]).toMatchObject({ chunkId: chunk.id });
        expect(vector[0]!.score).toBeGreaterThan(0.999);
      } finally {
        await client.query('ROLLBACK').catch(() => undefined);
        await client.end();
      }
    }, 30_000);

    // Only a server with concurrent connections can commit transactions out of the order of their ids.
    it('finds a chunk whose transaction began before, and committed after, a sync that saw a later one', async () => {
      const other = await openIndex();
      const client = new pg.Client({ connectionString: postgresUrl });
      await client.connect();
      try {
        const { workspaceId, documentIds } = await workspaceWith('late-commit', [{ texts: ['early anchor text'], vectors: [unit(80)] }]);
        const documentId = documentIds[0]!;
        expect(await keywordTexts(other, workspaceId, 'anchor')).toEqual(['early anchor text']);
        const late = await db.prisma.chunk.create({ data: { documentId, chunkIndex: 1, content: 'late walrus', tokenCount: 2 } });
        await client.query('BEGIN');
        await client.query('SELECT pg_current_xact_id()');
        // A transaction with a later id commits first, and the other process syncs past it.
        await addDocuments(workspaceId, [{ texts: ['prompt walrus'], vectors: [unit(82)] }]);
        expect(await keywordTexts(other, workspaceId, 'walrus')).toEqual(['prompt walrus']);
        const counts = termFrequencies(analyze('late walrus'));
        await client.query(
          `INSERT INTO chunk_index (chunk_id, document_id, workspace_id, embedding, terms, freqs, term_count)
           VALUES ($1, $2, $3, $4::vector, $5, $6, $7)`,
          [late.id, documentId, workspaceId, `[${Array.from(unit(81)).join(',')}]`, [...counts.keys()], [...counts.values()], 2],
        );
        await client.query('COMMIT');
        expect((await keywordTexts(other, workspaceId, 'walrus')).sort()).toEqual(['late walrus', 'prompt walrus']);
      } finally {
        await client.query('ROLLBACK').catch(() => undefined);
        await client.end();
        await other.close();
      }
    });
  }

  it('finds chunks alike outside the graph and after a merge moves them in, and a reader that loaded before the merge misses none', async () => {
    const graph = index as VectorIndex & Required<Pick<VectorIndex, 'graphBacklog' | 'mergeIntoGraph'>>;
    while ((await graph.mergeIntoGraph(500)) > 0);
    const texts = Array.from({ length: 200 }, (_, i) => `pebble ${i} on the shore`);
    const { workspaceId, documentIds } = await workspaceWith('merge', [
      { texts, vectors: texts.map((_, i) => unit(300 + (i % 20), 0.002 * i)) },
      { texts: ['pebble beach far away'], vectors: [unit(305, 0.3)] },
    ]);
    expect(await waitingRows()).toBe(201);
    const search = (extra: { documentIds?: string[]; excludeDocumentIds?: string[] } = {}) =>
      index.search({ workspaceIds: [workspaceId], vector: unit(305), terms: analyze('pebble 7 shore'), limit: 20, excludeDocumentIds: [], ...extra });
    const outside = await search();
    const outsideFiltered = await search({ documentIds: [documentIds[1]!] });
    expect(outside.vector).toHaveLength(20);
    expect(outsideFiltered.vector).toHaveLength(1);
    const shoreHits = async (through: VectorIndex) =>
      (await through.search({ workspaceIds: [workspaceId], terms: analyze('shore'), limit: 500, excludeDocumentIds: [] })).keyword.length;
    const reader = await openIndex();
    try {
      expect(await shoreHits(reader)).toBe(200);
      // In uneven slices, as merges in several processes would leave them.
      let slices = 0;
      while ((await graph.mergeIntoGraph(37)) > 0) slices += 1;
      expect(slices).toBe(6);
      expect(await waitingRows()).toBe(0);
      const merged = await search();
      expect(merged.vector.map((hit) => hit.chunkId)).toEqual(outside.vector.map((hit) => hit.chunkId));
      merged.vector.forEach((hit, rank) => expect(hit.score).toBeCloseTo(outside.vector[rank]!.score, 6));
      expect(merged.keyword).toEqual(outside.keyword);
      expect((await search({ documentIds: [documentIds[1]!] })).vector).toEqual(outsideFiltered.vector);
      expect(await shoreHits(reader)).toBe(200);
      expect(await keywordTexts(reader, workspaceId, 'pebble 7')).toEqual(await keywordTexts(index, workspaceId, 'pebble 7'));
      expect(await index.countByDocument(workspaceId)).toEqual(new Map([[documentIds[0]!, 200], [documentIds[1]!, 1]]));

      // Some in the graph, some not: one search ranks both, and a deletion takes both.
      const [late] = await addDocuments(workspaceId, [{ texts: ['pebble nearest of all', 'pebble second'], vectors: [unit(305, 0.0001), unit(305, 0.0003)] }]);
      expect(await waitingRows()).toBe(2);
      const mixed = await search();
      const lateChunks = await db.prisma.chunk.findMany({ where: { documentId: late! }, orderBy: { chunkIndex: 'asc' }, select: { id: true } });
      expect(mixed.vector.slice(0, 2).map((hit) => hit.chunkId)).toEqual([lateChunks[0]!.id, lateChunks[1]!.id]);
      expect(mixed.vector.slice(2)).toEqual(outside.vector.slice(0, 18));
      // A hybrid search scores the chunks outside the graph in a statement of their own; one by vectors alone, with the graph's.
      expect((await index.search({ workspaceIds: [workspaceId], vector: unit(305), limit: 20, excludeDocumentIds: [] })).vector).toEqual(mixed.vector);
      expect(await graph.mergeIntoGraph(1)).toBe(1);
      await db.prisma.document.delete({ where: { id: late! } });
      expect(await waitingRows()).toBe(0);
      expect((await search()).vector).toEqual(outside.vector);
      expect((await keywordTexts(reader, workspaceId, 'nearest')).length + (await keywordTexts(index, workspaceId, 'nearest')).length).toBe(0);
    } finally {
      await reader.close();
    }
  });

  it('finds the nearest of many chunks outside the graph by comparing only those closest by sketch', async () => {
    const graph = index as VectorIndex & Required<Pick<VectorIndex, 'graphBacklog' | 'mergeIntoGraph'>>;
    while ((await graph.mergeIntoGraph(500)) > 0);
    // 40 clusters of 50 chunks around random centres: far more chunks than the 8 per hit compared exactly.
    const next = seeded(26);
    const gaussian = () => Math.sqrt(-2 * Math.log(1 - next())) * Math.cos(2 * Math.PI * next());
    const normalised = (vector: Float32Array) => {
      const norm = Math.hypot(...vector);
      return vector.map((value) => value / norm);
    };
    const around = (centre: Float32Array, spread: number) => normalised(centre.map((value) => value + spread * gaussian()));
    const centres = Array.from({ length: 40 }, () => normalised(Float32Array.from({ length: dimensions }, gaussian)));
    const vectors = centres.flatMap((centre) => Array.from({ length: 50 }, () => around(centre, 0.04)));
    const texts = vectors.map((_, i) => `sketch ${i}`);
    const { workspaceId, documentIds } = await workspaceWith('sketches', [
      { texts: texts.slice(0, 1000), vectors: vectors.slice(0, 1000) },
      { texts: texts.slice(1000), vectors: vectors.slice(1000) },
    ]);
    expect(await waitingRows()).toBe(2000);
    const chunks = await db.prisma.chunk.findMany({ where: { documentId: { in: documentIds } }, select: { id: true, documentId: true, chunkIndex: true } });
    const vectorOf = new Map(chunks.map((chunk) => [chunk.id, vectors[(chunk.documentId === documentIds[0] ? 0 : 1000) + chunk.chunkIndex]!]));
    const cosine = (a: Float32Array, b: Float32Array) => a.reduce((sum, value, i) => sum + value * b[i]!, 0);
    const [stored] = await db.prisma.$queryRawUnsafe<{ chunk_id: string; sketch: string }[]>(
      'SELECT chunk_id::text, binary_quantize(embedding)::text AS sketch FROM chunk_index_fresh WHERE workspace_id = $1::uuid LIMIT 1',
      workspaceId,
    );
    expect(parseSketch(stored!.sketch)).toEqual(sketchOf(vectorOf.get(stored!.chunk_id)!));

    for (const [target, onlySecond] of [[17, false], [1234, false], [1702, true]] as const) {
      const query = around(vectors[target]!, 0.01);
      const allowed = chunks.filter((chunk) => !onlySecond || chunk.documentId === documentIds[1]);
      const exact = allowed
        .map((chunk) => ({ chunkId: chunk.id, score: cosine(query, vectorOf.get(chunk.id)!) }))
        .sort((a, b) => b.score - a.score)
        .slice(0, 10);
      const searches = [
        index.search({ workspaceIds: [workspaceId], vector: query, terms: analyze('sketch'), limit: 10, excludeDocumentIds: [], ...(onlySecond && { documentIds: [documentIds[1]!] }) }),
        // Vector only: the workspace is held in memory by now, and its sketches serve this one too.
        index.search({ workspaceIds: [workspaceId], vector: query, limit: 10, excludeDocumentIds: onlySecond ? [documentIds[0]!] : [] }),
      ];
      for (const { vector } of await Promise.all(searches)) {
        expect(vector).toHaveLength(10);
        expect(vector[0]!.chunkId).toBe(exact[0]!.chunkId);
        const found = vector.filter((hit) => exact.some((best) => best.chunkId === hit.chunkId));
        expect(found.length).toBeGreaterThanOrEqual(9);
        for (const hit of vector) expect(hit.score).toBeCloseTo(cosine(query, vectorOf.get(hit.chunkId)!), 5);
      }
    }
    while ((await graph.mergeIntoGraph(500)) > 0);
    await db.prisma.workspace.delete({ where: { id: workspaceId } });
    // 16 s alone on 2 cores, most of it writing the 2,000 chunks; more beside another test file.
  }, 90_000);

  it('answers the same under a memory budget too small to keep any workspace in memory', async () => {
    const tight = await openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 1 });
    const first = await workspaceWith('budget-a', [{ texts: ['otter river'], vectors: [unit(100)] }]);
    const second = await workspaceWith('budget-b', [{ texts: ['otter sea'], vectors: [unit(101)] }]);
    for (let round = 0; round < 2; round++) {
      expect(await keywordTexts(tight, first.workspaceId, 'otter')).toEqual(['otter river']);
      expect(await keywordTexts(tight, second.workspaceId, 'otter')).toEqual(['otter sea']);
    }
    await addDocuments(first.workspaceId, [{ texts: ['otter pup'], vectors: [unit(102)] }]);
    expect((await keywordTexts(tight, first.workspaceId, 'otter')).sort()).toEqual(['otter pup', 'otter river']);
    // Both workspaces at once: each is searched together with the other, whatever the budget.
    const { keyword } = await tight.search({ workspaceIds: [first.workspaceId, second.workspaceId], terms: analyze('otter'), limit: 10, excludeDocumentIds: [] });
    expect(keyword).toHaveLength(3);
  });

  it('loads alike a workspace holding most of the table (read in physical order) and one holding little (read through the index)', async () => {
    const texts = Array.from({ length: 600 }, (_, i) => `bulk cargo manifest ${i}`);
    const majority = await workspaceWith('majority', [{ texts, vectors: texts.map((_, i) => unit(110 + (i % 50), 0.001 * i)) }]);
    const minority = await workspaceWith('minority', [{ texts: ['bulk carrier'], vectors: [unit(170)] }]);
    await db.maintain();
    const fresh = await openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 64 * 1024 * 1024 });
    const { keyword } = await fresh.search({ workspaceIds: [majority.workspaceId], terms: analyze('bulk manifest 599'), limit: 1000, excludeDocumentIds: [] });
    expect(keyword).toHaveLength(600);
    expect((await keywordTexts(fresh, majority.workspaceId, 'manifest 599'))[0]).toBe('bulk cargo manifest 599');
    expect(await keywordTexts(fresh, minority.workspaceId, 'bulk')).toEqual(['bulk carrier']);
  });

  it('ranks a search by vectors alone while a large workspace loads, waits for a small one, and has the keywords once the load ends', async () => {
    const texts = Array.from({ length: 1_200 }, (_, i) => `granite quarry ledger ${i}`);
    const large = await workspaceWith('loading-large', [{ texts, vectors: texts.map((_, i) => unit(120 + (i % 40), 0.001 * i)) }]);
    const small = await workspaceWith('loading-small', [{ texts: ['granite pebble ledger'], vectors: [unit(175)] }]);
    const backgroundWork = new BackgroundWork();
    const loading = await openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 64 * 1024 * 1024, backgroundWork, loadAhead: false });
    const loads = () => backgroundWork.states().find((state) => state.task === 'keyword_load')!;
    const search = (workspaceId: string, vector: Float32Array) =>
      loading.search({ workspaceIds: [workspaceId], vector, terms: analyze('granite ledger'), limit: 10, excludeDocumentIds: [] });
    try {
      // Another session holds the table while both searches begin: neither load can end within a search's wait.
      const release = await holdTableLocked(db, 'chunk_index');
      const largeSearch = search(large.workspaceId, unit(120));
      const smallSearch = search(small.workspaceId, unit(175));
      await new Promise((resolve) => setTimeout(resolve, 600));
      await release();
      const [whileLoading, smallFirst] = await Promise.all([largeSearch, smallSearch]);
      expect(whileLoading.vector).toHaveLength(10);
      expect(whileLoading.keyword).toEqual([]);
      expect(smallFirst.keyword).toHaveLength(1);
      // The large workspace's load went on without its search; the next search after it ends ranks keywords too.
      for (let waited = 0; (loads().runs < 2 || loads().running > 0) && waited < 30_000; waited += 100) await new Promise((resolve) => setTimeout(resolve, 100));
      const loaded = await search(large.workspaceId, unit(120));
      expect(loaded.keyword).toHaveLength(10);
      expect(loads().runs).toBe(2);
    } finally {
      await loading.close();
    }
    await db.prisma.workspace.deleteMany({ where: { id: { in: [large.workspaceId, small.workspaceId] } } });
  }, 60_000);
  it('finds the workspaces in the index through its workspace indexes, and orders the loads at start largest first by the store statistics', async () => {
    const graph = index as VectorIndex & Required<Pick<VectorIndex, 'mergeIntoGraph'>>;
    const texts = (word: string, count: number) => Array.from({ length: count }, (_, i) => `${word} ${i}`);
    const big = await workspaceWith('sizes-big', [{ texts: texts('cormorant', 12), vectors: texts('x', 12).map((_, i) => unit(40 + i)) }]);
    const middle = await workspaceWith('sizes-middle', [{ texts: texts('gannet', 5), vectors: texts('x', 5).map((_, i) => unit(60 + i)) }]);
    const small = await workspaceWith('sizes-small', [{ texts: texts('tern', 2), vectors: [unit(70), unit(71)] }]);
    while ((await graph.mergeIntoGraph(500)) > 0);
    // Written after the merge: outside the graph, in chunk_index_fresh only.
    const waiting = await workspaceWith('sizes-waiting', [{ texts: ['puffin burrow'], vectors: [unit(72)] }]);
    const empty = await db.prisma.workspace.create({ data: { userId, name: 'sizes-empty', nameKey: `sizes-empty-${Math.random()}` } });
    const mine = [big, middle, small, waiting].map((workspace) => workspace.workspaceId);

    const present = await workspacesInIndex(db.prisma);
    expect(mine.filter((workspaceId) => present.has(workspaceId))).toEqual(mine);
    expect(present.has(empty.id)).toBe(false);

    await db.prisma.$executeRawUnsafe('ANALYZE chunk_index');
    // After the statistics were taken: in the index, but named by none of them.
    const late = await workspaceWith('sizes-late', [{ texts: texts('skua', 3), vectors: [unit(73), unit(74), unit(75)] }]);
    while ((await graph.mergeIntoGraph(500)) > 0);
    const ordered = (await workspacesLargestFirst(db.prisma)).filter((row) => [...mine, late.workspaceId].includes(row.workspaceId));
    // The statistics of a table this small count every row; the waiting workspace is merged by now but was not then.
    expect(ordered.slice(0, 3)).toEqual([
      { workspaceId: big.workspaceId, estimatedChunks: 12 },
      { workspaceId: middle.workspaceId, estimatedChunks: 5 },
      { workspaceId: small.workspaceId, estimatedChunks: 2 },
    ]);
    expect(ordered.slice(3).map((row) => row.estimatedChunks)).toEqual([0, 0]);
    expect(new Set(ordered.slice(3).map((row) => row.workspaceId))).toEqual(new Set([waiting.workspaceId, late.workspaceId]));

    // A workspace deleted is gone from both tables, and from what is found.
    await db.prisma.workspace.deleteMany({ where: { id: { in: [small.workspaceId, waiting.workspaceId] } } });
    const after = await workspacesInIndex(db.prisma);
    expect([...mine, late.workspaceId].filter((workspaceId) => after.has(workspaceId))).toEqual([big.workspaceId, middle.workspaceId, late.workspaceId]);
    await db.prisma.workspace.deleteMany({ where: { id: { in: [big.workspaceId, middle.workspaceId, late.workspaceId, empty.id] } } });
  }, 60_000);
});
