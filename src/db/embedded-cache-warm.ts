import type { BackgroundWork } from '../observability/background-work.js';
import type { Queryable } from './embedded-maintenance.js';

/** Pages read per statement: about 1 MB, a few milliseconds of the store's one connection. */
export const warmSliceBlocks = 128;

type Relation = { name: string; blocks: number; hnsw: boolean; reads: number };

export type WarmResult = { relations: number; blocks: number };

/**
 * The relations of the public schema in the order they are worth reading: the HNSW graphs
 * first (a vector search visits pages all over its graph, each read through the WebAssembly
 * file system when missed), then tables and indexes by the rows queries read from them per page
 * since the statistics began (kept on disk across restarts), smaller first among equals. Rows
 * read, not pages touched: a bulk load touches every page of the tables it fills, and searches
 * may never ask for most of them (the chunks' text is read for ten hits at a time).
 */
async function relationsToWarm(pool: Queryable): Promise<Relation[]> {
  const { rows } = await pool.query<Relation>(`
    SELECT c.oid::regclass::text AS name,
           (pg_relation_size(c.oid) / current_setting('block_size')::int)::float8 AS blocks,
           coalesce(am.amname = 'hnsw', false) AS hnsw,
           coalesce(t.seq_tup_read + coalesce(t.idx_tup_fetch, 0), i.idx_tup_read, 0)::float8 AS reads
      FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace
      LEFT JOIN pg_am am ON am.oid = c.relam
      LEFT JOIN pg_stat_user_tables t ON t.relid = c.oid
      LEFT JOIN pg_stat_user_indexes i ON i.indexrelid = c.oid
     WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i')`);
  const density = (relation: Relation) => relation.reads / relation.blocks;
  return rows
    .filter((relation) => relation.blocks > 0)
    .sort((a, b) => Number(b.hnsw) - Number(a.hnsw) || density(b) - density(a) || a.blocks - b.blocks);
}

/**
 * Reads what searches use into the embedded store's page cache after the store opens with an
 * empty one (at start, and after a restart for a larger cache). PGlite has no pg_prewarm and no
 * operating-system read-ahead into its cache: without this, every page a search touched for
 * the first time was read through the WebAssembly file system, and vector searches took 150-
 * 200 ms at the 90th percentile for two minutes after a restart at 120,000 chunks
 * (docs/benchmarks.md). pageinspect's `get_raw_page` reads a page through the cache and leaves
 * it there.
 *
 * Up to `megabytes` (a share of the cache: KB_STORE_CACHE_WARM_PERCENT), a slice of `warmSliceBlocks` pages per statement, each
 * after the searches in progress (`BackgroundWork.turn`), so a search waits for one slice at
 * most. Stops between slices once `signal` is aborted. A relation dropped meanwhile is passed over.
 */
export async function warmPageCache(pool: Queryable, work: BackgroundWork, megabytes: number, signal: AbortSignal): Promise<WarmResult> {
  if (megabytes <= 0) return { relations: 0, blocks: 0 };
  await pool.query('CREATE SCHEMA IF NOT EXISTS pageinspect');
  await pool.query('CREATE EXTENSION IF NOT EXISTS pageinspect SCHEMA pageinspect');
  const blockBytes = 8192;
  let budget = Math.floor((megabytes * 1024 * 1024) / blockBytes);
  const result: WarmResult = { relations: 0, blocks: 0 };
  for (const relation of await relationsToWarm(pool)) {
    if (budget <= 0 || signal.aborted) break;
    const blocks = Math.min(relation.blocks, budget);
    try {
      for (let from = 0; from < blocks; from += warmSliceBlocks) {
        if (signal.aborted) return result;
        const to = Math.min(blocks, from + warmSliceBlocks) - 1;
        await work.turn();
        await work.time('cache_warm', () =>
          pool.query(`SELECT count(pageinspect.get_raw_page($1::text, 'main', b)) FROM generate_series($2::bigint, $3::bigint) AS b`, [relation.name, from, to]),
        );
        result.blocks += to - from + 1;
      }
    } catch (error) {
      // 42P01: dropped since it was listed; a shorter relation (truncated) ends its loop the same way.
      const code = (error as { code?: string }).code;
      if (code !== '42P01' && !/block number \d+ is out of range/.test((error as Error).message)) throw error;
    }
    result.relations += 1;
    budget -= blocks;
  }
  return result;
}
