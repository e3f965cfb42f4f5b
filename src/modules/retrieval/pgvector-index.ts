import { setImmediate as nextTurn } from 'node:timers/promises';
import { MigrationsPendingError } from '../../db/migrations.js';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import type { BackgroundWork } from '../../observability/background-work.js';
import { recordTiming, timedNow, timedPart } from '../../observability/request-context.js';
import { termFrequencies } from './analyzer.js';
import { nearestFresh } from './fresh-vectors.js';
import type { MirroredWorkspace } from './held-workspace.js';
import { cleanChangeLog } from './pgvector-change-log.js';
import { StoreIndexMirror } from './pgvector-keywords.js';
import { dropIndexTables, migrateIndexTables } from './pgvector-schema.js';
import { readyChunks } from './stored-chunks.js';
import { rankBm25 } from './term-postings.js';
import type { IndexedChunk, IndexHit, IndexModel, IndexSearch, IndexSearchResult, StoredChunk, VectorIndex } from './vector-index.js';

/**
 * BM25 parameters, the same as the Elasticsearch index's similarity (measured on SciFact). The
 * score keeps the textbook (k1 + 1) factor, as Elasticsearch's BM25 does, so the two agree.
 */
export const bm25 = { k1: 0.9, b: 0.4 };


/**
 * Chunks outside the graph compared exactly (in memory) per hit wanted: those whose sketches
 * score highest (fresh-vectors.ts). Measured with SciFact's queries over its 5,183 abstracts
 * (docs/retrieval.md): 8 per hit held 96 % of the exact 10 nearest and 99 % of the 100 nearest
 * (4 per hit: 91 % and 95 %). The nearest `limit` of them go to the store for their distances.
 */
const freshCandidatesPerHit = 8;
/** Up to this many pages (8 MB, about 4,500 waiting chunks), `graphBacklog` counts the table exactly: a few milliseconds. */
const exactCountPages = 1_024;

/** Chunks written per transaction by `upsert`. */
const upsertSliceRows = 100;

/** How often (at most) a process drops change-log rows no reader needs any more. */
const logCleanupEveryMs = 10 * 60_000;

export type PgvectorIndexOptions = {
  /** Memory the keyword side may hold across workspaces before it drops the least recently searched. */
  keywordMemoryBytes: number;
  /** Where loading a workspace's keyword postings is timed (it reads every chunk's terms from the store). */
  backgroundWork?: BackgroundWork;
  /** Whether workspaces that change are loaded or synced before a search asks (a serving process: yes; a tool's second view of the store: no). */
  loadAhead?: boolean;
  /** False (KB_MIGRATE=off): the tables are only checked; `kb migrate` makes or changes them. */
  migrate?: boolean;
};

export class PgvectorMissingError extends Error {
  override name = 'PgvectorMissingError';
}

const firstUuid = '00000000-0000-0000-0000-000000000000';

const vectorLiteral = (vector: Float32Array) => `[${Array.from(vector).join(',')}]`;

/**
 * The index inside the store (embedded PGlite or PostgreSQL), in tables this module creates:
 * - `chunk_index`: per chunk its vector (HNSW, cosine), its analysed terms with their counts,
 *   and its workspace and document. Rows go with their chunk (ON DELETE CASCADE), so a deleted
 *   document or workspace leaves the index in the same transaction.
 * - `chunk_index_fresh`: the same columns, for chunks written since the last merge, outside the
 *   HNSW graph and searched exactly (every row of the workspaces searched). Inserting into the
 *   graph was half of ingestion's work on the store; a merge (`mergeIntoGraph`) moves rows into
 *   `chunk_index` when ingestion leaves the machine idle (see graph-merge.ts).
 * - `chunk_index_log`: which chunks changed, by which transaction; the keyword side, ranked in
 *   memory (pgvector-keywords.ts), follows it.
 * - `chunk_index_model`: the model and dimensions the vectors were made with.
 */
