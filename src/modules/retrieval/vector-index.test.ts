import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.js';
import { openDatabase, type Database } from '../../db/database.js';
import { analyze } from './analyzer.js';
import { openElasticsearchIndex } from './elasticsearch-index.js';
import { bm25, openPgvectorIndex } from './pgvector-index.js';
import type { VectorIndex } from './vector-index.js';

// The index of the matrix leg: Elasticsearch (in an index of this test's own, so BM25's corpus
// statistics are this test's alone), or pgvector in the store: PostgreSQL when the leg has one
// with pgvector, else the embedded store (the Elasticsearch leg's PostgreSQL has no pgvector).
const elasticsearchUrl = process.env.ELASTICSEARCH_URL || undefined;
const indexName = `kb_test_${Math.random().toString(36).slice(2)}`;
let dataDir: string;
let db: Database;
let index: VectorIndex;
let userId: string;

const dimensions = 384;
const model = { model: 'bge-small-en-v1.5-q', dimensions };

/** A unit vector pointing mostly along `axis`, tilted by `tilt` towards axis + 1. */
function unit(axis: number, tilt = 0): Float32Array {
  const vector = new Float32Array(dimensions);
  vector[axis] = Math.cos(tilt);
  vector[(axis + 1) % dimensions] = Math.sin(tilt);
  return vector;
}

/** Every text indexed so far: Elasticsearch's BM25 statistics cover the whole index. */
const indexedTexts: string[] = [];

async function workspaceWith(name: string, documents: { texts: string[]; vectors: Float32Array[] }[]) {
  const prisma = db.prisma;
  const workspace = await prisma.workspace.create({ data: { userId, name, nameKey: `${name}-${Math.random()}` } });
  const documentIds: string[] = [];
  for (const [position, document] of documents.entries()) {
    const row = await prisma.document.create({
      data: { workspaceId: workspace.id, filename: `${position}.txt`, contentType: 'text/plain', sizeBytes: 1, sha256: `${Math.random()}`, status: 'ready' },
    });
    documentIds.push(row.id);
    indexedTexts.push(...document.texts);
    const chunks = await prisma.chunk.createManyAndReturn({
      data: document.texts.map((content, chunkIndex) => ({ documentId: row.id, chunkIndex, content, tokenCount: 1 })),
    });
    await index.upsert(
      chunks.map((chunk) => ({
        chunkId: chunk.id,
        documentId: row.id,
        workspaceId: workspace.id,
        embedding: document.vectors[chunk.chunkIndex]!,
        terms: analyze(chunk.content),
      })),
    );
  }
  return { workspaceId: workspace.id, documentIds };
}

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'kb-pgvector-'));
  const config = loadConfig({ ...process.env, KB_DATA_DIR: dataDir, ...(process.env.ELASTICSEARCH_URL && { DATABASE_URL: '' }) });
  db = await openDatabase(config);
  index = elasticsearchUrl
    ? await openElasticsearchIndex(elasticsearchUrl, model, { timeoutMs: 10_000, indexName })
    : await openPgvectorIndex(db.prisma, model);
  userId = (await db.prisma.user.create({ data: { email: `pgvector-${Math.random()}@example.com`, name: 'Index' } })).id;
}, 60_000);

afterAll(async () => {
  if (elasticsearchUrl) await index?.reset(model).then(() => fetch(`${elasticsearchUrl}/${indexName}`, { method: 'DELETE' }));
  await index?.close();
  await db?.close();
  await rm(dataDir, { recursive: true, force: true });
});

describe(`the ${elasticsearchUrl ? 'Elasticsearch' : 'pgvector'} index`, () => {
  it('fills top k from a small workspace when a large one holds nearer vectors', async () => {
    // 300 vectors almost on the query's axis elsewhere, 20 further off in the workspace searched.
    await workspaceWith('crowd', [{ texts: Array.from({ length: 300 }, (_, i) => `crowd ${i}`), vectors: Array.from({ length: 300 }, (_, i) => unit(0, 0.001 * i)) }]);
    const small = await workspaceWith('small', [{ texts: Array.from({ length: 20 }, (_, i) => `small ${i}`), vectors: Array.from({ length: 20 }, (_, i) => unit(0, 0.5 + 0.01 * i)) }]);
    const { vector } = await index.search({ workspaceIds: [small.workspaceId], vector: unit(0), limit: 10, excludeDocumentIds: [] });
    expect(vector).toHaveLength(10);
    const scores = vector.map((hit) => hit.score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
    expect(scores[0]).toBeCloseTo(Math.cos(0.5), 5);
    const all = await index.search({ workspaceIds: [small.workspaceId], vector: unit(0), limit: 50, excludeDocumentIds: [] });
    expect(all.vector).toHaveLength(20);
  });

  it('ranks keywords by BM25 exactly as the formula gives', async () => {
    const texts = ['apple banana apple', 'banana cherry', 'cherry cherry cherry date elderberry fig', 'grape'];
    const { workspaceId, documentIds } = await workspaceWith('bm25', [{ texts, vectors: texts.map((_, i) => unit(i + 10)) }]);
    const query = analyze('apple cherry');
    const { keyword } = await index.search({ workspaceIds: [workspaceId], terms: query, limit: 10, excludeDocumentIds: [] });
    // pgvector counts BM25's corpus over the workspaces searched, Elasticsearch over its index.
    const corpus = (index.kind === 'elasticsearch' ? indexedTexts : texts).map((text) => analyze(text));
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
      expect(hit.score).toBeCloseTo(expected[rank]!.score, index.kind === 'elasticsearch' ? 5 : 9);
    });
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
    // The store's cascade removes pgvector rows; Elasticsearch's go by the index_delete job's calls.
    await db.prisma.document.delete({ where: { id: first } });
    if (index.kind === 'elasticsearch') await index.deleteDocument(first);
    expect(await index.countByDocument(workspaceId)).toEqual(new Map([[second, 1], [third, 1]]));
    const after = await search({});
    expect(await chunkDocument(after.vector)).toEqual([second, third].sort());
    await db.prisma.workspace.delete({ where: { id: workspaceId } });
    if (index.kind === 'elasticsearch') await index.deleteWorkspace(workspaceId);
    expect((await index.countByDocument(workspaceId)).size).toBe(0);
  });
});
