import { setImmediate as nextTurn } from 'node:timers/promises';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import type { BackgroundWork } from '../../observability/background-work.js';
import { FreshVectors, parseVector } from './fresh-vectors.js';
import type { HeldWorkspace } from './held-workspace.js';
import { retention } from './pgvector-change-log.js';
import { TermPostings, type ChunkTerms } from './term-postings.js';

/** A chunk's row in either table, as the in-memory side reads it, with its vector (binary) when it waits outside the graph. */
const bothTables = Prisma.sql`(SELECT chunk_id, document_id, workspace_id, terms, freqs, term_count, NULL::bytea AS vector FROM chunk_index
                               UNION ALL SELECT chunk_id, document_id, workspace_id, terms, freqs, term_count, vector_send(embedding)
                                 FROM chunk_index_fresh)`;

/**
 * A search waits for the statement under way on the store, so a load asks small pages: through
 * the index, this many chunks per statement...
 */
const loadPageSize = 1_500;
/** ...and in physical order, this many table blocks (8 kB): about 1,500 chunks, 60 ms here. */
const loadPageBlocks = 256;

/**
 * Rows a load takes into its postings between two turns of the event loop: taking them costs about
 * 0.1 ms each here, and a search that arrives meanwhile runs between the slices.
 */
const loadSliceRows = 200;

type ChunkRow = { chunk_id: string; document_id: string | null; terms: string | null; freqs: string | null; term_count: number | null; vector?: Uint8Array | null };

/** A chunk row as the in-memory side takes it; terms and counts come space-separated (analysed terms hold no spaces). */
function chunkTerms(row: ChunkRow): ChunkTerms | undefined {
  if (row.document_id === null || row.terms === null || row.freqs === null || row.term_count === null) return undefined;
  return {
    chunkId: row.chunk_id,
    documentId: row.document_id,
    terms: row.terms === '' ? [] : row.terms.split(' '),
    counts: row.freqs === '' ? [] : row.freqs.split(' ').map(Number),
    length: row.term_count,
  };
}

/**
 * Reads the workspace's chunks afresh, a page per statement so other work on the store runs
 * between pages. A workspace holding a fifth of the table or more is read in physical order,
 * a range of blocks at a time: through the index it would be one random read per chunk
 * (measured at 100,000 chunks: 4 s in block ranges against over 20 s through the index). A
 * smaller one is read through the index, in chunk id order.
 */
export async function loadWorkspace(prisma: PrismaClient, backgroundWork: BackgroundWork | undefined, workspaceId: string, held: HeldWorkspace) {
  // Loading ahead of searches, not for one: each page waits for the searches in progress. The
  // turn of the event loop first lets a search that has arrived begin before the page is asked.
  const page = async () => {
    if (!held.loadYields) return;
    await nextTurn();
    await held.waiters.yieldUnlessAwaited(backgroundWork);
  };
  const [mark] = await prisma.$queryRaw<{ horizon: string; generation: string; rows: number; fresh_rows: number; total: number; blocks: number }[]>`
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS horizon, (SELECT created_at::text FROM chunk_index_model) AS generation,
           (SELECT count(*) FROM chunk_index WHERE workspace_id = ${workspaceId}::uuid)::float8 AS rows,
           (SELECT count(*) FROM chunk_index_fresh WHERE workspace_id = ${workspaceId}::uuid)::float8 AS fresh_rows,
           (SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = 'chunk_index'::regclass)::float8 AS total,
           (pg_relation_size('chunk_index') / current_setting('block_size')::int)::float8 AS blocks`;
  held.loadSize.set(mark!.rows + mark!.fresh_rows);
  const postings = new TermPostings();
  const fresh = new FreshVectors();
  const take = async (rows: ChunkRow[]) => {
    for (let start = 0; start < rows.length; start += loadSliceRows) {
      if (start > 0) await nextTurn();
      for (const row of rows.slice(start, start + loadSliceRows)) {
        const chunk = chunkTerms(row);
        if (!chunk) continue;
        postings.add(chunk);
        if (row.vector) fresh.set(chunk.chunkId, chunk.documentId, parseVector(row.vector));
      }
    }
  };
  if (mark!.rows > 0 && mark!.rows >= 0.2 * mark!.total) {
    // Rows written after the size was read are in the log above the horizon.
    for (let block = 0; block < mark!.blocks; block += loadPageBlocks) {
      await page();
      await take(
        await prisma.$queryRaw<ChunkRow[]>`
          SELECT chunk_id::text, document_id::text, array_to_string(terms, ' ') AS terms, array_to_string(freqs, ' ') AS freqs, term_count
            FROM chunk_index
           WHERE ctid >= ${`(${block},0)`}::tid AND ctid < ${`(${block + loadPageBlocks},0)`}::tid AND workspace_id = ${workspaceId}::uuid`,
      );
    }
  } else if (mark!.rows > 0) {
    let after = '00000000-0000-0000-0000-000000000000';
    for (;;) {
      await page();
      const rows = await prisma.$queryRaw<ChunkRow[]>`
        SELECT chunk_id::text, document_id::text, array_to_string(terms, ' ') AS terms, array_to_string(freqs, ' ') AS freqs, term_count
          FROM chunk_index WHERE workspace_id = ${workspaceId}::uuid AND chunk_id > ${after}::uuid
         ORDER BY chunk_id LIMIT ${loadPageSize}`;
      await take(rows);
      if (rows.length < loadPageSize) break;
      after = rows.at(-1)!.chunk_id;
    }
  }
  // Chunks not merged into the graph yet: few, except after a bulk load, so a page at a time too.
  for (let after = '00000000-0000-0000-0000-000000000000'; ; ) {
    await page();
    const rows = await prisma.$queryRaw<ChunkRow[]>`
      SELECT chunk_id::text, document_id::text, array_to_string(terms, ' ') AS terms, array_to_string(freqs, ' ') AS freqs, term_count,
             vector_send(embedding) AS vector
        FROM chunk_index_fresh WHERE workspace_id = ${workspaceId}::uuid AND chunk_id > ${after}::uuid
       ORDER BY chunk_id LIMIT ${loadPageSize}`;
    await take(rows);
    if (rows.length < loadPageSize) break;
    after = rows.at(-1)!.chunk_id;
  }
  // Changes made while the pages were read are in the log above the horizon: the next sync applies them.
  Object.assign(held, { postings, fresh, horizon: mark!.horizon, generation: mark!.generation, syncedAt: Date.now(), loadYields: false });
}

