import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.js';
import { openDatabase, type Database } from '../../db/database.js';
import { analyze, bm25 } from './analyzer.js';
import { openElasticsearchIndex } from './elasticsearch-index.js';
import { openPgvectorIndex } from './pgvector-index.js';
import type { VectorIndex } from './vector-index.js';
import { dropElasticsearchIndexes } from '../../../test/support/elasticsearch.js';
import { indexedDocuments, model, unit } from '../../../test/support/vector-index.js';
import { createOwnDatabase, migratedDataDir } from '../../../test/support/server.js';

// The contract every index keeps, over each index this leg has: pgvector in the leg's store (the
// embedded one, or PostgreSQL with pgvector; the Elasticsearch leg's PostgreSQL has none, so the
// embedded one there), and Elasticsearch where the leg has it, in an index of this file's own so
// that BM25's statistics are this file's alone. Where indexes differ the tests read the index's
// traits, never its kind; what only one index does is tested beside it (pgvector-index.test.ts).
const elasticsearchUrl = process.env.ELASTICSEARCH_URL || undefined;

type Backend = {
  name: string;
  /** Opens the index, or another process's view of the same one. */
  open(db: Database): Promise<VectorIndex>;
  drop(): Promise<void>;
};

function elasticsearchBackend(url: string): Backend {
  const index = `kb_test_${Math.random().toString(36).slice(2)}`;
  return {
    name: 'Elasticsearch',
    open: () => openElasticsearchIndex({ nodes: [url], index, shards: 1, replicas: 0, sniff: false }, model, { timeoutMs: 10_000 }),
    drop: () => dropElasticsearchIndexes(url, index),
  };
}

const backends: Backend[] = [
  { name: 'pgvector', open: (db) => openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 64 * 1024 * 1024 }), drop: async () => {} },
  ...(elasticsearchUrl ? [elasticsearchBackend(elasticsearchUrl)] : []),
];

let dataDir: string;
// On PostgreSQL a database of its own: a test here empties the index's tables as `kb reindex`
// does, which would pull them from under the other files of the leg sharing the server.
let ownDatabase: Awaited<ReturnType<typeof createOwnDatabase>> | undefined;
let db: Database;
let userId: string;

beforeAll(async () => {
  dataDir = await migratedDataDir('kb-index-');
  const postgresUrl = (!elasticsearchUrl && process.env.DATABASE_URL) || undefined;
  ownDatabase = postgresUrl ? await createOwnDatabase(postgresUrl) : undefined;
  db = await openDatabase(loadConfig({ ...process.env, KB_DATA_DIR: dataDir, DATABASE_URL: ownDatabase?.url ?? '' }));
  userId = (await db.prisma.user.create({ data: { email: `index-${Math.random()}@example.com`, name: 'Index' } })).id;
}, 60_000);

afterAll(async () => {
  await db?.close();
  await ownDatabase?.drop();
  await rm(dataDir, { recursive: true, force: true });
});

