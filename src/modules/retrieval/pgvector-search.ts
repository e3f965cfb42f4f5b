import { setImmediate as nextTurn } from 'node:timers/promises';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import { recordTiming, timedNow, timedPart } from '../../observability/request-context.js';
import { bm25 } from './analyzer.js';
import { nearestFresh } from './fresh-vectors.js';
import { heldDocuments, type MirroredWorkspace } from './held-workspace.js';
import type { StoreIndexMirror } from './pgvector-keywords.js';
import { readyChunks } from './stored-chunks.js';
import { rankBm25 } from './term-postings.js';
import type { VectorGraph } from './vector-graph.js';
import type { IndexHit, IndexSearch, IndexSearchResult, StoredChunk } from './vector-index.js';


/**
 * Chunks outside the graph compared exactly (in memory) per hit wanted: those whose sketches
 * score highest (fresh-vectors.ts). Measured with SciFact's queries over its 5,183 abstracts
 * (docs/retrieval.md): 8 per hit held 96 % of the exact 10 nearest and 99 % of the 100 nearest
 * (4 per hit: 91 % and 95 %). The nearest `limit` of them go to the store for their distances.
 */
const freshCandidatesPerHit = 8;

export const vectorLiteral = (vector: Float32Array) => `[${Array.from(vector).join(',')}]`;

/**
 * The store answers one statement at a time (PGlite has one connection), and the keyword side
 * ranks in this thread from postings in memory. So the sync of what is held in memory goes
 * first (one short statement, sent while the query is still being embedded), then the graph's
 * statement, and the chunks outside the graph are chosen and the keywords ranked while the store
 * works on it; a second short statement scores the chunks chosen. Ranked earlier, beside the
 * embedding, they slowed it by about as much as the overlap gained, on two cores (measured in
 * docs/retrieval.md). One side alone reads its best `readTop` chunks along. Where the workspaces
 * are held, the result names the documents of their chunks (`documentOf`), with their names.
 *
 * A vector-only search uses the sketches held in memory when its workspaces are held already,
 * and compares every chunk outside the graph in the store otherwise (it loads nothing).
 *
 * Where the workspaces' vectors are held in graphs in memory, complete (VectorGraph), the store's
 * graph is not asked at all (`searchGraphsInMemory`), unless the search is limited to some documents.
 */
