import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import { termFrequencies } from './analyzer.js';
import { IndexUnavailableError, type IndexedChunk, type IndexHit, type IndexModel, type IndexSearch, type VectorIndex } from './vector-index.js';

/**
 * BM25 parameters, the same as the Elasticsearch index's similarity (measured on SciFact). The
 * score keeps the textbook (k1 + 1) factor, as Elasticsearch's BM25 does, so the two agree.
 */
export const bm25 = { k1: 0.9, b: 0.4 };

/**
 * HNSW candidates examined per search. It must exceed the hits asked of the vector side, and
 * `relaxed_order` iterative scans keep going past it when the workspace filter removes rows, so
 * a filtered search still returns as many hits as exist (pgvector 0.8).
 */
const efSearch = 200;

/** Longest a search statement may run; below the transaction's own limit of 5 s. */
const searchStatementTimeoutMs = 4_000;

export class PgvectorMissingError extends Error {
  override name = 'PgvectorMissingError';
}

const vectorLiteral = (vector: Float32Array) => `[${Array.from(vector).join(',')}]`;

/**
 * The index inside the store (embedded PGlite or PostgreSQL), in tables this module creates:
 * - `chunk_index`: per chunk its vector (HNSW, cosine), its analysed terms with their counts
 *   (GIN), and its workspace and document. Rows go with their chunk (ON DELETE CASCADE), so a
 *   deleted document or workspace leaves the index in the same transaction.
 * - `chunk_index_stats`: per workspace the chunk and term counts BM25 needs, kept by triggers.
 * - `chunk_index_model`: the model and dimensions the vectors were made with.
 */
export async function openPgvectorIndex(prisma: PrismaClient, configured: IndexModel): Promise<VectorIndex> {
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
  await createTables(prisma, recorded.dimensions);
  return new PgvectorIndex(prisma, { model: recorded.model, dimensions: recorded.dimensions });
}

async function createTables(prisma: PrismaClient, dimensions: number) {
  const statements = [
    `CREATE TABLE IF NOT EXISTS chunk_index (
       chunk_id uuid PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
       document_id uuid NOT NULL,
       workspace_id uuid NOT NULL,
       embedding vector(${dimensions}) NOT NULL,
       terms text[] NOT NULL,
       freqs integer[] NOT NULL,
       term_count integer NOT NULL
     )`,
    'CREATE INDEX IF NOT EXISTS chunk_index_workspace ON chunk_index (workspace_id)',
    'CREATE INDEX IF NOT EXISTS chunk_index_document ON chunk_index (document_id)',
    'CREATE INDEX IF NOT EXISTS chunk_index_terms ON chunk_index USING gin (terms)',
    'CREATE INDEX IF NOT EXISTS chunk_index_embedding ON chunk_index USING hnsw (embedding vector_cosine_ops)',
    `CREATE TABLE IF NOT EXISTS chunk_index_stats (
       workspace_id uuid PRIMARY KEY,
       chunks bigint NOT NULL,
       terms bigint NOT NULL
     )`,
    `CREATE OR REPLACE FUNCTION chunk_index_count_added() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       INSERT INTO chunk_index_stats (workspace_id, chunks, terms)
       SELECT workspace_id, count(*), sum(term_count) FROM added GROUP BY workspace_id ORDER BY workspace_id
       ON CONFLICT (workspace_id) DO UPDATE
         SET chunks = chunk_index_stats.chunks + excluded.chunks, terms = chunk_index_stats.terms + excluded.terms;
       RETURN NULL;
     END $$`,
    `CREATE OR REPLACE FUNCTION chunk_index_count_removed() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       UPDATE chunk_index_stats s SET chunks = s.chunks - r.chunks, terms = s.terms - r.terms
         FROM (SELECT workspace_id, count(*) AS chunks, sum(term_count) AS terms FROM removed GROUP BY workspace_id) r
        WHERE s.workspace_id = r.workspace_id;
       RETURN NULL;
     END $$`,
    'DROP TRIGGER IF EXISTS chunk_index_added ON chunk_index',
    `CREATE TRIGGER chunk_index_added AFTER INSERT ON chunk_index REFERENCING NEW TABLE AS added
       FOR EACH STATEMENT EXECUTE FUNCTION chunk_index_count_added()`,
    'DROP TRIGGER IF EXISTS chunk_index_removed ON chunk_index',
    `CREATE TRIGGER chunk_index_removed AFTER DELETE ON chunk_index REFERENCING OLD TABLE AS removed
       FOR EACH STATEMENT EXECUTE FUNCTION chunk_index_count_removed()`,
  ];
  await prisma.$transaction(async (tx) => {
    // Two processes starting on one new PostgreSQL database must not both create the tables.
    await tx.$executeRawUnsafe('SELECT pg_advisory_xact_lock(7241598)');
    for (const statement of statements) await tx.$executeRawUnsafe(statement);
  });
}

