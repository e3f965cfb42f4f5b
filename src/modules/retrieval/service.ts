import { AppError } from '../../errors.js';
import { requireUuid } from '../../ids.js';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import type { DirectQuery } from '../../db/database.js';
import type { BackgroundWork } from '../../observability/background-work.js';
import { timedPart } from '../../observability/request-context.js';
import { EmbedderError, type Embedder } from '../embeddings/embedder.js';
import { workspaceNotFound, workspacesSql, type Access } from '../../auth/policy.js';
import { queryTerms } from './analyzer.js';
import { documentPriorPool, withDocumentPrior } from './document-prior.js';
import { focusOf } from './query-focus.js';
import { fuseConvex, fusionDepth } from './fusion.js';
import { checkFilter, documentsMatching } from './metadata-filter.js';
import { checkSearchInput, namedWorkspaces, searchLimits, type SearchInput, type SearchMode } from './input.js';
import { readyChunks } from './stored-chunks.js';
import { IndexUnavailableError, type IndexHit, type IndexSearchResult, type StoredChunk, type VectorIndex } from './vector-index.js';

export type SearchResult = {
  documentId: string;
  filename: string;
  chunkIndex: number;
  content: string;
  score: number;
  metadata: unknown;
};

export type RetrievalDependencies = {
  prisma: PrismaClient;
  /** The store's reads that every search makes go this way. */
  query: DirectQuery;
  embedder: Embedder;
  index: VectorIndex;
  /** A search whose embedder or index does not answer in time is a 503. */
  timeoutMs: number;
  /** Searches run as foreground work: the service's own work on the store waits for them (see BackgroundWork). */
  storeWork?: Pick<BackgroundWork, 'foreground'>;
};

const asForeground = <T>(dependencies: RetrievalDependencies, work: () => Promise<T>) => (dependencies.storeWork ? dependencies.storeWork.foreground(work) : work());

/** Why the index cannot be searched with the configured model, or null when it can. */
export function modelMismatch({ embedder, index }: { embedder: Pick<Embedder, 'modelId' | 'dimensions'>; index: Pick<VectorIndex, 'builtWith'> }): string | null {
  const built = index.builtWith;
  if (built.model === embedder.modelId && built.dimensions === embedder.dimensions) return null;
  return (
    `the index was built with ${built.model} (${built.dimensions} dimensions) but the configured model is ` +
    `${embedder.modelId} (${embedder.dimensions} dimensions); run \`kb reindex\` to re-embed the documents with it, or configure the model the index was built with`
  );
}

/**
 * The workspaces named, once each in the order given, if the viewer may see every one (the first
 * that it may not is a 404, as findWorkspace reports it: policy.ts), with their documents that
 * are not ready: their chunks may be indexed already, but are not served. One statement: on the
 * embedded store each one waits its turn on the store's only connection.
 */
export async function searchScope(query: DirectQuery, viewer: Access, workspaceIds: readonly string[]): Promise<{ ids: string[]; notReady: string[] }> {
  const ids = [...new Set(workspaceIds.map((id) => requireUuid(id, 'workspace')))];
  const [row] = await query<{ visible: string[]; notReady: string[] }>(Prisma.sql`
    SELECT ARRAY(SELECT w.id::text FROM workspaces w WHERE ${workspacesSql('w', viewer, ids)}) AS visible,
           ARRAY(SELECT d.id::text FROM documents d JOIN workspaces w ON w.id = d.workspace_id
                  WHERE ${workspacesSql('w', viewer, ids)} AND d.status <> 'ready') AS "notReady"`);
  const visible = new Set(row?.visible ?? []);
  const missing = workspaceIds.find((id) => !visible.has(id.toLowerCase()));
  if (missing !== undefined) throw workspaceNotFound(missing);
  return { ids, notReady: row?.notReady ?? [] };
}

/** The hits' chunks, in one statement, if their document is still in the workspace and ready. */
export function readBack(query: DirectQuery, workspaceIds: string | readonly string[], chunkIds: readonly string[]): Promise<StoredChunk[]> {
  return query<StoredChunk>(readyChunks(Prisma.sql`${[...chunkIds]}::uuid[]`, typeof workspaceIds === 'string' ? [workspaceIds] : workspaceIds));
}

/** Hits asked of each side (for hybrid, enough for the fusion), and how many the index may read along (one side only). */
export function sideDepths(mode: SearchMode, topK: number): { limit: number; readTop: number } {
  return mode === 'hybrid' ? { limit: Math.max(fusionDepth, topK), readTop: 0 } : { limit: topK, readTop: topK };
}

const resultOf = (chunk: StoredChunk, score: number): SearchResult => ({
  documentId: chunk.documentId,
  filename: chunk.filename,
  chunkIndex: chunk.chunkIndex,
  content: chunk.content,
  score,
  metadata: chunk.metadata,
});

