import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.js';
import { openDatabase, type Database } from '../../db/database.js';
import { BackgroundWork } from '../../observability/background-work.js';
import { requestContext, ServerTimings } from '../../observability/request-context.js';
import { unloaded } from './held-workspace.js';
import { buildGraph } from './mirror-sync.js';
import { openPgvectorIndex } from './pgvector-index.js';
import { VectorGraph } from './vector-graph.js';
import type { IndexSearch, VectorIndex } from './vector-index.js';
import { dimensions, indexedDocuments, model, seeded } from '../../../test/support/vector-index.js';
import { migratedDataDir, vectorGraphWorkDone } from '../../../test/support/server.js';

const random = seeded(27);
const randomVector = () => {
  const vector = new Float32Array(dimensions);
  for (let i = 0; i < dimensions; i += 1) vector[i] = random() * 2 - 1;
  return vector;
};

// Through the pgvector index on the leg's store: a graph is built after a workspace's load, then
// searched instead of the store's graph, and follows writes and deletions through the change log.
describe('the pgvector index with its vectors in memory', () => {
  let dataDir: string;
  let db: Database;
  let inMemory: VectorIndex;
  let inStore: VectorIndex;
  let userId: string;
  const backgroundWork = new BackgroundWork();
  const { workspaceWith, addDocuments } = indexedDocuments(() => ({ db, userId, index: inStore }));

  beforeAll(async () => {
    dataDir = await migratedDataDir('kb-vector-graph-');
    db = await openDatabase(loadConfig({ ...process.env, KB_DATA_DIR: dataDir }));
    inStore = await openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 64 << 20, loadAhead: false });
    inMemory = await openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 64 << 20, loadAhead: false, vectorsInMemory: true, backgroundWork });
    userId = (await db.prisma.user.create({ data: { email: `graph-${Math.random()}@example.com`, name: 'Graph' } })).id;
  }, 60_000);

  afterAll(async () => {
    await inMemory?.close();
    await inStore?.close();
    await db?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  const builds = () => backgroundWork.states().find((state) => state.task === 'vector_graph_build')!;
  const graphsBuilt = (runs: number) => vectorGraphWorkDone(backgroundWork, { runs, limitMs: 30_000 });
  /** Until no build or application of noted changes is under way. */
  const graphsSettled = () => vectorGraphWorkDone(backgroundWork, { limitMs: 30_000 });
  /** The search's hits, and the Server-Timing parts it recorded. */
  const searched = async (index: VectorIndex, request: IndexSearch) => {
    const timings = new ServerTimings();
    const result = await requestContext.run({ requestId: 'test', timings }, () => index.search(request));
    const parts = (timings.header(0) ?? '').split(', ').map((part) => part.split(';')[0]);
    return { ...result, parts };
  };

  it('answers from the graph once built, with the hits and scores of the store, and follows writes and deletions', async () => {
    const documents = Array.from({ length: 4 }, () => {
      const vectors = Array.from({ length: 40 }, randomVector);
      return { texts: vectors.map((_, i) => `tern ${i} over the shingle`), vectors };
    });
    const { workspaceId, documentIds } = await workspaceWith('graph', documents);
    const request = (vector: Float32Array): IndexSearch => ({ workspaceIds: [workspaceId], vector, terms: ['tern'], limit: 15, excludeDocumentIds: [] });

    const query = randomVector();
    const before = await searched(inMemory, request(query));
    expect(before.parts).toContain('vector');
    expect(before.parts).not.toContain('graph');
    await graphsBuilt(1);

    const fromGraph = await searched(inMemory, request(query));
    expect(fromGraph.parts).toContain('graph');
    expect(fromGraph.parts).not.toContain('vector');
    const fromStore = await searched(inStore, request(query));
    expect(fromGraph.vector.map((hit) => hit.chunkId)).toEqual(fromStore.vector.map((hit) => hit.chunkId));
    for (const [position, hit] of fromGraph.vector.entries()) expect(hit.score).toBeCloseTo(fromStore.vector[position]!.score, 5);
    expect(fromGraph.keyword).toEqual(fromStore.keyword);

    // Excluded documents, and a search by vector alone reading its best chunks along.
    const excluded = await inMemory.search({ ...request(query), excludeDocumentIds: [documentIds[0]!, documentIds[1]!] });
    expect(excluded.vector).toHaveLength(15);
    const allowed = new Set((await db.prisma.chunk.findMany({ where: { documentId: { in: documentIds.slice(2) } } })).map((chunk) => chunk.id));
    expect(excluded.vector.every((hit) => allowed.has(hit.chunkId))).toBe(true);
    const alone = await searched(inMemory, { ...request(query), terms: [], readTop: 5 });
    expect(alone.parts).toContain('graph');
    expect([...alone.chunks!.keys()].sort()).toEqual(alone.vector.slice(0, 5).map((hit) => hit.chunkId).sort());

    // A new document is found at once: through the store while the graph takes the change in the
    // background, then through the graph. A deleted one is gone at once, both ways.
    const near = randomVector();
    const [added] = await addDocuments(workspaceId, [{ texts: ['a tern nests on the shingle'], vectors: [near] }]);
    const addedChunk = await db.prisma.chunk.findFirstOrThrow({ where: { documentId: added } });
    const nearest = { chunkId: addedChunk.id, score: expect.closeTo(1, 5) };
    expect((await inMemory.search(request(near))).vector[0]).toEqual(nearest);
    await graphsSettled();
    const afterWrite = await searched(inMemory, request(near));
    expect(afterWrite.parts).toContain('graph');
    expect(afterWrite.vector[0]).toEqual(nearest);
    await db.prisma.document.delete({ where: { id: added! } });
    const expected = (await inStore.search(request(near))).vector.map((hit) => hit.chunkId);
    expect(expected).not.toContain(addedChunk.id);
    expect((await inMemory.search(request(near))).vector.map((hit) => hit.chunkId)).toEqual(expected);
    await graphsSettled();
    const afterDelete = await searched(inMemory, request(near));
    expect(afterDelete.parts).toContain('graph');
    expect(afterDelete.vector.map((hit) => hit.chunkId)).toEqual(expected);
  }, 60_000);

  it("misses no chunk that a merge moves into the store's graph while the graph in memory is built", async () => {
    const vectors = Array.from({ length: 30 }, randomVector);
    const { workspaceId } = await workspaceWith('graph-moves', [{ texts: vectors.map(() => 'avocet'), vectors }]);
    while ((await inStore.mergeIntoGraph!(1_000)) > 0);
    await addDocuments(workspaceId, [{ texts: vectors.map(() => 'stilt'), vectors: Array.from({ length: 30 }, randomVector) }]);
    const graph = new VectorGraph(dimensions);
    let merge: Promise<unknown> | undefined;
    // Once the build has taken in its first chunks, a merge moves every waiting chunk into the
    // store's graph before the build's next statement.
    await buildGraph(db.prisma, undefined, workspaceId, unloaded(), graph, () => {
      if (graph.size > 0) merge ??= (async () => { while ((await inStore.mergeIntoGraph!(1_000)) > 0); })();
      return true;
    });
    await merge;
    expect(graph.complete).toBe(true);
    expect(graph.size).toBe(60);
  }, 60_000);

  it('answers a search limited to some documents from the store', async () => {
    const vectors = Array.from({ length: 10 }, randomVector);
    const { workspaceId, documentIds } = await workspaceWith('graph-only', [{ texts: vectors.map(() => 'plover'), vectors }, { texts: vectors.map(() => 'plover'), vectors }]);
    const request: IndexSearch = { workspaceIds: [workspaceId], vector: vectors[0]!, terms: ['plover'], limit: 5, excludeDocumentIds: [] };
    const runsBefore = builds().runs;
    await inMemory.search(request);
    await graphsBuilt(runsBefore + 1);
    const limited = await searched(inMemory, { ...request, documentIds: [documentIds[1]!] });
    expect(limited.parts).toContain('vector');
    expect(limited.parts).not.toContain('graph');
    const inDocument = new Set((await db.prisma.chunk.findMany({ where: { documentId: documentIds[1] } })).map((chunk) => chunk.id));
    expect(limited.vector.length).toBe(5);
    expect(limited.vector.every((hit) => inDocument.has(hit.chunkId))).toBe(true);
  }, 60_000);
});
