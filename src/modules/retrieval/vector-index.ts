import type { CandidateDocument } from './document-prior.js';
import type { GraphRead } from './pgvector-graph-read.js';

/** A chunk as the index stores it: its vector and its analysed terms, with where it belongs. */
export type IndexedChunk = {
  chunkId: string;
  documentId: string;
  workspaceId: string;
  embedding: Float32Array;
  /** Analysed terms (see analyzer.ts) in order; the keyword side ranks on these. */
  terms: readonly string[];
};

/** A hit from one side of a search: the chunk and that side's own score (higher is better). */
export type IndexHit = { chunkId: string; score: number };

/** A chunk as the store holds it, with its document's filename: what a search result shows. */
export type StoredChunk = {
  id: string;
  documentId: string;
  chunkIndex: number;
  content: string;
  metadata: unknown;
  filename: string;
  /** The words of its document's file name (see `documents.name_words`): the ranking's document prior reads them. */
  documentName: string;
};

export type IndexSearch = {
  workspaceIds: readonly string[];
  /**
   * The query's vector, or the promise of it; the vector side is skipped without it. Given a
   * promise, the index starts its keyword side while the query is still being embedded.
   */
  vector?: Float32Array | PromiseLike<Float32Array>;
  /** The query's analysed terms; the keyword side is skipped when empty or absent. */
  terms?: readonly string[];
  /** Hits wanted from each side. */
  limit: number;
  /** Only chunks of these documents (a metadata filter resolved to documents); absent means all. */
  documentIds?: readonly string[];
  /**
   * Documents whose chunks must not be returned: those not ready yet (being embedded) or just
   * deleted. Chunks are indexed batch by batch before their document is ready.
   */
  excludeDocumentIds: readonly string[];
  /**
   * When one side only is asked for, an index inside the store may read the stored chunks of its
   * best `readTop` hits (of ready documents of the searched workspaces) along with the search,
   * and return them as `chunks`; the caller reads whatever else it needs. With both sides the
   * results are not known before the caller fuses them, so nothing is read along.
   */
  readTop?: number;
};

export type IndexSearchResult = {
  vector: IndexHit[];
  keyword: IndexHit[];
  /** Stored chunks read along with the search (see `IndexSearch.readTop`), by id. */
  chunks?: ReadonlyMap<string, StoredChunk>;
  /**
   * A found chunk's document with its name, where the index holds them in memory (undefined for a
   * chunk it cannot tell): the document prior then reorders its pool before any chunk is read.
   */
  documentOf?: (chunkId: string) => CandidateDocument | undefined;
};

/** Which model built the index: its vectors are only comparable with that model's. */
export type IndexModel = { model: string; dimensions: number };

/** What a workspace's load at start read back from what was saved on disk, instead of from the store. */
export type ReadBack = { postings: boolean; graph: boolean };

/** What sets one index apart from another, for whatever must know: never its kind. */
export type IndexTraits = {
  /**
   * Its entries live in the store and go with their chunks in the deleting transaction. Otherwise
   * they go when the `index_delete` job queued in that transaction calls `deleteDocument` or
   * `deleteWorkspace`.
   */
  readonly deletesWithStore: boolean;
  /** The corpus of BM25's statistics (document count, frequencies, average length): the workspaces searched, or all the index holds. */
  readonly keywordStatistics: 'searched_workspaces' | 'whole_index';
  /** Whether a search can read the stored chunks of its best hits along with them (`readTop`). */
  readonly readsAlong: boolean;
  /** The precision of its scores: Lucene computes them in single precision. */
  readonly scorePrecision: 'single' | 'double';
};

/**
 * Where chunk vectors and terms are stored and searched. One implementation is chosen from
 * configuration at start (select.ts); each owns its tables or mappings. Beyond the core every
 * index has, an index may do maintenance of its own (`warm`, the graph merge) or rebuild itself
 * beside the one in service (`rebuild`): those members are optional, and callers use them when
 * present.
 */
