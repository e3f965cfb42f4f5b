import type { BackgroundWork } from '../observability/background-work.js';

/** What maintenance needs of a connection pool (pg.Pool has it). */
export type Queryable = { query<Row>(sql: string, values?: unknown[]): Promise<{ rows: Row[] }> };

/**
 * What PostgreSQL's autovacuum does, for the embedded store, which has no background workers:
 * PGlite never analyses or vacuums on its own. Without statistics the planner misjudges the
 * tables: it takes a workspace of 10,000 chunks for 365 rows, sorts every vector of the
 * workspace instead of walking the HNSW graph (262 ms against 25 ms), and joins a search's
 * read-back through every document of the workspace.
 *
 * The thresholds are autovacuum's defaults: analyse a table when more than 50 + 10% of its rows
 * changed since its last analysis, vacuum it when more than 50 + 20% of its rows are dead.
 * The change counters live in memory and restart at zero with the process (statistics themselves
 * are kept on disk), so a table is also analysed when it never was, or when its file has grown by
 * more than a fifth since its last analysis: that survives a restart.
 *
 * A table with an HNSW index is analysed but never vacuumed here: vacuuming the graph held the
 * store's one connection for 35 s at 11,000 chunks (3,000 of them deleted), and every search and
 * write would wait that long. Its dead rows stay until then (docs/retrieval.md).
 */
export const maintenanceThresholds = { base: 50, analyzeScale: 0.1, vacuumScale: 0.2 } as const;

/**
 * VACUUM waits while a graph merge runs (one ran within this many milliseconds). The merge
 * deletes each row it moves from the table of waiting chunks: after a bulk load of 100,000
 * chunks that table came due every 1.5-2 minutes, and each VACUUM held the store for about 2 s
 * (docs/benchmarks.md). A merge that drains the table empties it at its end (TRUNCATE), so the
 * VACUUM put off has little or nothing left to do.
 */
export const vacuumAfterMergeMs = 10_000;

type TableState = { name: string; tuples: number; changed: number; dead: number; pages: number; analyzedPages: number; hnsw: boolean };

/** Tables of the public schema due for ANALYZE and for VACUUM, by the thresholds above. */
export async function tablesDue(pool: Queryable): Promise<{ analyze: string[]; vacuum: string[] }> {
  // Counters reach shared statistics when the backend next goes idle, at most once a second unless asked.
  await pool.query('SELECT pg_stat_force_next_flush()');
  const { rows } = await pool.query<TableState>(`
    SELECT s.relname AS name, c.reltuples::float8 AS tuples, s.n_mod_since_analyze::float8 AS changed,
           s.n_dead_tup::float8 AS dead, c.relpages::float8 AS "analyzedPages",
           (pg_relation_size(c.oid) / current_setting('block_size')::int)::float8 AS pages,
           EXISTS (SELECT 1 FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_am am ON am.oid = ic.relam
                    WHERE i.indrelid = c.oid AND am.amname = 'hnsw') AS hnsw
      FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
     WHERE s.schemaname = 'public'`);
  const { base, analyzeScale, vacuumScale } = maintenanceThresholds;
  const analyze: string[] = [];
  const vacuum: string[] = [];
  for (const table of rows) {
    const tuples = Math.max(table.tuples, 0);
    const neverAnalyzed = table.tuples < 0;
    const grown = table.pages > 8 + 1.2 * table.analyzedPages;
    if (neverAnalyzed || grown || table.changed > base + analyzeScale * tuples) analyze.push(table.name);
    if (!table.hnsw && table.dead > base + vacuumScale * tuples) vacuum.push(table.name);
  }
  return { analyze, vacuum };
}

const quoted = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** Runs what is due once; returns what it did, for the log. */
export async function maintainOnce(pool: Queryable, work: BackgroundWork): Promise<{ analyzed: string[]; vacuumed: string[] }> {
  const due = await tablesDue(pool);
  const vacuum = work.sinceLastRunMs('graph_merge') < vacuumAfterMergeMs ? [] : due.vacuum;
  // VACUUM (ANALYZE) does both; a table only due for analysis gets the cheaper ANALYZE.
  // One table per statement, each after the searches in progress: a search waits for one at most.
  for (const name of vacuum) {
    await work.turn();
    await work.time('vacuum', () => pool.query(`VACUUM (ANALYZE) ${quoted(name)}`));
  }
  for (const name of due.analyze.filter((table) => !vacuum.includes(table))) {
    await work.turn();
    await work.time('analyze', () => pool.query(`ANALYZE ${quoted(name)}`));
  }
  return { analyzed: due.analyze, vacuumed: vacuum };
}

/**
 * Checks at once and then every `intervalMs` (one cheap query), and maintains what is due, then
 * runs `alsoEachTime` (the page cache's growth). The timer does not keep the process alive;
 * `stop` waits for a run in progress.
 */
export function startEmbeddedMaintenance(
  pool: Queryable,
  work: BackgroundWork,
  intervalMs: number,
  onError: (error: unknown) => void,
  alsoEachTime: () => Promise<void> = async () => {},
) {
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;
  let busy = false;
  const tick = () => {
    // A run that outlasts the interval (a long VACUUM, a restart of the store) is not doubled.
    if (stopped || busy) return;
    busy = true;
    running = maintainOnce(pool, work)
      .then(() => (stopped ? undefined : alsoEachTime()))
      .catch(onError)
      .finally(() => (busy = false));
  };
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  tick();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