describe.each(backends)('the $name index', (backend) => {
  let index: VectorIndex;
  const { indexedTexts, addDocuments, workspaceWith, keywordTexts } = indexedDocuments(() => ({ db, userId, index }));
  const openIndex = () => backend.open(db);

  beforeAll(async () => {
    index = await openIndex();
  }, 60_000);

  afterAll(async () => {
    await index?.close();
    await backend.drop();
  });

  it('fills top k from a small workspace when a large one holds nearer vectors', async () => {
    // 300 vectors almost on the query's axis elsewhere, 20 further off in the workspace searched.
    await workspaceWith('crowd', [{ texts: Array.from({ length: 300 }, (_, i) => `crowd ${i}`), vectors: Array.from({ length: 300 }, (_, i) => unit(0, 0.001 * i)) }]);
    const small = await workspaceWith('small', [{ texts: Array.from({ length: 20 }, (_, i) => `small ${i}`), vectors: Array.from({ length: 20 }, (_, i) => unit(0, 0.5 + 0.01 * i)) }]);
    // pgvector: first outside the graph (chosen by sketch, compared exactly), then merged into it.
    for (const round of [0, 1]) {
      if (round === 1) while (((await index.mergeIntoGraph?.(500)) ?? 0) > 0);
      const { vector } = await index.search({ workspaceIds: [small.workspaceId], vector: unit(0), limit: 10, excludeDocumentIds: [] });
      expect(vector).toHaveLength(10);
      const scores = vector.map((hit) => hit.score);
      expect(scores).toEqual([...scores].sort((a, b) => b - a));
      expect(scores[0]).toBeCloseTo(Math.cos(0.5), 5);
      const all = await index.search({ workspaceIds: [small.workspaceId], vector: unit(0), limit: 50, excludeDocumentIds: [] });
      expect(all.vector).toHaveLength(20);
    }
    expect((await index.graphBacklog?.()) ?? 0).toBe(0);
  });

  it('ranks keywords by BM25 exactly as the formula gives', async () => {
    const texts = ['apple banana apple', 'banana cherry', 'cherry cherry cherry date elderberry fig', 'grape'];
    const { workspaceId, documentIds } = await workspaceWith('bm25', [{ texts, vectors: texts.map((_, i) => unit(i + 10)) }]);
    const query = analyze('apple cherry');
    const { keyword } = await index.search({ workspaceIds: [workspaceId], terms: query, limit: 10, excludeDocumentIds: [] });
    const corpus = (index.traits.keywordStatistics === 'whole_index' ? indexedTexts : texts).map((text) => analyze(text));
    const documents = texts.map((text) => analyze(text));
    const averageLength = corpus.reduce((sum, terms) => sum + terms.length, 0) / corpus.length;
    const expected = documents
      .map((terms, position) => {
        let score = 0;
        for (const term of new Set(query)) {
          const tf = terms.filter((t) => t === term).length;
          if (tf === 0) continue;
          const df = corpus.filter((other) => other.includes(term)).length;
          const idf = Math.log(1 + (corpus.length - df + 0.5) / (df + 0.5));
          score += (idf * tf * (bm25.k1 + 1)) / (tf + bm25.k1 * (1 - bm25.b + (bm25.b * terms.length) / averageLength));
        }
        return { position, score };
      })
      .filter((row) => row.score > 0)
      .sort((a, b) => b.score - a.score);
    expect(keyword).toHaveLength(expected.length);
    const chunks = await db.prisma.chunk.findMany({ where: { documentId: documentIds[0] }, select: { id: true, chunkIndex: true } });
    const indexOf = new Map(chunks.map((chunk) => [chunk.id, chunk.chunkIndex]));
    keyword.forEach((hit, rank) => {
      expect(indexOf.get(hit.chunkId)).toBe(expected[rank]!.position);
      // Lucene stores lengths in a lossy byte, exact for short texts like these.
      expect(hit.score).toBeCloseTo(expected[rank]!.score, index.traits.scorePrecision === 'single' ? 5 : 9);
    });
  });

  it('reads the best hits\' stored chunks along with a one-sided search when it lives in the store, of ready documents only', async () => {
    // Chunk i points at the query tilted by 0.1 i: vector order 0, 1, 2, ...; the word "zircon"
    // is in the last two chunks only. A document not ready holds a chunk near the query with the
    // word: a hit on both sides (the service excludes such documents from the search itself).
    const texts = ['alpha one', 'alpha two', 'alpha three', 'alpha four', 'zircon five', 'zircon zircon six'];
    const { workspaceId, documentIds } = await workspaceWith('read-along', [{ texts, vectors: texts.map((_, i) => unit(200, 0.1 * i)) }]);
    const [otherDocument] = await addDocuments(workspaceId, [{ texts: ['zircon zircon zircon'], vectors: [unit(200, 0.05)] }]);
    await db.prisma.document.update({ where: { id: otherDocument! }, data: { status: 'processing' } });
    const base = { workspaceIds: [workspaceId], limit: 10, readTop: 3, excludeDocumentIds: [] };
    const readContents = (result: { chunks?: ReadonlyMap<string, { content: string }> }) => [...(result.chunks?.values() ?? [])].map((chunk) => chunk.content).sort();
    const embeddedLater = () => new Promise<Float32Array>((resolve) => setTimeout(() => resolve(unit(200)), 50));

    const vectorOnly = await index.search({ ...base, vector: embeddedLater() });
    const keywordOnly = await index.search({ ...base, terms: analyze('zircon') });
    const both = await index.search({ ...base, terms: analyze('zircon'), vector: embeddedLater() });
    // The best three of each side hold the pending chunk; the hits are the same with the vector at hand.
    expect(vectorOnly.vector).toHaveLength(7);
    expect(keywordOnly.keyword).toHaveLength(3);
    expect(both.vector).toEqual(vectorOnly.vector);
    expect(both.keyword).toEqual(keywordOnly.keyword);
    expect((await index.search({ ...base, terms: analyze('zircon'), vector: unit(200) })).keyword).toEqual(keywordOnly.keyword);
    if (!index.traits.readsAlong) {
      // Nothing is read along; the service reads every result from the store.
      for (const result of [vectorOnly, keywordOnly, both]) expect(result.chunks).toBeUndefined();
      return;
    }
    // Each side's best three but the pending one; with both sides nothing (the fused order is the caller's).
    expect(readContents(vectorOnly)).toEqual(['alpha one', 'alpha two']);
    expect(readContents(keywordOnly)).toEqual(['zircon five', 'zircon zircon six']);
    expect(both.chunks).toBeUndefined();
    expect(vectorOnly.chunks!.get(vectorOnly.vector[0]!.chunkId)).toEqual({
      id: vectorOnly.vector[0]!.chunkId, documentId: documentIds[0], chunkIndex: 0, content: 'alpha one', metadata: {}, filename: '0.txt', documentName: '0.txt',
    });
    // Without readTop nothing is read.
    expect((await index.search({ ...base, readTop: undefined, vector: unit(200) })).chunks).toBeUndefined();
    expect((await index.search({ ...base, readTop: undefined, terms: analyze('zircon') })).chunks).toBeUndefined();
  });

  it('honours document filters and exclusions, counts per document, and loses rows with their chunks', async () => {
    const { workspaceId, documentIds } = await workspaceWith('filters', [
      { texts: ['solar panels on roofs'], vectors: [unit(50)] },
      { texts: ['solar wind and comets'], vectors: [unit(50, 0.1)] },
      { texts: ['solar eclipse timing'], vectors: [unit(50, 0.2)] },
    ]);
    const [first, second, third] = documentIds as [string, string, string];
    const search = (extra: { documentIds?: string[]; excludeDocumentIds?: string[] }) =>
      index.search({ workspaceIds: [workspaceId], vector: unit(50), terms: analyze('solar'), limit: 10, excludeDocumentIds: [], ...extra });
    const chunkDocument = async (hits: { chunkId: string }[]) =>
      (await db.prisma.chunk.findMany({ where: { id: { in: hits.map((hit) => hit.chunkId) } }, select: { documentId: true } })).map((chunk) => chunk.documentId).sort();
    const only = await search({ documentIds: [second] });
    expect(await chunkDocument(only.vector)).toEqual([second]);
    expect(await chunkDocument(only.keyword)).toEqual([second]);
    const without = await search({ excludeDocumentIds: [first, third] });
    expect(await chunkDocument(without.vector)).toEqual([second]);
    expect(await chunkDocument(without.keyword)).toEqual([second]);
    expect(await index.countByDocument(workspaceId)).toEqual(new Map([[first, 1], [second, 1], [third, 1]]));
    // Entries outside the store go by the calls of the index_delete job the deletion queues.
    await db.prisma.document.delete({ where: { id: first } });
    if (!index.traits.deletesWithStore) await index.deleteDocument(first);
    expect(await index.countByDocument(workspaceId)).toEqual(new Map([[second, 1], [third, 1]]));
    const after = await search({});
    expect(await chunkDocument(after.vector)).toEqual([second, third].sort());
    await db.prisma.workspace.delete({ where: { id: workspaceId } });
    if (!index.traits.deletesWithStore) await index.deleteWorkspace(workspaceId);
    expect((await index.countByDocument(workspaceId)).size).toBe(0);
  });
  it('keeps another process current: chunks one adds or deletes are found or gone in the other', async () => {
    const other = await openIndex();
    try {
      const { workspaceId, documentIds } = await workspaceWith('two-processes', [{ texts: ['harbour cranes unload ships'], vectors: [unit(70)] }]);
      expect(await keywordTexts(other, workspaceId, 'harbour')).toEqual(['harbour cranes unload ships']);
      await addDocuments(workspaceId, [{ texts: ['harbour pilots guide ships', 'tugboats in the harbour harbour'], vectors: [unit(71), unit(72)] }]);
      const three = ['harbour cranes unload ships', 'harbour pilots guide ships', 'tugboats in the harbour harbour'];
      expect((await keywordTexts(other, workspaceId, 'harbour')).sort()).toEqual(three);
      expect((await keywordTexts(index, workspaceId, 'harbour')).sort()).toEqual(three);
      await db.prisma.document.delete({ where: { id: documentIds[0]! } });
      if (!index.traits.deletesWithStore) await index.deleteDocument(documentIds[0]!);
      expect((await keywordTexts(other, workspaceId, 'harbour')).sort()).toEqual(three.slice(1));
      expect((await keywordTexts(index, workspaceId, 'harbour')).sort()).toEqual(three.slice(1));
      await addDocuments(workspaceId, [{ texts: ['harbour master office'], vectors: [unit(73)] }], other);
      expect(await keywordTexts(index, workspaceId, 'office')).toEqual(['harbour master office']);
      expect(await keywordTexts(other, workspaceId, 'office')).toEqual(['harbour master office']);
    } finally {
      await other.close();
    }
  });

  it('replaces a chunk written again with other terms and vector (a renamed document), here and in another process', async () => {
    const other = await openIndex();
    try {
      const { workspaceId, documentIds } = await workspaceWith('rewritten', [{ texts: ['notes: the mill pond holds carp'], vectors: [unit(80)] }]);
      expect(await keywordTexts(other, workspaceId, 'notes carp')).toEqual(['notes: the mill pond holds carp']);
      const [chunk] = await db.prisma.chunk.findMany({ where: { documentId: documentIds[0]! } });
      await index.upsert([{ chunkId: chunk!.id, documentId: documentIds[0]!, workspaceId, embedding: unit(81), terms: analyze('zebrafish survey: the mill pond holds carp') }]);
      for (const through of [index, other]) {
        expect(await keywordTexts(through, workspaceId, 'zebrafish')).toEqual([chunk!.content]);
        expect(await keywordTexts(through, workspaceId, 'notes')).toEqual([]);
        const { vector } = await through.search({ workspaceIds: [workspaceId], vector: unit(81), limit: 1, excludeDocumentIds: [] });
        expect(vector.map((hit) => [hit.chunkId, Math.round(hit.score * 1000) / 1000])).toEqual([[chunk!.id, 1]]);
      }
    } finally {
      await other.close();
    }
  });

  it('serves nothing a reindex by another process emptied, then what is written after it', async () => {
    const { workspaceId } = await workspaceWith('reindexed', [{ texts: ['quartz crystal'], vectors: [unit(95)] }]);
    expect(await keywordTexts(index, workspaceId, 'quartz')).toEqual(['quartz crystal']);
    const other = await openIndex();
    try {
      await other.reset(model);
    } finally {
      await other.close();
    }
    expect(await keywordTexts(index, workspaceId, 'quartz')).toEqual([]);
    await addDocuments(workspaceId, [{ texts: ['quartz again'], vectors: [unit(96)] }]);
    expect(await keywordTexts(index, workspaceId, 'quartz')).toEqual(['quartz again']);
  });
});