class PgvectorIndex implements VectorIndex {
  readonly kind = 'pgvector' as const;

  #builtWith: IndexModel;

  constructor(
    private readonly prisma: PrismaClient,
    builtWith: IndexModel,
  ) {
    this.#builtWith = builtWith;
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
    const chunkIds = rows.map((row) => row.chunk_id);
    await this.prisma.$transaction([
      this.prisma.$executeRaw`DELETE FROM chunk_index WHERE chunk_id = ANY(${chunkIds}::uuid[])`,
      // Chunks deleted meanwhile (their document was) are skipped rather than failing the batch.
      this.prisma.$executeRaw`
        INSERT INTO chunk_index (chunk_id, document_id, workspace_id, embedding, terms, freqs, term_count)
        SELECT r.chunk_id, r.document_id, r.workspace_id, r.embedding::vector, r.terms, r.freqs, r.term_count
          FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
               AS r(chunk_id uuid, document_id uuid, workspace_id uuid, embedding text, terms text[], freqs integer[], term_count integer)
         WHERE EXISTS (SELECT 1 FROM chunks c WHERE c.id = r.chunk_id)`,
    ]);
  }

  // Rows go with their chunks (ON DELETE CASCADE); these are for callers that keep the chunks.
  async deleteDocument(documentId: string) {
    await this.prisma.$executeRaw`DELETE FROM chunk_index WHERE document_id = ${documentId}::uuid`;
  }

  async deleteWorkspace(workspaceId: string) {
    await this.prisma.$executeRaw`DELETE FROM chunk_index WHERE workspace_id = ${workspaceId}::uuid`;
  }

