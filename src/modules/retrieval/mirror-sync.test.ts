import { mkdtemp, readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.js';
import { openDatabase, type Database } from '../../db/database.js';
import { BackgroundWork } from '../../observability/background-work.js';
import { unloaded } from './held-workspace.js';
import { analyze } from './analyzer.js';
import { catchUpWorkspace, loadWorkspace } from './mirror-sync.js';
import { cleanChangeLog } from './pgvector-change-log.js';
import { openPgvectorIndex } from './pgvector-index.js';
import { readBack } from './service.js';
import type { VectorIndex } from './vector-index.js';
import { holdTableLocked, indexedDocuments, model, seeded, unit } from '../../../test/support/vector-index.js';
import { migratedDataDir, vectorGraphWorkDone } from '../../../test/support/server.js';
import { requestContext, ServerTimings } from '../../observability/request-context.js';

// The in-memory keyword side of the pgvector index following the change log through a merge into
// the graph and through the log's cleanup, on the leg's store (the embedded one, or PostgreSQL on the pgvector leg).
let dataDir: string;
let db: Database;
let index: VectorIndex & Required<Pick<VectorIndex, 'mergeIntoGraph'>>;
let userId: string;
const { workspaceWith, addDocuments, keywordTexts } = indexedDocuments(() => ({ db, userId, index }));
const openIndex = () => openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 64 * 1024 * 1024 });

beforeAll(async () => {
  dataDir = await migratedDataDir('kb-mirror-sync-');
  const config = loadConfig({ ...process.env, KB_DATA_DIR: dataDir });
  db = await openDatabase(config);
  index = (await openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 1 << 20, loadAhead: false })) as typeof index;
  userId = (await db.prisma.user.create({ data: { email: `mirror-${Math.random()}@example.com`, name: 'Mirror' } })).id;
}, 60_000);

afterAll(async () => {
  await index?.close();
  await db?.close();
  await rm(dataDir, { recursive: true, force: true });
});

const loggedMoves = async (workspaceId: string) =>
  Object.fromEntries(
    (
      await db.prisma.$queryRaw<{ moved: boolean; rows: number }[]>`
        SELECT moved, count(*)::int AS rows FROM chunk_index_log WHERE workspace_id = ${workspaceId}::uuid GROUP BY moved`
    ).map((row) => [String(row.moved), row.rows]),
  );

/**
 * Waits until the oldest transaction running anywhere on the store's server is younger than every
 * logged change of the workspace: a load's or a cleanup's horizon is that oldest transaction, and
 * on the pgvector leg other test files' work on the same server (a CREATE DATABASE, say) may hold
 * it back for a moment.
 */