export interface VectorIndex {
  /** Its name in stats and logs. */
  readonly kind: 'pgvector' | 'elasticsearch';
  readonly traits: IndexTraits;
  /** The model the stored vectors were made with (recorded when the index was created). */
  readonly builtWith: IndexModel;
  /** The migrations of the index's tables (pgvector) or layout (Elasticsearch) that opening it applied (`kb migrate` prints them). */
  readonly appliedMigrations?: readonly string[];
  /** Adds or replaces chunks. */
  upsert(chunks: readonly IndexedChunk[], signal?: AbortSignal): Promise<void>;
  deleteDocument(documentId: string): Promise<void>;
  deleteWorkspace(workspaceId: string): Promise<void>;
  /** Both sides of a hybrid search, each ranked best first; fusion is the caller's. */
  search(request: IndexSearch, signal?: AbortSignal): Promise<IndexSearchResult>;
  /** Chunks the index holds for a workspace, by document. */
  countByDocument(workspaceId: string): Promise<Map<string, number>>;
  /** Empties the index and records a new model: `kb reindex` where the index cannot be rebuilt beside itself. */
  reset(model: IndexModel): Promise<void>;
  /**
   * Elasticsearch: a new index for `model`, filled beside the one that goes on serving, and put
   * in its place in one step (`kb reindex`).
   */
  rebuild?(model: IndexModel): Promise<IndexRebuild>;
  /**
   * Elasticsearch: reads again which model built the index, which another process may have
   * swapped (`kb reindex`); `builtWith` then says the new one.
   */
  refreshBuiltWith?(): Promise<void>;
  /** Answers when the index can serve searches; for /readyz. */
  ping(): Promise<void>;
  /**
   * Prepares what searches would otherwise prepare on first use (pgvector: the keyword postings
   * of the largest workspaces, within their memory budget; on PostgreSQL, the HNSW graph read into
   * the shared buffers, said to `onGraphRead`). Called at start, not awaited; stops between
   * workspaces, and cancels the graph's read, once `signal` aborts.
   */
  warm?(signal: AbortSignal, onLoaded?: (workspaceId: string, chunks: number, ms: number, readBack: ReadBack) => void, onGraphRead?: (outcome: GraphRead) => void): Promise<void>;
  /**
   * pgvector: chunks written but not merged into the HNSW graph yet. Searches compare them one
   * by one meanwhile, so they are found all the same. Exact while few wait, and always 0 when
   * none does; when many wait, an estimate from a sample of the table's pages (see FreshRowsMerge.graphBacklog, pgvector-merge.ts).
   */
  graphBacklog?(): Promise<number>;
  /** pgvector: merges up to `maxRows` of those chunks into the graph; returns how many it merged. */
  mergeIntoGraph?(maxRows: number): Promise<number>;
  /** pgvector: gives back the space of merged chunks once none waits; true when it did. */
  releaseMergedSpace?(): Promise<boolean>;
  close(): Promise<void>;
}

/** An index being built beside the one in service: its writes, its contents, and the swap. */
export interface IndexRebuild {
  /** The new index's name. */
  readonly name: string;
  upsert(chunks: readonly IndexedChunk[], signal?: AbortSignal): Promise<void>;
  deleteDocument(documentId: string): Promise<void>;
  /** Removes the document's chunks other than `keep` (those of an earlier parse). */
  deleteChunksExcept(documentId: string, keep: ReadonlySet<string>): Promise<void>;
  /** Chunks the new index holds, by document, across workspaces. */
  countByDocument(): Promise<Map<string, number>>;
  /** Puts the new index in service and deletes the old one, in one atomic step. */
  swap(): Promise<void>;
  /** Deletes the new index (a build that failed). */
  abandon(): Promise<void>;
}

/** The index (or its server) did not answer, or answered with an error: a search is a 503. */
export class IndexUnavailableError extends Error {
  override name = 'IndexUnavailableError';
}