/** A failure of the embedding model or the index, as the 503 a search answers with; undefined for anything else. */
function backendUnavailable(error: unknown): AppError | undefined {
  if (error instanceof IndexUnavailableError) return new AppError('service_unavailable', error.message);
  if (error instanceof EmbedderError) return new AppError('service_unavailable', `the embedding model is unavailable: ${error.message}`);
  return undefined;
}

/** Rejects with a 503 when `work` has not settled within `ms`. */
async function withinTime<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new AppError('service_unavailable', `${what} did not answer within ${ms / 1000} s; try again`)), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Searches a workspace the viewer may see. Checks come in the contract's order: the input (400),
 * then the workspace (404), then the backends (503). Results are chunks of ready documents only,
 * best first, with the fused score (hybrid), the cosine similarity (vector) or the BM25 score
 * (keyword).
 */
export function search(dependencies: RetrievalDependencies, viewer: Access, input: SearchInput, signal?: AbortSignal): Promise<SearchResult[]> {
  return timedPart('search', asForeground(dependencies, () => searchNow(dependencies, viewer, input, signal)));
}

async function searchNow(
  dependencies: RetrievalDependencies,
  viewer: Access,
  input: SearchInput,
  signal?: AbortSignal,
): Promise<SearchResult[]> {
  const { prisma, embedder, index, timeoutMs } = dependencies;
  const checked = checkSearchInput(input);
  const topK = checked.topK;
  const mode = input.mode ?? 'hybrid';
  const filter = checkFilter(input.filter);
  const named = namedWorkspaces(input);
  const query = focusOf(checked.query.trim());

  const deadline = AbortSignal.timeout(timeoutMs);
  const abandon = new AbortController();
  const aborted = AbortSignal.any([deadline, abandon.signal, ...(signal ? [signal] : [])]);
  // The query is embedded in the model's threads while the store answers the checks below; a
  // check that fails abandons it, and an embedding error is reported after them (404 before 503).
  const embedding =
    mode !== 'keyword' && !modelMismatch(dependencies)
      ? timedPart('embed', withinTime(embedder.embed([query], 'query', aborted), timeoutMs, 'the embedding model')).then(([vector]) => vector!)
      : undefined;
  embedding?.catch(() => undefined);
  let workspaceIds: string[];
  let documentIds: string[] | undefined;
  let notReady: string[];
  try {
    ({ ids: workspaceIds, notReady } = await timedPart('scope', searchScope(dependencies.query, viewer, named)));
    const mismatch = modelMismatch(dependencies);
    if (mismatch) throw new AppError('service_unavailable', `search is unavailable: ${mismatch}`);
    documentIds = filter ? await documentsMatching(prisma, workspaceIds, filter) : undefined;
  } catch (error) {
    abandon.abort();
    throw error;
  }
  if (documentIds?.length === 0) {
    abandon.abort();
    return [];
  }

  // Keyword ranking costs matching chunks × terms: a pasted page must not hold the search up.
  const terms = mode === 'vector' ? [] : queryTerms(query, searchLimits.maxKeywordTerms);
  const request = { workspaceIds, ...sideDepths(mode, topK), documentIds, excludeDocumentIds: notReady };
  // The index gets the embedding still under way: it brings its keyword side up to date meanwhile.
  const sides = timedPart('index', withinTime(index.search({ ...request, terms, vector: embedding }, aborted), timeoutMs, 'the search index'));
  sides.catch(() => undefined);
  if (embedding) {
    try {
      await embedding;
    } catch (error) {
      abandon.abort();
      if (error instanceof EmbedderError) throw backendUnavailable(error)!;
      if (deadline.aborted && !signal?.aborted) throw new AppError('service_unavailable', `the embedding model did not answer within ${timeoutMs / 1000} s; try again`);
      throw error;
    }
  }
  let found: IndexSearchResult;
  try {
    found = await sides;
  } catch (error) {
    throw backendUnavailable(error) ?? error;
  }
  const fused = mode === 'hybrid' ? fuseConvex(found.vector, found.keyword) : mode === 'vector' ? found.vector : found.keyword;
  // A hybrid search's pool is what its document prior reorders; one side alone may have read its best chunks along.
  const { ranked, read } =
    mode === 'hybrid' ? await withPriorApplied(dependencies.query, workspaceIds, fused, Math.max(topK, documentPriorPool), terms, found) : { ranked: fused, read: found.chunks };
  return (await shownChunks(dependencies.query, workspaceIds, ranked, topK, read)).map(({ hit, chunk }) => resultOf(chunk, hit.score));
}

/**
 * The fused hits with the first `poolSize` reordered by the document prior (document-prior.ts). It
 * reads their documents from the index's memory when it holds every one (`documentOf`), so that
 * only the chunks shown are read from the store; otherwise it reads the pool's chunks, which are
 * returned to be shown without a second read.
 */
