import { createHash } from 'node:crypto';
import { MigrationsPendingError } from '../../db/migrations.js';
import type { PrismaClient } from '../../generated/prisma/client.js';
import { changeLogStatements, movedChangeStatements } from './pgvector-change-log.js';

/**
 * HNSW candidates examined per search. It must exceed the hits asked of the vector side, and
 * `relaxed_order` iterative scans keep going past it when the workspace filter removes rows, so
 * a filtered search still returns as many hits as exist (pgvector 0.8). How far such a scan may
 * go is pgvector's `hnsw.max_scan_tuples` (20,000 by default): that bounds a search's work.
 */
const efSearch = 200;

/**
 * A change of the pgvector index's tables. Its statements are given the index's dimensions (the
 * vector columns' size, recorded in `chunk_index_model`). A new version appends a migration; an
 * applied one is never edited.
 */
type IndexMigration = { version: number; name: string; statements: (dimensions: number) => string[] };

/**
 * Version 1: the tables as they were when the whole DDL was last run by fingerprint (see
 * `appliedVersions`), with the drops of the layouts before that.
 */
function tablesStatements(dimensions: number): string[] {
  // The graph's table and the table of chunks waiting to be merged into it hold the same rows.
  const rowColumns = `
    chunk_id uuid PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    document_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    embedding vector(${dimensions}) NOT NULL,
    terms text[] NOT NULL,
    freqs integer[] NOT NULL,
    term_count integer NOT NULL`;
  return [
    `CREATE TABLE IF NOT EXISTS chunk_index (${rowColumns})`,
    // Loading a workspace's keyword side reads its chunks in chunk id order, page by page.
    'CREATE INDEX IF NOT EXISTS chunk_index_workspace_chunk ON chunk_index (workspace_id, chunk_id)',
    'DROP INDEX IF EXISTS chunk_index_workspace',
    'CREATE INDEX IF NOT EXISTS chunk_index_document ON chunk_index (document_id)',
    // Keywords are ranked in memory now; the GIN index only cost every insert.
    'DROP INDEX IF EXISTS chunk_index_terms',
    'CREATE INDEX IF NOT EXISTS chunk_index_embedding ON chunk_index USING hnsw (embedding vector_cosine_ops)',
    `CREATE TABLE IF NOT EXISTS chunk_index_fresh (${rowColumns})`,
    'CREATE INDEX IF NOT EXISTS chunk_index_fresh_workspace ON chunk_index_fresh (workspace_id)',
    'CREATE INDEX IF NOT EXISTS chunk_index_fresh_document ON chunk_index_fresh (document_id)',
    // Fresh rows keep their vector in the row (not out of line, as for a wide row by default):
    // a search reads the nearest of them by key (see #nearest).
    'ALTER TABLE chunk_index_fresh ALTER COLUMN embedding SET STORAGE MAIN',
    // Plans need statistics of the ids only. With those of the vectors and term arrays too,
    // ANALYZE held the store 1-3.4 s a minute during a large merge; 0.2-0.6 s without.
    ...['chunk_index', 'chunk_index_fresh'].flatMap((table) =>
      ['embedding', 'terms', 'freqs'].map((column) => `ALTER TABLE ${table} ALTER COLUMN ${column} SET STATISTICS 0`),
    ),
    'DROP FUNCTION IF EXISTS chunk_index_nearest(uuid[], vector, integer, uuid[], uuid[])',
    // The vector side in one statement: the function's own settings hold while it runs. A
    // transaction setting them first took four round trips to the store, each waiting for
    // this process's thread (busy ranking the keyword side meanwhile). The query is planned on
    // each call with its values, as a statement of its own would be.
    //
    // Chunks not merged into the graph yet: those named by `fresh_candidates` (the nearest, found
    // in memory), or, when it is NULL, all of the workspaces', compared one by one.
    `CREATE OR REPLACE FUNCTION chunk_index_nearest(workspace_ids uuid[], query vector, wanted integer, only_documents uuid[], excluded_documents uuid[],
                                                    fresh_candidates uuid[])
       RETURNS TABLE (chunk_id uuid, score float8) LANGUAGE plpgsql STABLE
       SET hnsw.iterative_scan = 'relaxed_order' SET hnsw.ef_search = ${efSearch}
     AS $nearest$
     DECLARE
       filter text := 'c.workspace_id = ANY($1)';
       graph text;
       fresh text;
     BEGIN
       IF only_documents IS NOT NULL THEN filter := filter || ' AND c.document_id = ANY($4)'; END IF;
       IF cardinality(excluded_documents) > 0 THEN filter := filter || ' AND NOT (c.document_id = ANY($5))'; END IF;
       graph := 'SELECT c.chunk_id, c.embedding <=> $2 AS distance FROM chunk_index c WHERE ' || filter || ' ORDER BY c.embedding <=> $2 LIMIT $3';
       IF fresh_candidates IS NOT NULL THEN
         IF cardinality(fresh_candidates) > 0 THEN fresh := 'c.chunk_id = ANY($6) AND ' || filter; END IF;
       ELSIF EXISTS (SELECT 1 FROM chunk_index_fresh c WHERE c.workspace_id = ANY(workspace_ids)) THEN
         fresh := filter;
       END IF;
       IF fresh IS NOT NULL THEN
         graph := 'SELECT n.chunk_id, n.distance FROM ((' || graph || ') UNION ALL (SELECT c.chunk_id, c.embedding <=> $2 AS distance FROM chunk_index_fresh c WHERE '
           || fresh || ' ORDER BY 2 LIMIT $3)) AS n ORDER BY n.distance LIMIT $3';
       END IF;
       RETURN QUERY EXECUTE 'SELECT g.chunk_id, 1 - g.distance FROM (' || graph || ') AS g'
         USING workspace_ids, query, wanted, only_documents, excluded_documents, fresh_candidates;
     END
     $nearest$`,
    // Per-workspace totals for BM25 were kept here by triggers; the in-memory keyword side counts them now.
    'DROP TRIGGER IF EXISTS chunk_index_added ON chunk_index',
    'DROP TRIGGER IF EXISTS chunk_index_removed ON chunk_index',
    'DROP FUNCTION IF EXISTS chunk_index_count_added()',
    'DROP FUNCTION IF EXISTS chunk_index_count_removed()',
    'DROP TABLE IF EXISTS chunk_index_stats',
    ...changeLogStatements,
  ];
}