async function untilHorizonPasses(workspaceId: string) {
  for (let waited = 0; ; waited += 50) {
    const [past] = await db.prisma.$queryRaw<{ past: boolean }[]>`
      SELECT pg_snapshot_xmin(pg_current_snapshot()) > max(xid) AS past FROM chunk_index_log WHERE workspace_id = ${workspaceId}::uuid`;
    if (past!.past) return;
    if (waited > 30_000) throw new Error('a transaction older than this test kept running for 30 s');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("the keyword side's sync through the change log: a merge's moves and the log's cleanup", () => {
  it("logs a merge's moves as moves, reads none of them again, and reads a moved chunk a load missed", async () => {
    const texts = Array.from({ length: 12 }, (_, i) => `heron ${i} wades the estuary`);
    const { workspaceId } = await workspaceWith('moves', [{ texts, vectors: texts.map((_, i) => unit(200 + i)) }]);
    expect(await loggedMoves(workspaceId)).toEqual({ false: 12 });

    // Loaded with a horizon past the writes: a horizon behind them would have the sync read the
    // written chunks again, as it must for changes it may not have seen.
    await untilHorizonPasses(workspaceId);
    const held = unloaded();
    await loadWorkspace(db.prisma, undefined, workspaceId, held);
    expect([held.postings.chunkCount, held.fresh.size]).toEqual([12, 12]);
    const chunks = await db.prisma.chunk.findMany({ where: { document: { workspaceId } }, orderBy: { chunkIndex: 'asc' }, select: { id: true } });
    // As a load that read the graph's table before the merge and the waiting chunks' after it would hold it.
    const missed = chunks[0]!.id;
    held.postings.remove(missed);
    held.fresh.delete(missed);

    while ((await index.mergeIntoGraph(5)) > 0);
    // Each moved chunk twice: out of the waiting chunks' table, into the graph's.
    expect(await loggedMoves(workspaceId)).toEqual({ false: 12, true: 24 });
    // Terms changed in place, as no write of the service does: a sync that read the moved rows again would take them.
    await db.prisma.$executeRaw`UPDATE chunk_index SET terms = '{unlogged}', freqs = '{1}', term_count = 1 WHERE workspace_id = ${workspaceId}::uuid`;

    await catchUpWorkspace(db.prisma, undefined, workspaceId, held);
    expect([held.postings.chunkCount, held.fresh.size]).toEqual([12, 0]);
    expect(held.postings.has(missed)).toBe(true);
    // Only the chunk the load missed was read, with the terms the table holds now.
    expect(held.postings.documentFrequency('unlogged')).toBe(1);
    expect(held.postings.documentFrequency('heron')).toBe(11);

    // A chunk moved and then deleted is read again, and goes.
    await addDocuments(workspaceId, [{ texts: ['egret on the mudflat'], vectors: [unit(230)] }]);
    while ((await index.mergeIntoGraph(5)) > 0);
    const [egret] = await db.prisma.chunk.findMany({ where: { content: 'egret on the mudflat', document: { workspaceId } }, select: { id: true } });
    await db.prisma.$executeRaw`DELETE FROM chunk_index WHERE chunk_id = ${egret!.id}::uuid`;
    await catchUpWorkspace(db.prisma, undefined, workspaceId, held);
    expect(held.postings.has(egret!.id)).toBe(false);
    expect(held.postings.chunkCount).toBe(12);
  });

  it("ranks a large workspace's search by vectors alone while its catch-up outlasts the wait, finding the newest chunk by its vector", async () => {
    const texts = Array.from({ length: 1_200 }, (_, i) => `granite quarry ledger ${i}`);
    const { workspaceId } = await workspaceWith('catching-up', [{ texts, vectors: texts.map((_, i) => unit(120 + (i % 40), 0.001 * i)) }]);
    const reader = await openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 64 * 1024 * 1024, loadAhead: false });
    try {
      // Held: a search by keywords alone waits for the load.
      expect(await keywordTexts(reader, workspaceId, 'ledger 7')).toContain('granite quarry ledger 7');
      const [basalt] = await addDocuments(workspaceId, [{ texts: ['granite and basalt ledger'], vectors: [unit(300)] }]);
      // Another session holds the change log while the search begins: its catch-up cannot end within the wait.
      const release = await holdTableLocked(db, 'chunk_index_log');
      const search = reader.search({ workspaceIds: [workspaceId], vector: unit(300), terms: analyze('basalt ledger'), limit: 10, excludeDocumentIds: [] });
      await new Promise((resolve) => setTimeout(resolve, 600));
      await release();
      const caughtUpLater = await search;
      expect(caughtUpLater.keyword).toEqual([]);
      // The chunk outside the graph that the held side does not have yet is compared in the store.
      const [nearest] = caughtUpLater.vector;
      const chunk = await db.prisma.chunk.findUniqueOrThrow({ where: { id: nearest!.chunkId }, select: { documentId: true } });
      expect(chunk.documentId).toBe(basalt);
      // The catch-up went on without the search: the keyword side has the chunk once it ends.
      expect(await keywordTexts(reader, workspaceId, 'basalt')).toEqual(['granite and basalt ledger']);
    } finally {
      await reader.close();
    }
  }, 60_000);

  it('drops change-log rows only behind a cleanup mark older than the retention, and a reader behind it reloads', async () => {
    const { workspaceId } = await workspaceWith('log-cleanup', [{ texts: ['lantern light'], vectors: [unit(90)] }]);
    const logged = async () => {
      const [row] = await db.prisma.$queryRaw<{ count: bigint }[]>`SELECT count(*) AS count FROM chunk_index_log WHERE workspace_id = ${workspaceId}::uuid`;
      return Number(row!.count);
    };
    // A reader that holds the workspace from before the second document.
    const early = await openIndex();
    expect(await keywordTexts(early, workspaceId, 'lantern')).toEqual(['lantern light']);
    await addDocuments(workspaceId, [{ texts: ['lantern glow'], vectors: [unit(91)] }]);
    expect(await logged()).toBe(2);
    // The marks below must be past both rows' transactions.
    await untilHorizonPasses(workspaceId);
    await cleanChangeLog(db.prisma);
    expect(await logged()).toBe(2);
    // As if the marks made so far had been made a day ago: both rows go, the second unread by `early`.
    await db.prisma.$executeRaw`UPDATE chunk_index_log_marks SET marked_at = marked_at - interval '25 hours'`;
    await cleanChangeLog(db.prisma);
    expect(await logged()).toBe(0);
    expect((await keywordTexts(early, workspaceId, 'lantern')).sort()).toEqual(['lantern glow', 'lantern light']);
    const other = await openIndex();
    expect((await keywordTexts(other, workspaceId, 'lantern')).sort()).toEqual(['lantern glow', 'lantern light']);
    await other.close();
    await early.close();
  });
});