export async function catchUpWorkspace(prisma: PrismaClient, backgroundWork: BackgroundWork | undefined, workspaceId: string, held: HeldWorkspace) {
  // `stale`: the log's cleanup may have dropped rows this sync needs (see cleanChangeLog); the
  // workspace is read afresh then, as after a reindex (a new `generation`). A chunk whose every
  // logged change since the horizon is a merge's move is not read: it kept its terms.
  const rows = await prisma.$queryRaw<(ChunkRow & { horizon: string; generation: string; stale: boolean | null; logged: string | null; moved: boolean | null })[]>`
    WITH mark AS (
      SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS horizon, (SELECT created_at::text FROM chunk_index_model) AS generation,
             (SELECT horizon FROM chunk_index_log_marks WHERE marked_at < clock_timestamp() - ${retention}::interval
               ORDER BY marked_at DESC LIMIT 1) > ${held.horizon}::xid8 AS stale
    ), changed AS (
      SELECT chunk_id, bool_and(moved) AS moved FROM chunk_index_log
       WHERE workspace_id = ${workspaceId}::uuid AND xid >= ${held.horizon}::xid8 GROUP BY chunk_id
    )
    SELECT mark.horizon, mark.generation, mark.stale, changed.chunk_id::text AS logged, changed.moved, c.chunk_id::text, c.document_id::text,
           array_to_string(c.terms, ' ') AS terms, array_to_string(c.freqs, ' ') AS freqs, c.term_count, c.vector
      FROM mark LEFT JOIN changed ON true
      -- OFFSET 0 keeps the subquery whole, so NOT changed.moved gates its reads (a one-time
      -- filter before each lookup); flattened, it was a filter applied after them.
      LEFT JOIN LATERAL (SELECT * FROM ${bothTables} AS b WHERE b.chunk_id = changed.chunk_id AND NOT changed.moved OFFSET 0) c ON true`;
  const [first] = rows;
  if (!first) throw new Error('the keyword sync read no horizon');
  if (first.generation !== held.generation || first.stale) {
    await loadWorkspace(prisma, backgroundWork, workspaceId, held);
    return;
  }
  // Moved, but not held: a load that read the graph's table before the move and the waiting
  // chunks' after it saw the chunk in neither.
  const movedUnheld: string[] = [];
  for (const [position, row] of rows.entries()) {
    // Taking the rows in is JavaScript (about 0.1 ms a row): after a bulk write, thousands of them
    // would hold the event loop, and the searches' timers, for hundreds of milliseconds.
    if (position > 0 && position % loadSliceRows === 0) await nextTurn();
    if (row.logged === null) continue;
    if (row.moved) {
      if (held.postings.has(row.logged)) held.fresh.delete(row.logged);
      else movedUnheld.push(row.logged);
      continue;
    }
    applyChange(held, row.logged, row);
  }
  if (movedUnheld.length > 0) {
    const read = await prisma.$queryRaw<ChunkRow[]>`
      SELECT chunk_id::text, document_id::text, array_to_string(terms, ' ') AS terms, array_to_string(freqs, ' ') AS freqs, term_count, vector
        FROM ${bothTables} AS b WHERE chunk_id = ANY(${movedUnheld}::uuid[])`;
    const byId = new Map(read.map((row) => [row.chunk_id, row]));
    for (const chunkId of movedUnheld) applyChange(held, chunkId, byId.get(chunkId));
  }
  held.horizon = first.horizon;
  held.syncedAt = Date.now();
}

/** A logged chunk as the tables hold it now (`row`), or gone from both (undefined, or a row of nulls). */
function applyChange(held: HeldWorkspace, chunkId: string, row: ChunkRow | undefined) {
  const chunk = row ? chunkTerms(row) : undefined;
  // Held already with these terms: moved by a merge, or read by the load as well as logged.
  // Written again with other terms (its document renamed): the new terms replace the old.
  if (chunk) {
    if (!held.postings.holds(chunk)) held.postings.add(chunk);
    if (row!.vector) held.fresh.set(chunk.chunkId, chunk.documentId, parseVector(row!.vector));
    else held.fresh.delete(chunk.chunkId);
  } else {
    held.postings.remove(chunkId);
    held.fresh.delete(chunkId);
  }
}
