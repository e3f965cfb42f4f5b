import { MigrationsPendingError } from '../../db/migrations.js';
import type { PrismaClient } from '../../generated/prisma/client.js';
import type { BackgroundWork } from '../../observability/background-work.js';
import { termFrequencies } from './analyzer.js';
import { cleanChangeLog } from './pgvector-change-log.js';
import { IndexSnapshots } from './index-snapshots.js';
import { StoreIndexMirror } from './pgvector-keywords.js';
import { readGraphIntoBuffers, type GraphRead } from './pgvector-graph-read.js';
import { FreshRowsMerge } from './pgvector-merge.js';
import { dropIndexTables, migrateIndexTables } from './pgvector-schema.js';
import { searchPgvector, vectorLiteral } from './pgvector-search.js';
import type { IndexedChunk, IndexModel, IndexSearch, ReadBack, VectorIndex } from './vector-index.js';

/** Chunks written per transaction by `upsert`. */
const upsertSliceRows = 100;

/**
 * How long one of the index's write transactions may last (Prisma's default is 5 s). Their
 * statements are short, but they wait for a merge that holds the same rows, and on a store whose
 * cores are taken by checkpoints, merges and other writers the time between statements alone
 * passed 10 s in bench:search's million-chunk run. A transaction cut off there is rolled back and
 * its embed job writes the whole document again, which adds to the load that made it slow.
 */
const writeTimeoutMs = 60_000;

/** How often (at most) a process drops change-log rows no reader needs any more. */
const logCleanupEveryMs = 10 * 60_000;

export type PgvectorIndexOptions = {
  /** Memory the keyword side may hold across workspaces before it drops the least recently searched. */
  keywordMemoryBytes: number;
  /** Where loading a workspace's keyword postings is timed (it reads every chunk's terms from the store). */
  backgroundWork?: BackgroundWork;
  /** Whether workspaces that change are loaded or synced before a search asks (a serving process: yes; a tool's second view of the store: no). */
  loadAhead?: boolean;
  /** How often the change log is read for workspaces that changed, when loading ahead (5 s). */
  followLogEveryMs?: number;
  /**
   * Whether `warm` also reads the HNSW graph into PostgreSQL's shared buffers (readGraphIntoBuffers):
   * a serving process on PostgreSQL, not the embedded store, whose one thread the walk would hold.
   */
  readGraphAhead?: boolean;
  /**
   * Whether each workspace held in memory also keeps its chunks' vectors in an HNSW graph there
   * (VectorGraph), which searches use once it is complete instead of the store's graph: the
   * embedded store, where the store's graph is walked in WebAssembly on one thread.
   */
  vectorsInMemory?: boolean;
  /** False (KB_MIGRATE=off): the tables are only checked; `kb migrate` makes or changes them. */
  migrate?: boolean;
  /**
   * Where large workspaces' keyword postings, and their graphs in memory, are saved between starts
   * (index-snapshots.ts); none when undefined.
   */
  snapshotDirectory?: string | undefined;
  /** How often what changed is saved there, when loading ahead (60 s). */
  saveEveryMs?: number;
  /** Where the index says what its waiting chunks will add to the store once merged (Database.expectTableGrowth). */
  expectTableGrowth?: (bytes: () => Promise<number>) => void;
};

export class PgvectorMissingError extends Error {
  override name = 'PgvectorMissingError';
}

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
  readonly traits = { deletesWithStore: true, keywordStatistics: 'searched_workspaces', readsAlong: true, scorePrecision: 'double' } as const;

  #builtWith: IndexModel;
  readonly #mirror: StoreIndexMirror;
  readonly #merge: FreshRowsMerge;
  readonly #readGraphAhead: boolean;
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
    this.#mirror = new StoreIndexMirror(prisma, options.keywordMemoryBytes, {
      backgroundWork: options.backgroundWork,
      loadAhead: options.loadAhead ?? true,
      ...(options.snapshotDirectory !== undefined && { snapshots: new IndexSnapshots(options.snapshotDirectory) }),
      ...(options.followLogEveryMs !== undefined && { followLogEveryMs: options.followLogEveryMs }),
      ...(options.saveEveryMs !== undefined && { saveEveryMs: options.saveEveryMs }),
      ...(options.vectorsInMemory && { graphDimensions: () => this.#builtWith.dimensions }),
    });
    this.#merge = new FreshRowsMerge(prisma);
    this.#readGraphAhead = options.readGraphAhead ?? false;
    options.expectTableGrowth?.(() => this.#merge.pendingGraphBytes(this.#builtWith.dimensions));
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
      await this.prisma.$transaction(
        [
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
        ],
        { timeout: writeTimeoutMs },
      );
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
    await this.prisma.$transaction(
      [
        this.prisma.$executeRaw`DELETE FROM chunk_index_fresh WHERE document_id = ${documentId}::uuid`,
        this.prisma.$executeRaw`DELETE FROM chunk_index WHERE document_id = ${documentId}::uuid`,
      ],
      { timeout: writeTimeoutMs },
    );
  }

  async deleteWorkspace(workspaceId: string) {
    await this.prisma.$transaction(
      [
        this.prisma.$executeRaw`DELETE FROM chunk_index_fresh WHERE workspace_id = ${workspaceId}::uuid`,
        this.prisma.$executeRaw`DELETE FROM chunk_index WHERE workspace_id = ${workspaceId}::uuid`,
      ],
      { timeout: writeTimeoutMs },
    );
  }

  releaseMergedSpace() {
    return this.#merge.releaseMergedSpace();
  }

  graphBacklog() {
    return this.#merge.graphBacklog();
  }

  mergeIntoGraph(maxRows: number) {
    return this.#merge.mergeIntoGraph(maxRows);
  }

  search(request: IndexSearch) {
    return searchPgvector(this.prisma, this.#mirror, request);
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

  async warm(signal: AbortSignal, onLoaded?: (workspaceId: string, chunks: number, ms: number, readBack: ReadBack) => void, onGraphRead?: (outcome: GraphRead) => void) {
    const graph = this.#readGraphAhead ? readGraphIntoBuffers(this.prisma, signal).then(onGraphRead) : undefined;
    await Promise.all([this.#mirror.warm(signal, onLoaded), graph]);
  }

  async ping() {
    await this.prisma.$queryRaw`SELECT 1 FROM chunk_index LIMIT 1`;
  }

  async close() {
    await this.#mirror.close();
  }
}