describe('the index saved to disk', () => {
  it("reads a large workspace's keyword postings back from disk at its next load, catches up with what changed since, and falls back to the store when they are no use", async () => {
    const directory = await mkdtemp(path.join(os.tmpdir(), 'kb-index-snapshots-'));
    const withSaves = () => openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 64 * 1024 * 1024, loadAhead: false, snapshotDirectory: directory });
    // 40 tags of letters only (the analyser splits a word from its digits): 'qaa', 'qba', ...
    const tag = (i: number) => `q${String.fromCharCode(97 + ((i % 40) % 26))}${String.fromCharCode(97 + Math.floor((i % 40) / 26))}`;
    const texts = Array.from({ length: 1_200 }, (_, i) => `${tag(i)} tide ledger ${i}`);
    const { workspaceId, documentIds } = await workspaceWith('saved', [
      { texts, vectors: texts.map((_, i) => unit(200 + (i % 40), 0.001 * i)) },
      { texts: ['zeppelin hangar'], vectors: [unit(250)] },
    ]);
    // A name of its own, as a parsed document has (the documents added later are named by their file).
    await db.prisma.document.update({ where: { id: documentIds[0]! }, data: { nameWords: 'Tide Ledger 2019' } });
    // Merged into the store's graph, as a settled workspace is: a load reads only the waiting chunks' rows in full.
    while ((await index.mergeIntoGraph(500)) > 0);
    const entry = path.join(directory, `${workspaceId}.json`);
    const savedFile = async () => (JSON.parse(await readFile(entry, 'utf8')) as { file: string }).file;
    const saved = async (unlike?: string) => {
      for (let waited = 0; waited < 20_000; waited += 50) {
        const file = await savedFile().catch(() => undefined);
        if (file !== undefined && file !== unlike) return file;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      throw new Error('no postings were saved');
    };
    const first = await withSaves();
    try {
      expect(await keywordTexts(first, workspaceId, 'zeppelin')).toEqual(['zeppelin hangar']);
      await saved();
    } finally {
      await first.close();
    }
    // Since the save: a document deleted and another added, both logged; and one chunk's terms
    // changed in place, which the log does not see, so only postings read from the store hold it.
    await db.prisma.document.delete({ where: { id: documentIds[1]! } });
    await addDocuments(workspaceId, [{ texts: ['quasar beacon'], vectors: [unit(251)] }]);
    const altered = await db.prisma.chunk.findFirstOrThrow({ where: { documentId: documentIds[0]!, chunkIndex: 3 }, select: { id: true } });
    await db.prisma.$executeRaw`UPDATE chunk_index SET terms = ${analyze('unlogged')}::text[], freqs = ARRAY[1] WHERE chunk_id = ${altered.id}::uuid`;
    const ranking = async (through: VectorIndex) =>
      (await through.search({ workspaceIds: [workspaceId], terms: analyze(tag(7)), limit: 40, excludeDocumentIds: [] })).keyword;

    const second = await withSaves();
    const fromStore = await openIndex();
    try {
      expect(await keywordTexts(second, workspaceId, 'unlogged')).toEqual([]);
      expect(await keywordTexts(fromStore, workspaceId, 'unlogged')).toHaveLength(1);
      expect(await keywordTexts(second, workspaceId, 'quasar')).toEqual(['quasar beacon']);
      expect(await keywordTexts(second, workspaceId, 'zeppelin')).toEqual([]);
      expect(await ranking(second)).toEqual(await ranking(fromStore));
      expect(await ranking(second)).toHaveLength(30);
      // The documents' names come back with the postings, and with the catch-up for the document added since.
      const found = await second.search({ workspaceIds: [workspaceId], terms: analyze(`quasar ${tag(7)}`), limit: 40, excludeDocumentIds: [] });
      const stored = await readBack(db.query, workspaceId, found.keyword.map((hit) => hit.chunkId));
      expect(new Set(stored.map((chunk) => chunk.documentName))).toEqual(new Set(['Tide Ledger 2019', '0.txt']));
      for (const chunk of stored) expect(found.documentOf!(chunk.id)).toEqual({ documentId: chunk.documentId, documentName: chunk.documentName });
    } finally {
      await second.close();
      await fromStore.close();
    }

    // Cut short (a full disk, or a copy interrupted): refused whole, read from the store, and saved again.
    const cut = await savedFile();
    await truncate(path.join(directory, cut), 1_000);
    const third = await withSaves();
    try {
      expect(await keywordTexts(third, workspaceId, 'unlogged')).toHaveLength(1);
      await saved(cut);
    } finally {
      await third.close();
    }
    expect(await readdir(directory)).not.toContain(cut);

    // Saved before the change log's cleanup went past them: of no use, so read from the store.
    await db.prisma.$executeRaw`UPDATE chunk_index SET terms = ${analyze('later')}::text[], freqs = ARRAY[1] WHERE chunk_id = ${altered.id}::uuid`;
    // The latest mark older than the retention is the one a catch-up compares with: this one, just past it.
    const [mark] = await db.prisma.$queryRaw<{ marked_at: string }[]>`
      INSERT INTO chunk_index_log_marks (marked_at, horizon) VALUES (now() - interval '24 hours 1 minute', pg_snapshot_xmax(pg_current_snapshot()))
      RETURNING marked_at::text`;
    const beforeFourth = await savedFile();
    const fourth = await withSaves();
    try {
      expect(await keywordTexts(fourth, workspaceId, 'later')).toHaveLength(1);
      await saved(beforeFourth);
    } finally {
      await fourth.close();
      await db.prisma.$executeRaw`DELETE FROM chunk_index_log_marks WHERE marked_at = ${mark!.marked_at}::timestamptz`;
    }

    // Saved at a horizon the store has not reached (a store put back from an older copy): read from the store.
    const entryText = JSON.parse(await readFile(entry, 'utf8')) as { horizon: string; file: string };
    await writeFile(entry, JSON.stringify({ ...entryText, horizon: '999999999999' }));
    await db.prisma.$executeRaw`UPDATE chunk_index SET terms = ${analyze('ahead')}::text[], freqs = ARRAY[1] WHERE chunk_id = ${altered.id}::uuid`;
    const fifth = await withSaves();
    try {
      expect(await keywordTexts(fifth, workspaceId, 'ahead')).toHaveLength(1);
      // Saved again before the directory is removed below.
      await saved(entryText.file);
    } finally {
      await fifth.close();
    }
    await db.prisma.workspace.delete({ where: { id: workspaceId } });
    await rm(directory, { recursive: true, force: true });
  }, 60_000);
  it("reads a large workspace's graph in memory back with its postings, applies what changed since, and builds it from the store when its file is not whole", async () => {
    const directory = await mkdtemp(path.join(os.tmpdir(), 'kb-index-snapshots-'));
    const backgroundWork = new BackgroundWork();
    // The saver every 100 ms, so that the graph, complete only after the load's save, is saved soon after.
    const withSaves = () =>
      openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 64 * 1024 * 1024, loadAhead: true, followLogEveryMs: 60_000, saveEveryMs: 100, vectorsInMemory: true, backgroundWork, snapshotDirectory: directory });
    const random = seeded(41);
    const randomVector = () => Float32Array.from({ length: model.dimensions }, () => random() * 2 - 1);
    const texts = Array.from({ length: 1_100 }, (_, i) => `graph tide ${i}`);
    const { workspaceId, documentIds } = await workspaceWith('saved-graph', [
      { texts, vectors: texts.map(randomVector) },
      { texts: ['zeppelin hangar'], vectors: [randomVector()] },
    ]);
    // Merged into the store's graph: a load reads the waiting chunks' rows in full, so only a merged
    // chunk's terms changed without a log row tell postings read back from postings read from the store.
    while ((await index.mergeIntoGraph(500)) > 0);
    const entry = path.join(directory, `${workspaceId}.json`);
    type Entry = { file: string; graph?: { file: string; ids: string } };
    const savedEntry = async () => JSON.parse(await readFile(entry, 'utf8')) as Entry;
    const graphSaved = async (unlike?: string) => {
      for (let waited = 0; waited < 30_000; waited += 50) {
        const graph = (await savedEntry().catch(() => undefined))?.graph?.file;
        if (graph !== undefined && graph !== unlike) return graph;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      throw new Error('no graph was saved');
    };
    const settled = () => vectorGraphWorkDone(backgroundWork, { limitMs: 30_000 });
    /** The nearest chunks by the graph in memory (Server-Timing says `graph`, not the store's `vector` statement). */
    const nearest = async (through: VectorIndex, vector: Float32Array) => {
      const timings = new ServerTimings();
      const { vector: hits } = await requestContext.run({ requestId: 'test', timings }, () => through.search({ workspaceIds: [workspaceId], vector, terms: [], limit: 5, excludeDocumentIds: [] }));
      expect((timings.header(0) ?? '').split(', ').map((part) => part.split(';')[0])).toContain('graph');
      return hits.map((hit) => hit.chunkId);
    };
    const chunkOf = (documentId: string, chunkIndex: number) => db.prisma.chunk.findFirstOrThrow({ where: { documentId, chunkIndex }, select: { id: true } }).then((chunk) => chunk.id);
    const [deleted, moved] = [await chunkOf(documentIds[1]!, 0), await chunkOf(documentIds[0]!, 5)];
    const zeppelinVector = (await db.prisma.$queryRaw<{ v: string }[]>`SELECT embedding::text AS v FROM chunk_index_fresh WHERE chunk_id = ${deleted}::uuid UNION ALL SELECT embedding::text FROM chunk_index WHERE chunk_id = ${deleted}::uuid`)[0]!.v;
    const asVector = (text: string) => Float32Array.from(JSON.parse(text) as number[]);

    const first = await withSaves();
    try {
      expect(await keywordTexts(first, workspaceId, 'zeppelin')).toEqual(['zeppelin hangar']);
      await settled();
      await graphSaved();
      expect(await nearest(first, asVector(zeppelinVector))).toContain(deleted);
    } finally {
      await first.close();
    }
    // Since the save: a document deleted and another added (both logged), and one chunk's vector
    // changed in place without a log row, which only a graph built from the store holds.
    await db.prisma.document.delete({ where: { id: documentIds[1]! } });
    const quasarVector = randomVector();
    const [quasarDocument] = await addDocuments(workspaceId, [{ texts: ['quasar beacon'], vectors: [quasarVector] }]);
    const quasar = await chunkOf(quasarDocument!, 0);
    const movedVector = randomVector();
    const unlogged = `[${Array.from(movedVector).join(',')}]`;
    await db.prisma.$executeRaw`UPDATE chunk_index SET embedding = ${unlogged}::vector WHERE chunk_id = ${moved}::uuid`;
    await db.prisma.$executeRaw`UPDATE chunk_index_fresh SET embedding = ${unlogged}::vector WHERE chunk_id = ${moved}::uuid`;

    const second = await withSaves();
    try {
      expect(await keywordTexts(second, workspaceId, 'quasar')).toEqual(['quasar beacon']);
      await settled();
      // Read back: the chunk changed without a log row keeps its saved vector in the graph.
      expect((await nearest(second, movedVector))[0]).not.toBe(moved);
      expect((await nearest(second, quasarVector))[0]).toBe(quasar);
      expect(await nearest(second, asVector(zeppelinVector))).not.toContain(deleted);
    } finally {
      await second.close();
    }

    // A byte of the graph's file changed: refused before USearch reads it, built from the store (which
    // has the changed vector), the postings still read back (a chunk's terms changed without a log
    // row are not found); then saved again.
    const damaged = await graphSaved();
    const damagedPath = path.join(directory, damaged);
    const bytes = await readFile(damagedPath);
    bytes[bytes.length >> 1] = bytes[bytes.length >> 1]! ^ 0xff;
    await writeFile(damagedPath, bytes);
    const termsChanged = await chunkOf(documentIds[0]!, 9);
    await db.prisma.$executeRaw`UPDATE chunk_index SET terms = ${analyze('unlogged')}::text[], freqs = ARRAY[1] WHERE chunk_id = ${termsChanged}::uuid`;
    await db.prisma.$executeRaw`UPDATE chunk_index_fresh SET terms = ${analyze('unlogged')}::text[], freqs = ARRAY[1] WHERE chunk_id = ${termsChanged}::uuid`;
    const third = await withSaves();
    try {
      expect(await keywordTexts(third, workspaceId, 'quasar')).toEqual(['quasar beacon']);
      expect(await keywordTexts(third, workspaceId, 'unlogged')).toEqual([]);
      await settled();
      expect((await nearest(third, movedVector))[0]).toBe(moved);
      await graphSaved(damaged);
    } finally {
      await third.close();
    }
    expect(await readdir(directory)).not.toContain(damaged);

    // A chunk's id in the graph's ids changed for another of the same length: refused by their CRC.
    const savedIds = (await savedEntry()).graph!;
    const idsPath = path.join(directory, savedIds.ids);
    const idsText = await readFile(idsPath);
    const at = idsText.indexOf(Buffer.from(moved));
    expect(at).toBeGreaterThan(0);
    idsText[at] = idsText[at] === 0x61 ? 0x62 : 0x61;
    await writeFile(idsPath, idsText);
    const fourth = await withSaves();
    try {
      await keywordTexts(fourth, workspaceId, 'quasar');
      await settled();
      expect((await nearest(fourth, movedVector))[0]).toBe(moved);
      await graphSaved(savedIds.file);
    } finally {
      await fourth.close();
    }
    expect(await readdir(directory)).not.toContain(savedIds.ids);
    await db.prisma.workspace.delete({ where: { id: workspaceId } });
    await rm(directory, { recursive: true, force: true });
  }, 90_000);
});