export async function openPgvectorIndex(prisma: PrismaClient, configured: IndexModel, options: PgvectorIndexOptions): Promise<VectorIndex> {
  if (options.migrate === false) {
    const recorded = await prisma.$queryRaw<IndexModel[]>`SELECT model, dimensions FROM chunk_index_model`.catch(() => []);
    if (!recorded[0]) throw new MigrationsPendingError("the pgvector index's tables have not been made");
    await migrateIndexTables(prisma, recorded[0].dimensions, { migrate: false });
    return new PgvectorIndex(prisma, recorded[0], options, []);
  }
  try {
    await prisma.$executeRawUnsafe('CREATE EXTENSION IF NOT EXISTS vector');
  } catch (error) {
    // Prisma's message starts with the invocation; PostgreSQL's own words are its last line.
    const reason = (error as Error).message.trim().split('\n').at(-1);
    throw new PgvectorMissingError(
      `the database has no pgvector extension (${reason}). Install pgvector 0.8 or later into PostgreSQL, ` +
        'or set ELASTICSEARCH_URL to keep vectors in Elasticsearch instead.',
    );
  }
  const [version] = await prisma.$queryRaw<{ extversion: string }[]>`SELECT extversion FROM pg_extension WHERE extname = 'vector'`;
  const [major = 0, minor = 0] = (version?.extversion ?? '0.0').split('.').map(Number);
  if (major === 0 && minor < 8) {
    throw new PgvectorMissingError(
      `pgvector ${version?.extversion} is too old: filtered searches need iterative index scans, from pgvector 0.8. Upgrade it, or set ELASTICSEARCH_URL.`,
    );
  }
  await prisma.$executeRawUnsafe(`
    CREATE TABLE IF NOT EXISTS chunk_index_model (
      only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
      model text NOT NULL,
      dimensions integer NOT NULL,
      created_at timestamptz NOT NULL DEFAULT clock_timestamp()
    )`);
  await prisma.$executeRaw`
    INSERT INTO chunk_index_model (model, dimensions) VALUES (${configured.model}, ${configured.dimensions})
    ON CONFLICT (only_row) DO NOTHING`;
  const [recorded] = await prisma.$queryRaw<IndexModel[]>`SELECT model, dimensions FROM chunk_index_model`;
  if (!recorded) throw new Error('chunk_index_model has no row');
  const applied = await migrateIndexTables(prisma, recorded.dimensions, { migrate: true });
  return new PgvectorIndex(prisma, { model: recorded.model, dimensions: recorded.dimensions }, options, applied);
}

class PgvectorIndex implements VectorIndex {
  readonly kind = 'pgvector' as const;

  #builtWith: IndexModel;
  readonly #mirror: StoreIndexMirror;
  /** The last chunk id this process merged into the graph (see mergeIntoGraph). */
  #mergeCursor = firstUuid;
  #logCleanedAt = 0;

  /**
   * @param appliedMigrations the index migrations this opening applied
   */
  constructor(
    private readonly prisma: PrismaClient,
    builtWith: IndexModel,
    options: PgvectorIndexOptions,
    readonly appliedMigrations: readonly string[],
  ) {
    this.#builtWith = builtWith;
    this.#mirror = new StoreIndexMirror(prisma, options.keywordMemoryBytes, { backgroundWork: options.backgroundWork, loadAhead: options.loadAhead ?? true });
  }

  get builtWith() {
    return this.#builtWith;
  }