  async search(request: IndexSearch) {
    const workspaceIds = [...request.workspaceIds];
    const documentFilter = request.documentIds
      ? Prisma.sql`AND c.document_id = ANY(${[...request.documentIds]}::uuid[])`
      : Prisma.empty;
    const readyOnly =
      request.excludeDocumentIds.length > 0
        ? Prisma.sql`AND NOT (c.document_id = ANY(${[...request.excludeDocumentIds]}::uuid[]))`
        : Prisma.empty;
    const terms = [...new Set(request.terms ?? [])];
    const queries: Prisma.PrismaPromise<IndexHit[]>[] = [];
    if (request.vector) {
      const vector = vectorLiteral(request.vector);
      queries.push(this.prisma.$queryRaw<IndexHit[]>`
        SELECT chunk_id AS "chunkId", score FROM (
          SELECT c.chunk_id, 1 - (c.embedding <=> ${vector}::vector) AS score
            FROM chunk_index c
           WHERE c.workspace_id = ANY(${workspaceIds}::uuid[]) ${readyOnly} ${documentFilter}
           ORDER BY c.embedding <=> ${vector}::vector
           LIMIT ${request.limit}
        ) AS nearest ORDER BY score DESC`);
    }
    if (terms.length > 0) {
      queries.push(this.prisma.$queryRaw<IndexHit[]>`
        WITH matched AS (
          SELECT c.chunk_id, c.term_count, c.terms, c.freqs FROM chunk_index c
           WHERE c.workspace_id = ANY(${workspaceIds}::uuid[]) AND c.terms && ${terms}::text[] ${readyOnly} ${documentFilter}
        ), hits AS (
          SELECT m.chunk_id, m.term_count, q.term, m.freqs[array_position(m.terms, q.term)]::float8 AS tf
            FROM matched m CROSS JOIN unnest(${terms}::text[]) AS q(term)
        ), present AS (
          SELECT * FROM hits WHERE tf IS NOT NULL
        ), frequency AS (
          SELECT term, count(*)::float8 AS df FROM present GROUP BY term
        ), corpus AS (
          SELECT greatest(sum(chunks), 1)::float8 AS n, greatest(sum(terms), 1)::float8 / greatest(sum(chunks), 1) AS avgdl
            FROM chunk_index_stats WHERE workspace_id = ANY(${workspaceIds}::uuid[])
        )
        SELECT p.chunk_id AS "chunkId",
               sum(ln(1 + (k.n - f.df + 0.5) / (f.df + 0.5))
                   * p.tf * ${bm25.k1 + 1}::float8 / (p.tf + ${bm25.k1}::float8 * (1 - ${bm25.b}::float8 + ${bm25.b}::float8 * p.term_count / k.avgdl))) AS score
          FROM present p JOIN frequency f USING (term) CROSS JOIN corpus k
         GROUP BY p.chunk_id
         ORDER BY score DESC, p.chunk_id
         LIMIT ${request.limit}`);
    }
    if (queries.length === 0) return { vector: [], keyword: [] };
    let answers: unknown[];
    try {
      // SET LOCAL keeps the scan settings to this transaction: other work on the connection is unaffected.
      [, , , ...answers] = await this.prisma.$transaction([
        this.prisma.$executeRawUnsafe('SET LOCAL hnsw.iterative_scan = relaxed_order'),
        this.prisma.$executeRawUnsafe(`SET LOCAL hnsw.ef_search = ${efSearch}`),
        // Bounded like the rest of a search; a statement cut short answers 503, not a held store.
        this.prisma.$executeRawUnsafe(`SET LOCAL statement_timeout = ${searchStatementTimeoutMs}`),
        ...queries,
      ]);
    } catch (error) {
      if (/57014|statement timeout/.test((error as Error).message)) {
        throw new IndexUnavailableError(`the search took longer than ${searchStatementTimeoutMs / 1000} s and was stopped; try a shorter query`);
      }
      throw error;
    }
    const results = answers as IndexHit[][];
    const vector = request.vector ? results.shift()! : [];
    const keyword = terms.length > 0 ? results.shift()! : [];
      return { vector: vector.map(toHit), keyword: keyword.map(toHit) };
  }

  async countByDocument(workspaceId: string) {
    const rows = await this.prisma.$queryRaw<{ document_id: string; count: bigint }[]>`
      SELECT document_id, count(*) AS count FROM chunk_index WHERE workspace_id = ${workspaceId}::uuid GROUP BY document_id`;
    return new Map(rows.map((row) => [row.document_id, Number(row.count)]));
  }

  async reset(model: IndexModel) {
    await this.prisma.$transaction([
      this.prisma.$executeRawUnsafe('DROP TABLE IF EXISTS chunk_index'),
      this.prisma.$executeRawUnsafe('DROP TABLE IF EXISTS chunk_index_stats'),
      this.prisma.$executeRaw`UPDATE chunk_index_model SET model = ${model.model}, dimensions = ${model.dimensions}, created_at = clock_timestamp()`,
    ]);
    await createTables(this.prisma, model.dimensions);
    this.#builtWith = model;
  }

  async ping() {
    await this.prisma.$queryRaw`SELECT 1 FROM chunk_index LIMIT 1`;
  }

  async close() {}
}

const toHit = (row: IndexHit): IndexHit => ({ chunkId: row.chunkId, score: Number(row.score) });