describe('the keyword memory budget, against one workspace larger than all of it', () => {
  it('keeps the workspace searched last, and drops at once one that the follower loaded ahead past the budget', async () => {
    const big = await workspaceWith('budget-big', [{ texts: ['heron marsh reeds', 'heron nest'], vectors: [unit(190), unit(191)] }]);
    const backgroundWork = new BackgroundWork();
    // One byte: any workspace is over it. The follower reads the log every 100 ms.
    const tight = await openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 1, backgroundWork, followLogEveryMs: 100 });
    const loads = () => backgroundWork.states().find((state) => state.task === 'keyword_load')?.runs ?? 0;
    const settle = () => new Promise((resolve) => setTimeout(resolve, 600));
    try {
      expect((await keywordTexts(tight, big.workspaceId, 'heron')).sort()).toEqual(['heron marsh reeds', 'heron nest']);
      expect(loads()).toBe(1);
      // A write elsewhere makes the follower read the log, and a workspace it loads ahead is over the budget at once.
      const other = await workspaceWith('budget-other', [{ texts: ['egret shallows'], vectors: [unit(192)] }]);
      await settle();
      const loadsAhead = loads() - 1;
      expect(loadsAhead).toBeLessThanOrEqual(1);
      await addDocuments(other.workspaceId, [{ texts: ['egret wading'], vectors: [unit(193)] }]);
      await settle();
      // The searched workspace was kept through the follower's readings; the other is not loaded again for its writes.
      expect(await keywordTexts(tight, big.workspaceId, 'marsh')).toEqual(['heron marsh reeds']);
      expect(loads()).toBe(1 + loadsAhead);
      // Searched, the other is loaded and kept, and the first is dropped for it.
      expect((await keywordTexts(tight, other.workspaceId, 'egret')).sort()).toEqual(['egret shallows', 'egret wading']);
      expect(await keywordTexts(tight, big.workspaceId, 'nest')).toEqual(['heron nest']);
      expect(loads()).toBe(3 + loadsAhead);
    } finally {
      await tight.close();
    }
  }, 60_000);
});
