import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';

/**
 * The distinct workspaces of an index table, found by skipping through the index that leads with
 * `workspace_id` (one descent per workspace): a few pages read, where `DISTINCT` or `GROUP BY`
 * over the table reads every row. At 120,000 chunks on the embedded store those took 65-250 ms
 * each, and at a start they ran just before the first requests, which waited behind them on the
 * store's only connection.
 */
const distinctWorkspaces = (table: 'chunk_index' | 'chunk_index_fresh') => Prisma.sql`
  WITH RECURSIVE present AS (
    (SELECT workspace_id FROM ${Prisma.raw(table)} ORDER BY workspace_id LIMIT 1)
    UNION ALL
    SELECT (SELECT t.workspace_id FROM ${Prisma.raw(table)} t WHERE t.workspace_id > p.workspace_id ORDER BY t.workspace_id LIMIT 1)
      FROM present p WHERE p.workspace_id IS NOT NULL
  )
  SELECT workspace_id FROM present WHERE workspace_id IS NOT NULL`;

/** The workspaces with chunks in the index, merged into its graph or still outside it. */
export async function workspacesInIndex(prisma: PrismaClient): Promise<Set<string>> {
  const rows = await prisma.$queryRaw<{ workspace_id: string }[]>`
    SELECT workspace_id::text FROM (${distinctWorkspaces('chunk_index')}) AS merged
    UNION SELECT workspace_id::text FROM (${distinctWorkspaces('chunk_index_fresh')}) AS fresh`;
  return new Set(rows.map((row) => row.workspace_id));
}

/**
 * The workspaces with chunks merged into the graph, largest first by the planner's statistics
 * (the table's row estimate times each workspace's share among its most common values, read for
 * the schema the table is found in), which the store keeps current by its own analysing. An
 * estimate, to order loads by: a workspace the statistics do not name, or a table never
 * analysed, counts as 0 and comes after, in id order.
 */
export async function workspacesLargestFirst(prisma: PrismaClient): Promise<{ workspaceId: string; estimatedChunks: number }[]> {
  const rows = await prisma.$queryRaw<{ workspaceId: string; estimatedChunks: number }[]>`
    WITH shares AS (
      SELECT common.workspace_id, common.share
        FROM pg_stats s, unnest(s.most_common_vals::text::text[], s.most_common_freqs) AS common(workspace_id, share)
       WHERE s.schemaname = (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = 'chunk_index'::regclass)
         AND s.tablename = 'chunk_index' AND s.attname = 'workspace_id'
    ), rows AS (
      SELECT GREATEST(reltuples, 0) AS estimate FROM pg_class WHERE oid = 'chunk_index'::regclass
    )
    SELECT w.workspace_id::text AS "workspaceId", round(COALESCE(shares.share, 0) * (SELECT estimate FROM rows))::float8 AS "estimatedChunks"
      FROM (${distinctWorkspaces('chunk_index')}) AS w
      LEFT JOIN shares ON shares.workspace_id = w.workspace_id::text
     ORDER BY 2 DESC, 1`;
  return rows;
}