export async function searchPgvector(prisma: PrismaClient, mirror: StoreIndexMirror, request: IndexSearch): Promise<IndexSearchResult> {
  const terms = [...new Set(request.terms ?? [])];
  const readTop = Math.min(request.readTop ?? 0, request.limit);
  const workspaceIds = [...request.workspaceIds];
  // A search with a vector side does not wait long for a large workspace's postings to load: it
  // is ranked by vectors alone meanwhile. A search by keywords alone has nothing else to rank by.
  const mirrored =
    terms.length === 0
      ? request.vector && mirror.mirroredIfHeld(workspaceIds)
      : request.vector
        ? mirror.mirroredUnlessLoading(workspaceIds)
        : mirror.mirrored(workspaceIds);
  // Each is awaited below; a failure of one must not go unhandled while the other is awaited.
  mirrored?.catch(() => undefined);
  Promise.resolve(request.vector).catch(() => undefined);
  const syncStarted = performance.now();
  const held = mirrored && (await timedPart('sync', mirrored));
  // Server-Timing says that the keyword side was left out, and how long the search waited first.
  if (!held && terms.length > 0) recordTiming('keywords_loading', performance.now() - syncStarted);
  const filter = { only: request.documentIds ? new Set(request.documentIds) : undefined, excluded: new Set(request.excludeDocumentIds) };
  const rank = (held: MirroredWorkspace[]) =>
    rankBm25(
      held.map((workspace) => workspace.postings),
      terms,
      request.limit,
      bm25,
      filter,
    );
  const keywordSide = held && terms.length > 0 ? held : undefined;
  const documentOf = held && heldDocuments(held);
  const graphs = request.vector && !request.documentIds ? completeGraphs(held) : undefined;
  if (graphs) return searchGraphsInMemory(prisma, request, graphs, keywordSide && (() => rank(keywordSide)), readTop, documentOf);
  if (!request.vector) {
    const keyword = keywordSide ? rank(keywordSide) : [];
    const best = keyword.slice(0, readTop).map((hit) => hit.chunkId);
    const chunks = best.length > 0 ? await prisma.$queryRaw<StoredChunk[]>(readyChunks(Prisma.sql`${best}::uuid[]`, request.workspaceIds)) : undefined;
    return { vector: [], keyword, ...(chunks && { chunks: new Map(chunks.map((chunk) => [chunk.id, chunk])) }), documentOf };
  }
  const query = await request.vector;
  if (!keywordSide) {
    const freshCandidates = held
      ? timedNow('fresh', () => nearestFresh(held.map((workspace) => workspace.fresh), query, request.limit, freshCandidatesPerHit * request.limit, filter))
      : undefined;
    const found = await timedPart('vector', nearestChunks(prisma, request, query, freshCandidates, readTop));
    return { vector: found.hits, keyword: [], ...(found.chunks && { chunks: found.chunks }), documentOf };
  }
  // The graph's statement leaves first. While the store works on it, this thread finds the
  // nearest chunks outside the graph (in memory, by sketch, then exactly), sends a second statement
  // for their distances, and ranks the keywords. Found before the graph's statement was sent,
  // the chunks outside the graph held every search up by their scoring: 16 ms at 91,000 waiting.
  const graph = timedPart('vector', nearestChunks(prisma, request, query, [], 0));
  graph.catch(() => undefined);
  await nextTurn();
  const candidates = timedNow('fresh', () =>
    nearestFresh(keywordSide.map((workspace) => workspace.fresh), query, request.limit, freshCandidatesPerHit * request.limit, filter),
  );
  const waiting = candidates.length > 0 ? timedPart('vector', distancesOf(prisma, request.workspaceIds, query, candidates)) : undefined;
  waiting?.catch(() => undefined);
  // One turn of the event loop: the statements leave for the store before the ranking takes the thread.
  await nextTurn();
  const keyword = timedNow('keywords', () => rank(keywordSide));
  const [inGraph, outsideGraph] = await Promise.all([graph, waiting ?? []]);
  return { vector: nearestOfBoth(inGraph.hits, outsideGraph, request.limit), keyword, documentOf };
}

/** The workspaces' graphs in memory, when every one is complete. */
function completeGraphs(held: MirroredWorkspace[] | undefined): VectorGraph[] | undefined {
  const graphs = held?.map((workspace) => workspace.graph);
  return graphs?.every((graph) => graph?.complete) ? (graphs as VectorGraph[]) : undefined;
}

/**
 * A search whose vector side is answered by the workspaces' graphs in memory (VectorGraph): the
 * keywords are ranked while the query is still being embedded, then the graphs are searched in
 * this thread (about 2 ms at 100,000 chunks), and one side alone reads its best `readTop`
 * chunks from the store.
 */
async function searchGraphsInMemory(
  prisma: PrismaClient,
  request: IndexSearch,
  graphs: VectorGraph[],
  rankKeywords: (() => IndexHit[]) | undefined,
  readTop: number,
  documentOf: IndexSearchResult['documentOf'],
): Promise<IndexSearchResult> {
  const keyword = rankKeywords ? timedNow('keywords', rankKeywords) : [];
  const query = await request.vector!;
  const filter = { excluded: new Set(request.excludeDocumentIds) };
  const vector = timedNow('graph', () =>
    graphs
      .flatMap((graph) => graph.nearest(query, request.limit, filter) ?? [])
      .sort((a, b) => b.score - a.score)
      .slice(0, request.limit),
  );
  if (rankKeywords || readTop === 0) return { vector, keyword, documentOf };
  const best = vector.slice(0, readTop).map((hit) => hit.chunkId);
  const chunks = best.length > 0 ? await timedPart('read', prisma.$queryRaw<StoredChunk[]>(readyChunks(Prisma.sql`${best}::uuid[]`, request.workspaceIds))) : [];
  return { vector, keyword, chunks: new Map(chunks.map((chunk) => [chunk.id, chunk])), documentOf };
}

