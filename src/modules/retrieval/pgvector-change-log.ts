import type { PrismaClient } from '../../generated/prisma/client.js';

/**
 * DDL of the change log the in-memory keyword side follows: one row per chunk inserted into or
 * deleted from `chunk_index` or `chunk_index_fresh`, written by statement triggers, with the
 * writing transaction's id. A merge into the graph moves rows from one to the other: logged
 * twice, it changes nothing a reader holds (a moved chunk keeps its terms), but a reader that read
 * the tables while the merge ran learns of the rows it may have missed.
 */
export const changeLogStatements = [
  `CREATE TABLE IF NOT EXISTS chunk_index_log (
     seq bigserial PRIMARY KEY,
     workspace_id uuid NOT NULL,
     chunk_id uuid NOT NULL,
     xid xid8 NOT NULL DEFAULT pg_current_xact_id()
   )`,
  'CREATE INDEX IF NOT EXISTS chunk_index_log_workspace ON chunk_index_log (workspace_id, xid)',
  'CREATE INDEX IF NOT EXISTS chunk_index_log_xid ON chunk_index_log (xid)',
  // When a cleanup ran and the oldest transaction then running: log rows older than a mark an
  // hour old are behind every reader that synced within the hour (see `cleanChangeLog`).
  `CREATE TABLE IF NOT EXISTS chunk_index_log_marks (
     marked_at timestamptz PRIMARY KEY DEFAULT clock_timestamp(),
     horizon xid8 NOT NULL
   )`,
  `CREATE OR REPLACE FUNCTION chunk_index_log_added() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     INSERT INTO chunk_index_log (workspace_id, chunk_id) SELECT workspace_id, chunk_id FROM added;
     RETURN NULL;
   END $$`,
  `CREATE OR REPLACE FUNCTION chunk_index_log_removed() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     INSERT INTO chunk_index_log (workspace_id, chunk_id) SELECT workspace_id, chunk_id FROM removed;
     RETURN NULL;
   END $$`,
  ...['chunk_index', 'chunk_index_fresh'].flatMap((table) => [
    `DROP TRIGGER IF EXISTS chunk_index_log_added ON ${table}`,
    `CREATE TRIGGER chunk_index_log_added AFTER INSERT ON ${table} REFERENCING NEW TABLE AS added
       FOR EACH STATEMENT EXECUTE FUNCTION chunk_index_log_added()`,
    `DROP TRIGGER IF EXISTS chunk_index_log_removed ON ${table}`,
    `CREATE TRIGGER chunk_index_log_removed AFTER DELETE ON ${table} REFERENCING OLD TABLE AS removed
       FOR EACH STATEMENT EXECUTE FUNCTION chunk_index_log_removed()`,
  ]),
];

/**
 * The transaction setting a merge into the graph sets for its own statement (`mergeIntoGraph`):
 * rows the triggers log while it is on are marked `moved`. A reader that holds a moved chunk
 * already need not read it again (it keeps its terms); during a large merge that was most of
 * what each search's sync read.
 */
export const movingSetting = 'kb.index_moving';

/** Version 2 of the index's tables: the log tells a merge's moves from other writes. */
export const movedChangeStatements = [
  'ALTER TABLE chunk_index_log ADD COLUMN IF NOT EXISTS moved boolean NOT NULL DEFAULT false',
  ...(['added', 'removed'] as const).map(
    (transition) => `CREATE OR REPLACE FUNCTION chunk_index_log_${transition}() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     INSERT INTO chunk_index_log (workspace_id, chunk_id, moved)
     SELECT workspace_id, chunk_id, coalesce(current_setting('${movingSetting}', true), '') = 'on' FROM ${transition};
     RETURN NULL;
   END $$`,
  ),
];

/** How long log rows are kept after a cleanup marks them as old. */
const logRetentionHours = 24;
export const retention = `${logRetentionHours} hours`;

/**
 * Drops log rows no reader should need: those of transactions older than the horizon marked by
 * a cleanup at least `logRetentionHours` ago. Horizons only grow, so a reader synced since that
 * mark was made needs none of them. A reader with an older horizon (held for longer without a
 * sync: the background refresh makes that rare) finds it out in its next sync, in the same
 * statement that reads the log, and reloads its workspace.
 */
export async function cleanChangeLog(prisma: PrismaClient) {
  await prisma.$transaction([
    prisma.$executeRaw`INSERT INTO chunk_index_log_marks (horizon) VALUES (pg_snapshot_xmin(pg_current_snapshot())) ON CONFLICT DO NOTHING`,
    prisma.$executeRaw`
      DELETE FROM chunk_index_log
       WHERE xid < (SELECT horizon FROM chunk_index_log_marks WHERE marked_at < clock_timestamp() - ${retention}::interval ORDER BY marked_at DESC LIMIT 1)`,
    prisma.$executeRaw`
      DELETE FROM chunk_index_log_marks
       WHERE marked_at < (SELECT max(marked_at) FROM chunk_index_log_marks WHERE marked_at < clock_timestamp() - ${retention}::interval)`,
  ]);
}
