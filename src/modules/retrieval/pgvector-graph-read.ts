import type { PrismaClient } from '../../generated/prisma/client.js';

/** Of PostgreSQL's shared buffers, the share the graph and its table may take to be read in ahead. */
const bufferShare = 0.75;

/** The advisory lock one process holds while it reads the graph in: the buffers are the server's, so one read serves every process. */
const graphReadLock = 7241601;

/** Memory the walk's iterative scan may hold for the elements it has seen: with 256 MB it visited all 1,020,000 of a benchmark's graph. */
const walkWorkMem = '256MB';

export type GraphRead =
  | { read: true; rows: number; pages: number; pagesFromOutside: number; bytes: number; ms: number }
  | { read: false; reason: 'empty' | 'too large'; bytes: number; budgetBytes: number }
  | { read: false; reason: 'stopped' | 'another process reads it' };

/**
 * Reads the HNSW graph (`chunk_index_embedding`) and the rows it points to into PostgreSQL's
 * shared buffers, so that the searches after a start do not read them from outside one page at a
 * time. At 1,000,000 chunks a search of a cold graph read about 1,400 pages from outside the
 * buffers and took 50-335 ms (median 111 ms); with the pages in the buffers it took 2-10 ms.
 *
 * PostgreSQL has no way to read an index into its buffers without an extension (pg_prewarm is not
 * always installed, nor allowed), so this walks the graph: an iterative index scan ordered by
 * distance to one chunk's vector, under a filter no row passes, visits every element until none
 * is left (about 20 s of one core for 1,000,000 chunks). Only when the graph and its table take
 * at most `bufferShare` of the buffers (`budgetBytes`); else the walk would push out its own
 * first pages, and the buffers want sizing (docs/deployment.md). One process at a time walks
 * (an advisory lock; the others say so and go on). Stopping `signal` cancels the walk's statement
 * on the server.
 */
export async function readGraphIntoBuffers(prisma: PrismaClient, signal: AbortSignal, budgetBytes?: number): Promise<GraphRead> {
  const stopped = { read: false, reason: 'stopped' } as const;
  if (signal.aborted) return stopped;
  const started = performance.now();
  let backend: number | undefined;
  const cancel = () => {
    if (backend !== undefined) void prisma.$queryRaw`SELECT pg_cancel_backend(${backend}::int)`.catch(() => undefined);
  };
  signal.addEventListener('abort', cancel, { once: true });
  try {
    // One transaction, whose server process is known before any statement that may wait (for a
    // lock on the table, say) or run long: stopping cancels whichever runs.
    return await prisma.$transaction(
      async (tx): Promise<GraphRead> => {
        const [held] = await tx.$queryRaw<{ pid: number; locked: boolean }[]>`SELECT pg_backend_pid() AS pid, pg_try_advisory_xact_lock(${graphReadLock}::int8) AS locked`;
        backend = held!.pid;
        if (signal.aborted) return stopped;
        if (!held!.locked) return { read: false, reason: 'another process reads it' };
        const [size] = await tx.$queryRaw<{ bytes: number; buffers: number; filled: boolean }[]>`
          SELECT (pg_relation_size('chunk_index_embedding') + pg_relation_size('chunk_index'))::float8 AS bytes,
                 pg_size_bytes(current_setting('shared_buffers'))::float8 AS buffers,
                 EXISTS (SELECT 1 FROM chunk_index) AS filled`;
        const budget = budgetBytes ?? bufferShare * size!.buffers;
        if (!size!.filled) return { read: false, reason: 'empty', bytes: size!.bytes, budgetBytes: budget };
        if (size!.bytes > budget) return { read: false, reason: 'too large', bytes: size!.bytes, budgetBytes: budget };
        // Only the graph orders rows by distance, so with these the plan is the walk: no table
        // scan, no sort, no parallel workers (each would walk its own way).
        for (const setting of [
          "SET LOCAL hnsw.iterative_scan = 'relaxed_order'",
          'SET LOCAL hnsw.max_scan_tuples = 2147483647',
          `SET LOCAL work_mem = '${walkWorkMem}'`,
          'SET LOCAL enable_seqscan = off',
          'SET LOCAL enable_bitmapscan = off',
          'SET LOCAL enable_sort = off',
          'SET LOCAL max_parallel_workers_per_gather = 0',
        ]) {
          await tx.$executeRawUnsafe(setting);
        }
        if (signal.aborted) return stopped;
        const [row] = await tx.$queryRawUnsafe<{ 'QUERY PLAN': { Plan: WalkPlan }[] }[]>(
          `EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON)
             SELECT c.chunk_id FROM chunk_index c WHERE c.term_count < 0
              ORDER BY c.embedding <=> (SELECT embedding FROM chunk_index LIMIT 1) LIMIT 1`,
        );
        const plan = row!['QUERY PLAN'][0]!.Plan;
        return {
          read: true,
          rows: findScan(plan)?.['Rows Removed by Filter'] ?? 0,
          pages: (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0),
          pagesFromOutside: plan['Shared Read Blocks'] ?? 0,
          bytes: size!.bytes,
          ms: performance.now() - started,
        };
      },
      { timeout: 30 * 60_000, maxWait: 10_000 },
    );
  } catch (error) {
    if (signal.aborted) return stopped;
    throw error;
  } finally {
    signal.removeEventListener('abort', cancel);
  }
}

type WalkPlan = {
  'Node Type': string;
  'Index Name'?: string;
  'Rows Removed by Filter'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  Plans?: WalkPlan[];
};

/** The plan's scan of the graph. */
function findScan(plan: WalkPlan): WalkPlan | undefined {
  if (plan['Index Name'] === 'chunk_index_embedding') return plan;
  for (const child of plan.Plans ?? []) {
    const found = findScan(child);
    if (found) return found;
  }
  return undefined;
}