/**
 * The scores of the chunks named, from the store (so they are the graph's scores to the last
 * digit), of those it still holds: outside the graph, or in it, when a merge moved them after the
 * graph's statement read it.
 */
function distancesOf(prisma: PrismaClient, workspaceIds: readonly string[], query: Float32Array, chunkIds: string[]): Promise<IndexHit[]> {
  const scored = (table: Prisma.Sql) => Prisma.sql`
    SELECT c.chunk_id::text AS "chunkId", 1 - (c.embedding <=> q.vector) AS score
      FROM ${table} c, q
     WHERE c.chunk_id = ANY(${chunkIds}::uuid[]) AND c.workspace_id = ANY(${[...workspaceIds]}::uuid[])`;
  return prisma.$queryRaw<IndexHit[]>`
    WITH q AS (SELECT ${vectorLiteral(query)}::vector AS vector)
    ${scored(Prisma.sql`chunk_index_fresh`)} UNION ALL ${scored(Prisma.sql`chunk_index`)}`.then((rows) => rows.map(toHit));
}

/** The `limit` best of the graph's hits and those outside it, each chunk once. */
function nearestOfBoth(inGraph: IndexHit[], outsideGraph: IndexHit[], limit: number): IndexHit[] {
  const best = new Map<string, IndexHit>();
  for (const hit of [...inGraph, ...outsideGraph]) {
    const kept = best.get(hit.chunkId);
    if (!kept || hit.score > kept.score) best.set(hit.chunkId, hit);
  }
  return [...best.values()].sort((a, b) => b.score - a.score).slice(0, limit);
}

/**
 * The nearest chunks, and the stored chunks of the best `readTop` of them. Of the chunks outside
 * the graph, those in `freshCandidates` are compared, or all when it is undefined.
 */
async function nearestChunks(
  prisma: PrismaClient,
  request: IndexSearch,
  query: Float32Array,
  freshCandidates: string[] | undefined,
  readTop: number,
): Promise<{ hits: IndexHit[]; chunks?: Map<string, StoredChunk> }> {
  const nearest = Prisma.sql`
    SELECT chunk_id, score
      FROM chunk_index_nearest(${[...request.workspaceIds]}::uuid[], ${vectorLiteral(query)}::vector, ${request.limit}::integer,
                               ${request.documentIds ? [...request.documentIds] : null}::uuid[], ${[...request.excludeDocumentIds]}::uuid[],
                               ${freshCandidates ?? null}::uuid[])`;
  if (readTop === 0) {
    const rows = await prisma.$queryRaw<IndexHit[]>`SELECT chunk_id::text AS "chunkId", score FROM (${nearest}) AS nearest ORDER BY score DESC`;
    return { hits: rows.map(toHit) };
  }
  // The hits (score set), then the chunks read (content set), in one result.
  const rows = await prisma.$queryRaw<(StoredChunk & { score: number | null })[]>`
    WITH nearest AS MATERIALIZED (${nearest})
    SELECT n.chunk_id::text AS id, n.score, NULL::uuid::text AS "documentId", NULL::integer AS "chunkIndex", NULL::text AS content, NULL::jsonb AS metadata, NULL::text AS filename,
           NULL::text AS "documentName"
      FROM nearest n
    UNION ALL
    SELECT r.id, NULL, r."documentId", r."chunkIndex", r.content, r.metadata, r.filename, r."documentName"
      FROM (${readyChunks(Prisma.sql`ARRAY(SELECT chunk_id FROM nearest ORDER BY score DESC LIMIT ${readTop})`, request.workspaceIds)}) AS r`;
  const hits: IndexHit[] = [];
  const chunks = new Map<string, StoredChunk>();
  for (const { score, ...chunk } of rows) {
    if (score !== null) hits.push({ chunkId: chunk.id, score: Number(score) });
    else chunks.set(chunk.id, chunk);
  }
  hits.sort((a, b) => b.score - a.score);
  return { hits, chunks };
}

const toHit = (row: IndexHit): IndexHit => ({ chunkId: row.chunkId, score: Number(row.score) });