  async upsert(chunks: readonly IndexedChunk[]) {
    if (chunks.length === 0) return;
    const rows = chunks.map((chunk) => {
      if (chunk.embedding.length !== this.#builtWith.dimensions) {
        throw new Error(`a ${chunk.embedding.length}-dimensional vector cannot go into an index of ${this.#builtWith.dimensions} dimensions`);
      }
      const counts = termFrequencies(chunk.terms);
      return {
        chunk_id: chunk.chunkId,
        document_id: chunk.documentId,
        workspace_id: chunk.workspaceId,
        embedding: vectorLiteral(chunk.embedding),
        terms: [...counts.keys()],
        freqs: [...counts.values()],
        term_count: chunk.terms.length,
      };
    });
    // A transaction per slice keeps each short. Writing a chunk again replaces it, so a retry
    // after a slice failed redoes the whole call safely. New rows go outside the graph.
    for (let first = 0; first < rows.length; first += upsertSliceRows) {
      const slice = rows.slice(first, first + upsertSliceRows);
      const ids = slice.map((row) => row.chunk_id);
      await this.prisma.$transaction([
        // The fresh row first: a merge moving it holds it, so this waits for the merge to commit
        // and the next statement then finds (and replaces) the moved row.
        this.prisma.$executeRaw`DELETE FROM chunk_index_fresh WHERE chunk_id = ANY(${ids}::uuid[])`,
        this.prisma.$executeRaw`DELETE FROM chunk_index WHERE chunk_id = ANY(${ids}::uuid[])`,
        // Chunks deleted meanwhile (their document was) are skipped rather than failing the batch.
        this.prisma.$executeRaw`
          INSERT INTO chunk_index_fresh (chunk_id, document_id, workspace_id, embedding, terms, freqs, term_count)
          SELECT r.chunk_id, r.document_id, r.workspace_id, r.embedding::vector, r.terms, r.freqs, r.term_count
            FROM jsonb_to_recordset(${JSON.stringify(slice)}::jsonb)
                 AS r(chunk_id uuid, document_id uuid, workspace_id uuid, embedding text, terms text[], freqs integer[], term_count integer)
           WHERE EXISTS (SELECT 1 FROM chunks c WHERE c.id = r.chunk_id)`,
      ]);
    }
    if (Date.now() - this.#logCleanedAt > logCleanupEveryMs) {
      // The rows are written; a cleanup that fails is tried again by a later write.
      await cleanChangeLog(this.prisma).then(
        () => (this.#logCleanedAt = Date.now()),
        () => undefined,
      );
    }
  }

  // Rows go with their chunks (ON DELETE CASCADE); these are for callers that keep the chunks.
  async deleteDocument(documentId: string) {
    await this.prisma.$transaction([
      this.prisma.$executeRaw`DELETE FROM chunk_index_fresh WHERE document_id = ${documentId}::uuid`,
      this.prisma.$executeRaw`DELETE FROM chunk_index WHERE document_id = ${documentId}::uuid`,
    ]);
  }

  async deleteWorkspace(workspaceId: string) {
    await this.prisma.$transaction([
      this.prisma.$executeRaw`DELETE FROM chunk_index_fresh WHERE workspace_id = ${workspaceId}::uuid`,
      this.prisma.$executeRaw`DELETE FROM chunk_index WHERE workspace_id = ${workspaceId}::uuid`,
    ]);
  }

  /**
   * Empties the table of waiting chunks when a merge has drained it: TRUNCATE gives its space back
   * at once, where a VACUUM of the rows the merge deleted would hold the store for seconds. Only
   * when no row waits and no other transaction uses the table (its lock is asked for without
   * waiting); otherwise false, and the next drained merge tries again.
   */
  async releaseMergedSpace(): Promise<boolean> {
    try {
      return await this.prisma.$transaction(async (tx) => {
        await tx.$executeRawUnsafe('LOCK TABLE chunk_index_fresh IN ACCESS EXCLUSIVE MODE NOWAIT');
        const [row] = await tx.$queryRawUnsafe<{ waiting: boolean }[]>('SELECT EXISTS (SELECT 1 FROM chunk_index_fresh) AS waiting');
        if (row?.waiting !== false) return false;
        await tx.$executeRawUnsafe('TRUNCATE chunk_index_fresh');
        return true;
      });
    } catch (error) {
      // 55P03: another transaction holds the table.
      if (/55P03|could not obtain lock/.test((error as Error).message)) return false;
      throw error;
    }
  }

  /**
   * Chunks waiting outside the graph. `count(*)` reads every page of the table, the rows a merge
   * deleted included: at 90,000 waiting chunks it held the embedded store for about 150 ms, each
   * time the merge loop, /metrics or a benchmark asked. So a table of more than
   * `exactCountPages` is not counted: the number comes from its statistics (the live rows
   * PostgreSQL counts as rows are written and deleted, flushed first for this connection's own
   * changes; a few seconds late for other connections', set to an estimate by ANALYZE, and lost
   * when PostgreSQL recovers from a crash). Whether any row waits at all is always asked of the
   * table itself: that stops at the first live row.
   */
  async graphBacklog() {
    await this.prisma.$executeRawUnsafe('SELECT pg_stat_force_next_flush()');
    const [row] = await this.prisma.$queryRaw<{ live: number; pages: number; waiting: boolean }[]>`
      SELECT pg_stat_get_live_tuples('chunk_index_fresh'::regclass)::int AS live,
             (pg_relation_size('chunk_index_fresh') / current_setting('block_size')::int)::int AS pages,
             EXISTS (SELECT 1 FROM chunk_index_fresh) AS waiting`;
    if (!row?.waiting) return 0;
    if (row.pages > exactCountPages && row.live > 0) return row.live;
    const [counted] = await this.prisma.$queryRaw<{ count: number }[]>`SELECT count(*)::int AS count FROM chunk_index_fresh`;
    return counted?.count ?? 0;
  }

  /**
   * Moves up to `maxRows` fresh rows into `chunk_index` (and so into the HNSW graph), in one
   * transaction; returns how many moved. Rows another transaction holds are skipped, never
   * waited for: a merge in each of several processes, or a document being deleted, cannot
   * block it. The chunk rows are held too, as the foreign key check would hold them, and skipped
   * as well when a deletion holds them: a merge that waited there while holding the fresh row the
   * deletion's cascade needs would deadlock with it. A deletion that comes later waits for the merge.
   *
   * Rows are taken in chunk id order from where the last merge of this process stopped, through
   * the table's key: the rows merged before are deleted but stay in the table until a vacuum
   * (which comes once a fifth of it is dead), and a scan from the table's start read past all of
   * them. At the end of the ids the next merge starts over.
   */
  async mergeIntoGraph(maxRows: number): Promise<number> {
    const moved = await this.#mergeFrom(this.#mergeCursor, maxRows);
    if (moved > 0 || this.#mergeCursor === firstUuid) return moved;
    this.#mergeCursor = firstUuid;
    return this.#mergeFrom(firstUuid, maxRows);
  }

  async #mergeFrom(after: string, maxRows: number): Promise<number> {
    const [row] = await this.prisma.$queryRaw<{ moved: number; last: string | null }[]>`
      WITH picked AS (
        SELECT f.chunk_id FROM chunk_index_fresh f JOIN chunks c ON c.id = f.chunk_id
         WHERE f.chunk_id > ${after}::uuid ORDER BY f.chunk_id
         LIMIT ${maxRows} FOR KEY SHARE OF c SKIP LOCKED FOR UPDATE OF f SKIP LOCKED
      ), moved AS (
        DELETE FROM chunk_index_fresh f USING picked WHERE f.chunk_id = picked.chunk_id
        RETURNING f.chunk_id, f.document_id, f.workspace_id, f.embedding, f.terms, f.freqs, f.term_count
      ), inserted AS (
        INSERT INTO chunk_index (chunk_id, document_id, workspace_id, embedding, terms, freqs, term_count)
        SELECT chunk_id, document_id, workspace_id, embedding, terms, freqs, term_count FROM moved
        -- Never met while upserts delete the fresh row before the merged one; should a chunk ever
        -- be in both tables, the fresh row (the newer) wins instead of the merge failing for good.
        ON CONFLICT (chunk_id) DO UPDATE
          SET document_id = EXCLUDED.document_id, workspace_id = EXCLUDED.workspace_id, embedding = EXCLUDED.embedding,
              terms = EXCLUDED.terms, freqs = EXCLUDED.freqs, term_count = EXCLUDED.term_count
        RETURNING chunk_id
      )
      SELECT count(*)::int AS moved, max(chunk_id::text) AS last FROM inserted`;
    const moved = row?.moved ?? 0;
    // Fewer than asked: the end of the ids is reached, and the next merge starts over.
    this.#mergeCursor = moved < maxRows || !row?.last ? firstUuid : row.last;
    return moved;
  }

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
  async search(request: IndexSearch): Promise<IndexSearchResult> {
    const terms = [...new Set(request.terms ?? [])];
    const readTop = Math.min(request.readTop ?? 0, request.limit);
    const workspaceIds = [...request.workspaceIds];
    // A search with a vector side does not wait long for a large workspace's postings to load: it
    // is ranked by vectors alone meanwhile. A search by keywords alone has nothing else to rank by.
    const mirrored =
      terms.length === 0
        ? request.vector && this.#mirror.mirroredIfHeld(workspaceIds)
        : request.vector
          ? this.#mirror.mirroredUnlessLoading(workspaceIds)
          : this.#mirror.mirrored(workspaceIds);
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
      const chunks = best.length > 0 ? await this.prisma.$queryRaw<StoredChunk[]>(readyChunks(Prisma.sql`${best}::uuid[]`, request.workspaceIds)) : undefined;
      return { vector: [], keyword, ...(chunks && { chunks: new Map(chunks.map((chunk) => [chunk.id, chunk])) }) };
    }
    const query = await request.vector;
    const freshCandidates = held
      ? timedNow('fresh', () => nearestFresh(held.map((workspace) => workspace.fresh), query, request.limit, freshCandidatesPerHit * request.limit, filter))
      : undefined;
    const nearest = timedPart('vector', this.#nearest(request, query, freshCandidates, keywordSide ? 0 : readTop));
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
  async #nearest(
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
      const rows = await this.prisma.$queryRaw<IndexHit[]>`SELECT chunk_id::text AS "chunkId", score FROM (${nearest}) AS nearest ORDER BY score DESC`;
      return { hits: rows.map(toHit) };
    }
    // The hits (score set), then the chunks read (content set), in one result.
    const rows = await this.prisma.$queryRaw<(StoredChunk & { score: number | null })[]>`
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

  async countByDocument(workspaceId: string) {
    const rows = await this.prisma.$queryRaw<{ document_id: string; count: bigint }[]>`
      SELECT document_id, count(*) AS count
        FROM (SELECT document_id FROM chunk_index WHERE workspace_id = ${workspaceId}::uuid
              UNION ALL SELECT document_id FROM chunk_index_fresh WHERE workspace_id = ${workspaceId}::uuid) AS rows
       GROUP BY document_id`;
    return new Map(rows.map((row) => [row.document_id, Number(row.count)]));
  }

  async reset(model: IndexModel) {
    await this.prisma.$transaction([
      ...dropIndexTables.map((table) => this.prisma.$executeRawUnsafe(`DROP TABLE IF EXISTS ${table}`)),
      this.prisma.$executeRaw`UPDATE chunk_index_model SET model = ${model.model}, dimensions = ${model.dimensions}, created_at = clock_timestamp()`,
    ]);
    await migrateIndexTables(this.prisma, model.dimensions, { migrate: true });
    this.#mirror.clear();
    this.#builtWith = model;
  }

  warm(signal: AbortSignal, onLoaded?: (workspaceId: string, chunks: number, ms: number) => void) {
    return this.#mirror.warm(signal, onLoaded);
  }

  async ping() {
    await this.prisma.$queryRaw`SELECT 1 FROM chunk_index LIMIT 1`;
  }

  async close() {
    this.#mirror.close();
  }
}

const toHit = (row: IndexHit): IndexHit => ({ chunkId: row.chunkId, score: Number(row.score) });