async function withPriorApplied(
  query: DirectQuery,
  workspaceIds: readonly string[],
  fused: IndexHit[],
  poolSize: number,
  terms: readonly string[],
  sides: Pick<IndexSearchResult, 'documentOf'>,
): Promise<{ ranked: IndexHit[]; read?: ReadonlyMap<string, StoredChunk> }> {
  const pool = fused.slice(0, poolSize);
  const rest = fused.slice(pool.length);
  const held = sides.documentOf;
  if (pool.length === 0) return { ranked: fused };
  if (held && pool.every((hit) => held(hit.chunkId))) return { ranked: [...withDocumentPrior(pool, (hit) => held(hit.chunkId), terms), ...rest] };
  const read = await chunksById(query, workspaceIds, pool);
  return { ranked: [...withDocumentPrior(pool, (hit) => read.get(hit.chunkId), terms), ...rest], read };
}

const chunksById = async (query: DirectQuery, workspaceIds: readonly string[], hits: readonly IndexHit[]) =>
  new Map((await timedPart('read', readBack(query, workspaceIds, hits.map((hit) => hit.chunkId)))).map((chunk) => [chunk.id, chunk]));

/**
 * The chunks of the best `count` hits, in their order, read a page at a time (those in `read`
 * are not read again): a hit whose document was deleted a moment ago is dropped, and the next
 * one takes its place.
 */
async function shownChunks(
  query: DirectQuery,
  workspaceIds: readonly string[],
  ranked: readonly IndexHit[],
  count: number,
  read?: ReadonlyMap<string, StoredChunk>,
): Promise<{ hit: IndexHit; chunk: StoredChunk }[]> {
  const shown: { hit: IndexHit; chunk: StoredChunk }[] = [];
  for (let next = 0; shown.length < count && next < ranked.length; ) {
    // Exactly what is missing at first; with a margin after a page that lost hits.
    const page = ranked.slice(next, next + count - shown.length + (next > 0 ? 10 : 0));
    next += page.length;
    const unread = page.filter((hit) => !read?.has(hit.chunkId));
    const readNow = unread.length > 0 ? await chunksById(query, workspaceIds, unread) : undefined;
    for (const hit of page) {
      const chunk = read?.get(hit.chunkId) ?? readNow?.get(hit.chunkId);
      if (chunk && shown.length < count) shown.push({ hit, chunk });
    }
  }
  return shown;
}

/** A chunk found for the agent: a search result with the chunk's id and its workspace's scope kept. */
export type Passage = SearchResult & { chunkId: string };

/**
 * Hybrid search over workspaces the caller has checked already with the policy (the agent
 * checks them once, before its stream opens). `exclude` drops chunks found by earlier hops. Same ranking
 * as `search`; the query is used as given (the agent bounds it).
 */
export function searchPassages(
  dependencies: RetrievalDependencies,
  request: { query: string; workspaceIds: readonly string[]; topK: number; exclude?: ReadonlySet<string> },
  signal?: AbortSignal,
): Promise<Passage[]> {
  return asForeground(dependencies, () => searchPassagesNow(dependencies, request, signal));
}

async function searchPassagesNow(
  dependencies: RetrievalDependencies,
  request: { query: string; workspaceIds: readonly string[]; topK: number; exclude?: ReadonlySet<string> },
  signal?: AbortSignal,
): Promise<Passage[]> {
  const { embedder, index, timeoutMs } = dependencies;
  const mismatch = modelMismatch(dependencies);
  if (mismatch) throw new AppError('service_unavailable', `search is unavailable: ${mismatch}`);
  const query = focusOf(request.query.trim().slice(0, searchLimits.maxQueryCharacters));
  const aborted = AbortSignal.any([AbortSignal.timeout(timeoutMs), ...(signal ? [signal] : [])]);
  const embedding = withinTime(embedder.embed([query], 'query', aborted), timeoutMs, 'the embedding model').then(([vector]) => vector!);
  embedding.catch(() => undefined);
  const notReady = await dependencies.query<{ id: string }>(Prisma.sql`
    SELECT d.id::text FROM documents d WHERE d.workspace_id = ANY(${[...request.workspaceIds]}::uuid[]) AND d.status <> 'ready'`);
  const excluded = request.exclude?.size ?? 0;
  const terms = queryTerms(query, searchLimits.maxKeywordTerms);
  let sides: IndexSearchResult;
  try {
    const limit = Math.max(fusionDepth, request.topK + excluded);
    [sides] = await Promise.all([
      withinTime(
        index.search({ workspaceIds: request.workspaceIds, vector: embedding, terms, limit, readTop: 0, excludeDocumentIds: notReady.map((row) => row.id) }, aborted),
        timeoutMs,
        'the search index',
      ),
      embedding,
    ]);
  } catch (error) {
    throw backendUnavailable(error) ?? error;
  }
  const fused = fuseConvex(sides.vector, sides.keyword).filter((hit) => !request.exclude?.has(hit.chunkId));
  const { ranked, read } = await withPriorApplied(dependencies.query, request.workspaceIds, fused, Math.max(request.topK + 5, documentPriorPool), terms, sides);
  const passages: Passage[] = (await shownChunks(dependencies.query, request.workspaceIds, ranked, request.topK, read)).map(({ hit, chunk }) => ({
    chunkId: chunk.id,
    ...resultOf(chunk, hit.score),
  }));
  return passages;
}