export const indexMigrations: readonly IndexMigration[] = [
  { version: 1, name: 'tables', statements: tablesStatements },
  { version: 2, name: 'merge_moves_logged', statements: () => movedChangeStatements },
];

/** The tables `kb reindex` drops to make the index anew (`chunk_index_model` stays: it is rewritten). */
export const dropIndexTables = ['chunk_index_fresh', 'chunk_index', 'chunk_index_log', 'chunk_index_log_marks', 'chunk_index_schema', 'chunk_index_migrations'];

const migrationName = (migration: IndexMigration) => `${migration.version}_${migration.name}`;

/** What stores made before versions recorded in `chunk_index_schema`: a digest of the whole DDL they ran. */
export const legacyFingerprint = (dimensions: number) => createHash('sha256').update(indexMigrations[0]!.statements(dimensions).join(';\n')).digest('hex');

type Runner = Pick<PrismaClient, '$queryRawUnsafe'>;

/**
 * The versions the store records as applied, and whether it records them by version (else by
 * the fingerprint of the whole DDL, or not at all). Asks first which tables exist: a failed
 * statement would end the caller's transaction.
 */
async function appliedVersions(runner: Runner, dimensions: number): Promise<{ versions: Set<number>; byVersion: boolean }> {
  const [tables] = await runner.$queryRawUnsafe<{ versions: boolean; fingerprint: boolean }[]>(
    "SELECT to_regclass('chunk_index_migrations') IS NOT NULL AS versions, to_regclass('chunk_index_schema') IS NOT NULL AS fingerprint",
  );
  if (tables!.versions) {
    const rows = await runner.$queryRawUnsafe<{ version: number }[]>('SELECT version FROM chunk_index_migrations');
    return { versions: new Set(rows.map((row) => Number(row.version))), byVersion: true };
  }
  if (!tables!.fingerprint) return { versions: new Set(), byVersion: false };
  // A store made before versions: a fingerprint equal to version 1's (for the same dimensions)
  // means exactly its tables, so version 1 is recorded without running again.
  const [recorded] = await runner.$queryRawUnsafe<{ fingerprint: string }[]>('SELECT fingerprint FROM chunk_index_schema');
  return { versions: new Set(recorded?.fingerprint === legacyFingerprint(dimensions) ? [indexMigrations[0]!.version] : []), byVersion: false };
}

/**
 * Brings the index's tables to this version: the migrations the store has not recorded, in
 * order, in one transaction under a lock (processes starting together on one PostgreSQL apply
 * them once), each recorded in `chunk_index_migrations`. Returns the names of those it applied.
 * With `migrate` false (KB_MIGRATE=off) it only checks, and refuses when any is missing.
 */
export async function migrateIndexTables(prisma: PrismaClient, dimensions: number, { migrate }: { migrate: boolean }): Promise<string[]> {
  const missing = (applied: Set<number>) => indexMigrations.filter((migration) => !applied.has(migration.version));
  const found = await appliedVersions(prisma, dimensions);
  const pending = missing(found.versions);
  // A fingerprinted store at version 1's tables is recorded by version at the next migrating start.
  if (pending.length === 0 && (found.byVersion || !migrate)) return [];
  if (!migrate) {
    throw new MigrationsPendingError(`the pgvector index lacks ${pending.length} migrations of this version (${pending.map(migrationName).join(', ')})`);
  }
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await prisma.$transaction(
        async (tx) => {
          await tx.$executeRawUnsafe('SELECT pg_advisory_xact_lock(7241598)');
          const applied = (await appliedVersions(tx, dimensions)).versions;
          await tx.$executeRawUnsafe(
            'CREATE TABLE IF NOT EXISTS chunk_index_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())',
          );
          // A store that recorded a fingerprint: what it matched is recorded as applied, without running.
          for (const version of applied) {
            const migration = indexMigrations.find((candidate) => candidate.version === version)!;
            await tx.$executeRaw`INSERT INTO chunk_index_migrations (version, name) VALUES (${version}, ${migration.name}) ON CONFLICT (version) DO NOTHING`;
          }
          const toApply = missing(applied);
          for (const migration of toApply) {
            for (const statement of migration.statements(dimensions)) await tx.$executeRawUnsafe(statement);
            await tx.$executeRaw`INSERT INTO chunk_index_migrations (version, name) VALUES (${migration.version}, ${migration.name})`;
          }
          await tx.$executeRawUnsafe('DROP TABLE IF EXISTS chunk_index_schema');
          return toApply.map(migrationName);
        },
        { timeout: 60_000 },
      );
    } catch (error) {
      // A deadlock with another process's writes: PostgreSQL rolled this back; its turn comes again.
      if (attempt < 5 && /deadlock detected|40P01/.test((error as Error).message)) continue;
      throw error;
    }
  }
}
