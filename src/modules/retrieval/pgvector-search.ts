import { setImmediate as nextTurn } from 'node:timers/promises';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import { recordTiming, timedNow, timedPart } from '../../observability/request-context.js';
import { bm25 } from './analyzer.js';
import { nearestFresh } from './fresh-vectors.js';
import type { MirroredWorkspace } from './held-workspace.js';
import type { StoreIndexMirror } from './pgvector-keywords.js';
import { readyChunks } from './stored-chunks.js';
import { rankBm25 } from './term-postings.js';
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
 * first (one short statement, sent while the query is still being embedded), then the vector
 * statement, and the keywords are ranked while the store works on it. Ranked earlier, beside the
 * embedding, they slowed it by about as much as the overlap gained, on two cores (measured in
 * docs/retrieval.md). One side alone reads its best `readTop` chunks along.
 *
 * A vector-only search uses the sketches held in memory when its workspaces are held already,
 * and compares every chunk outside the graph in the store otherwise (it loads nothing).
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
  if (!request.vector) {
    const keyword = keywordSide ? rank(keywordSide) : [];
    const best = keyword.slice(0, readTop).map((hit) => hit.chunkId);
    const chunks = best.length > 0 ? await prisma.$queryRaw<StoredChunk[]>(readyChunks(Prisma.sql`${best}::uuid[]`, request.workspaceIds)) : undefined;
    return { vector: [], keyword, ...(chunks && { chunks: new Map(chunks.map((chunk) => [chunk.id, chunk])) }) };
  }
  const query = await request.vector;
  const freshCandidates = held
    ? timedNow('fresh', () => nearestFresh(held.map((workspace) => workspace.fresh), query, request.limit, freshCandidatesPerHit * request.limit, filter))
    : undefined;
  const nearest = timedPart('vector', nearestChunks(prisma, request, query, freshCandidates, keywordSide ? 0 : readTop));
  nearest.catch(() => undefined);
  let keyword: IndexHit[] = [];
  if (keywordSide) {
    // One turn of the event loop: the vector statement leaves for the store before the ranking takes the thread.
    await nextTurn();
    keyword = timedNow('keywords', () => rank(keywordSide));
  }
  const found = await nearest;
  return { vector: found.hits, keyword, ...(found.chunks && { chunks: found.chunks }) };
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
