import { setImmediate as nextTurn } from 'node:timers/promises';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import type { BackgroundWork } from '../../observability/background-work.js';
import { FreshVectors, parseVector } from './fresh-vectors.js';
import type { HeldWorkspace } from './held-workspace.js';
import type { SavedWorkspace } from './index-snapshots.js';
import type { VectorGraph } from './vector-graph.js';
import { retention } from './pgvector-change-log.js';
import { readingAhead } from './reading-ahead.js';
import { documentNameSql } from './stored-chunks.js';
import { TermPostings, type ChunkTerms } from './term-postings.js';

/**
 * A chunk's row in either table, as the in-memory side reads it, with whether it waits outside the
 * store's graph, and its vector (binary) where it does or where `graphVectors` asks for every
 * chunk's (a graph in memory is held).
 */
const bothTables = (graphVectors: boolean) => Prisma.sql`(SELECT chunk_id, document_id, workspace_id, terms, freqs, term_count,
                                      ${graphVectors ? Prisma.sql`vector_send(embedding)` : Prisma.sql`NULL::bytea`} AS vector, false AS outside_graph FROM chunk_index
                               UNION ALL SELECT chunk_id, document_id, workspace_id, terms, freqs, term_count, vector_send(embedding), true
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

type ChunkRow = {
  chunk_id: string;
  document_id: string | null;
  /** Its document's name as a search reads it (`readyChunks`' `documentName`). */
  document_name?: string | null;
  terms: string | null;
  freqs: string | null;
  term_count: number | null;
  vector?: Uint8Array | null;
  outside_graph?: boolean | null;
};

/** Vectors the graph's build reads per statement (about 1.5 kB each)... */
const graphPageRows = 400;
/** ...and in physical order, this many table blocks: about 400 chunks. */
const graphPageBlocks = 64;
/**
 * ...and adds between two turns of the event loop: adding one takes about 0.3 ms here, so a search
 * that arrives meanwhile waits at most a few milliseconds for the slice under way.
 */
const graphSliceRows = 12;

type WorkspaceSize = { rows: number; total: number; blocks: number };

/**
 * The workspace's rows of `chunk_index`, aliased `c` (the columns `columns` names), a page per statement so
 * other work on the store runs between pages, `beforePage` awaited before each. A workspace
 * holding a fifth of the table or more is read in physical order, a range of blocks at a time:
 * through the index it would be one random read per chunk (measured at 100,000 chunks: 4 s in
 * block ranges against over 20 s through the index). A smaller one is read through the index, in
 * chunk id order. Rows written after `size` was read are not all seen: the log holds them.
 */
async function* graphTableRows<Row extends { chunk_id: string }>(
  prisma: PrismaClient,
  workspaceId: string,
  size: WorkspaceSize,
  columns: Prisma.Sql,
  page: { rows: number; blocks: number },
  beforePage: () => Promise<void>,
): AsyncGenerator<Row[]> {
  if (size.rows === 0) return;
  if (size.rows >= 0.2 * size.total) {
    for (let block = 0; block < size.blocks; block += page.blocks) {
      await beforePage();
      yield await prisma.$queryRaw<Row[]>`
        SELECT ${columns} FROM chunk_index c
         WHERE ctid >= ${`(${block},0)`}::tid AND ctid < ${`(${block + page.blocks},0)`}::tid AND workspace_id = ${workspaceId}::uuid`;
    }
    return;
  }
  yield* rowsInIdOrder<Row>(prisma, Prisma.sql`chunk_index`, workspaceId, columns, page.rows, beforePage);
}

/** The workspace's rows of `table`, aliased `c`, in chunk id order, `pageRows` per statement. */
async function* rowsInIdOrder<Row extends { chunk_id: string }>(
  prisma: PrismaClient,
  table: Prisma.Sql,
  workspaceId: string,
  columns: Prisma.Sql,
  pageRows: number,
  beforePage: () => Promise<void>,
): AsyncGenerator<Row[]> {
  for (let after = '00000000-0000-0000-0000-000000000000'; ; ) {
    await beforePage();
    const rows = await prisma.$queryRaw<Row[]>`
      SELECT ${columns} FROM ${table} c WHERE workspace_id = ${workspaceId}::uuid AND chunk_id > ${after}::uuid ORDER BY chunk_id LIMIT ${pageRows}`;
    yield rows;
    if (rows.length < pageRows) return;
    after = rows.at(-1)!.chunk_id;
  }
}

/** The counts a workspace's reading is planned with. */
async function workspaceSize(prisma: PrismaClient, workspaceId: string) {
  const [mark] = await prisma.$queryRaw<(WorkspaceSize & { horizon: string; generation: string; fresh_rows: number })[]>`
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS horizon, (SELECT created_at::text FROM chunk_index_model) AS generation,
           (SELECT count(*) FROM chunk_index WHERE workspace_id = ${workspaceId}::uuid)::float8 AS rows,
           (SELECT count(*) FROM chunk_index_fresh WHERE workspace_id = ${workspaceId}::uuid)::float8 AS fresh_rows,
           (SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = 'chunk_index'::regclass)::float8 AS total,
           (pg_relation_size('chunk_index') / current_setting('block_size')::int)::float8 AS blocks`;
  return mark!;
}

/** The name of the document of the chunk aliased `c`. */
const documentNameColumn = Prisma.sql`(SELECT ${documentNameSql} FROM documents d WHERE d.id = c.document_id) AS document_name`;
const termColumns = Prisma.sql`chunk_id::text, document_id::text, array_to_string(terms, ' ') AS terms, array_to_string(freqs, ' ') AS freqs, term_count, ${documentNameColumn}`;
const vectorColumns = Prisma.sql`chunk_id::text, document_id::text, vector_send(embedding) AS vector`;

/** A chunk row as the in-memory side takes it; terms and counts come space-separated (analysed terms hold no spaces). */
function chunkTerms(row: ChunkRow): ChunkTerms | undefined {
  if (row.document_id === null || row.terms === null || row.freqs === null || row.term_count === null) return undefined;
  return {
    chunkId: row.chunk_id,
    documentId: row.document_id,
    terms: row.terms === '' ? [] : row.terms.split(' '),
    counts: row.freqs === '' ? [] : row.freqs.split(' ').map(Number),
    length: row.term_count,
    documentName: row.document_name ?? undefined,
  };
}

/**
 * Reads the workspace's chunks afresh (their terms, and the vectors of those outside the store's
 * graph), a page per statement so other work on the store runs between pages.
 */
export async function loadWorkspace(prisma: PrismaClient, backgroundWork: BackgroundWork | undefined, workspaceId: string, held: HeldWorkspace) {
  const size = await workspaceSize(prisma, workspaceId);
  held.loadSize.set(size.rows + size.fresh_rows);
  const postings = new TermPostings();
  const fresh = new FreshVectors();
  // A load that a search waits for asks the store for its next page while it takes the last.
  const awaited = () => !held.loadYields || held.waiters.awaited;
  const pages = graphTableRows<ChunkRow>(prisma, workspaceId, size, termColumns, { rows: loadPageSize, blocks: loadPageBlocks }, loadPause(backgroundWork, held));
  for await (const rows of readingAhead(pages, awaited)) await takeRows(rows, postings, fresh, false);
  await takeFreshRows(prisma, backgroundWork, workspaceId, held, postings, fresh, false);
  // Changes made while the pages were read are in the log above the horizon: the next sync applies
  // them. A graph in memory is built again from the store (`buildGraph`).
  Object.assign(held, { postings, fresh, graph: undefined, horizon: size.horizon, generation: size.generation, syncedAt: Date.now(), loadYields: false });
}

/**
 * Takes a workspace's saved postings (index-snapshots.ts) instead of reading every chunk's
 * terms: reads its chunks outside the store's graph, for their vectors, as `loadWorkspace` does,
 * then catches up with the change log from the horizon the postings were saved at. A catch-up
 * that finds them of another index, or older than what the log's cleanup kept, reads the
 * workspace afresh (`loadWorkspace`).
 */
export async function loadSavedWorkspace(
  prisma: PrismaClient,
  backgroundWork: BackgroundWork | undefined,
  workspaceId: string,
  held: HeldWorkspace,
  saved: Pick<SavedWorkspace, 'postings' | 'horizon' | 'generation'>,
) {
  const fresh = new FreshVectors();
  await takeFreshRows(prisma, backgroundWork, workspaceId, held, saved.postings, fresh, true);
  Object.assign(held, { postings: saved.postings, fresh, graph: undefined, horizon: saved.horizon, generation: saved.generation, syncedAt: Date.now(), loadYields: false });
  await catchUpWorkspace(prisma, backgroundWork, workspaceId, held);
}

/**
 * A turn of the event loop, so that a search that has arrived begins first, then a wait for the
 * searches in progress, unless one waits for this workspace: what background work on a held
 * workspace does between its steps.
 */
export async function yieldToSearches(backgroundWork: BackgroundWork | undefined, held: HeldWorkspace) {
  await nextTurn();
  await held.waiters.yieldUnlessAwaited(backgroundWork);
}

/** What a load awaits before each statement: loading ahead of searches, not for one, each page waits for the searches in progress. */
function loadPause(backgroundWork: BackgroundWork | undefined, held: HeldWorkspace) {
  return async () => {
    if (held.loadYields) await yieldToSearches(backgroundWork, held);
  };
}

/**
 * Takes a page of rows into the postings, and the vectors of chunks outside the store's graph.
 * Postings read back from disk keep the chunks they hold with the same terms (`keepHeld`); a
 * load from the store adds each chunk, with no check that costs a fingerprint per chunk.
 */
async function takeRows(rows: ChunkRow[], postings: TermPostings, fresh: FreshVectors, keepHeld: boolean) {
  for (let start = 0; start < rows.length; start += loadSliceRows) {
    if (start > 0) await nextTurn();
    for (const row of rows.slice(start, start + loadSliceRows)) {
      const chunk = chunkTerms(row);
      if (!chunk) continue;
      if (keepHeld) postings.refresh(chunk);
      else postings.add(chunk);
      if (row.vector) fresh.set(chunk.chunkId, chunk.documentId, parseVector(row.vector));
    }
  }
}

/** The workspace's chunks not merged into the store's graph yet: few, except after a bulk load, so a page at a time too. */
async function takeFreshRows(
  prisma: PrismaClient,
  backgroundWork: BackgroundWork | undefined,
  workspaceId: string,
  held: HeldWorkspace,
  postings: TermPostings,
  fresh: FreshVectors,
  keepHeld: boolean,
) {
  const awaited = () => !held.loadYields || held.waiters.awaited;
  const freshColumns = Prisma.sql`${termColumns}, vector_send(embedding) AS vector`;
  const pages = rowsInIdOrder<ChunkRow>(prisma, Prisma.sql`chunk_index_fresh`, workspaceId, freshColumns, loadPageSize, loadPause(backgroundWork, held));
  for await (const rows of readingAhead(pages, awaited)) await takeRows(rows, postings, fresh, keepHeld);
}

/**
 * Fills `graph` with every chunk vector of the workspace, in pages that wait for the searches in
 * progress and slices between turns of the event loop, then marks it complete. Stops, leaving it
 * incomplete, once `current` says the graph is no longer the workspace's.
 */
export async function buildGraph(
  prisma: PrismaClient,
  backgroundWork: BackgroundWork | undefined,
  workspaceId: string,
  held: HeldWorkspace,
  graph: VectorGraph,
  current: () => boolean,
) {
  const waitForSearches = async () => {
    await yieldToSearches(backgroundWork, held);
    if (!current()) throw new GraphBuildStopped();
  };
  const readIn = async (pages: AsyncGenerator<{ chunk_id: string; document_id: string; vector: Uint8Array }[]>) => {
    let mark = graph.mark();
    for await (const rows of pages) {
      for (let start = 0; start < rows.length; start += graphSliceRows) {
        if (start > 0) await waitForSearches();
        for (const row of rows.slice(start, start + graphSliceRows)) graph.readIn(mark, row.chunk_id, row.document_id, parseVector(row.vector));
      }
      mark = graph.mark();
    }
  };
  try {
    // The chunks outside the store's graph first: a merge moves chunks from there into the graph's
    // table, and a sync does not read a moved chunk again (its vector stays), so a chunk moved
    // after its page was read here is in the graph already, and one moved before is read from the
    // graph's table next. Read the other way round, a chunk moved in between was read in neither.
    await readIn(rowsInIdOrder(prisma, Prisma.sql`chunk_index_fresh`, workspaceId, vectorColumns, graphPageRows, waitForSearches));
    const size = await workspaceSize(prisma, workspaceId);
    await readIn(graphTableRows(prisma, workspaceId, size, vectorColumns, { rows: graphPageRows, blocks: graphPageBlocks }, waitForSearches));
  } catch (error) {
    if (error instanceof GraphBuildStopped) return;
    throw error;
  }
  graph.finish();
}

class GraphBuildStopped extends Error {}

/**
 * Applies the changes syncs noted in `graph`, a slice at a time between turns of the event loop,
 * each slice after the searches in progress, until none is left or `current` says the graph is no
 * longer the workspace's.
 */
export async function applyGraphChanges(backgroundWork: BackgroundWork | undefined, held: HeldWorkspace, graph: VectorGraph, current: () => boolean) {
  while (graph.pending > 0) {
    await yieldToSearches(backgroundWork, held);
    if (!current()) return;
    graph.applyPending(graphSliceRows);
  }
}

/**
 * Brings the held workspace up to date with the change log from `from` (its horizon; an earlier
 * one reads again what it holds already, which changes nothing but a graph that lacks it).
 */
export async function catchUpWorkspace(prisma: PrismaClient, backgroundWork: BackgroundWork | undefined, workspaceId: string, held: HeldWorkspace, from = held.horizon) {
  // The graph's vectors are read only for a graph held when the statements are made: one whose build
  // starts later reads the chunks itself.
  const graphVectors = held.graph !== undefined;
  // `stale`: the log's cleanup may have dropped rows this sync needs (see cleanChangeLog), or the
  // horizon is not this store's; the workspace is read afresh then, as after a reindex (a new
  // `generation`). A chunk whose every logged change since the horizon is a merge's move is not
  // read: it kept its terms.
  const rows = await prisma.$queryRaw<(ChunkRow & { horizon: string; generation: string; stale: boolean | null; logged: string | null; moved: boolean | null })[]>`
    WITH mark AS (
      SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS horizon, (SELECT created_at::text FROM chunk_index_model) AS generation,
             (SELECT horizon FROM chunk_index_log_marks WHERE marked_at < clock_timestamp() - ${retention}::interval
               ORDER BY marked_at DESC LIMIT 1) > ${from}::xid8
             -- A horizon the store has not reached: postings saved from a store since put back to an earlier copy.
             OR ${from}::xid8 > pg_snapshot_xmax(pg_current_snapshot()) AS stale
    ), changed AS (
      SELECT chunk_id, bool_and(moved) AS moved FROM chunk_index_log
       WHERE workspace_id = ${workspaceId}::uuid AND xid >= ${from}::xid8 GROUP BY chunk_id
    )
    SELECT mark.horizon, mark.generation, mark.stale, changed.chunk_id::text AS logged, changed.moved, c.chunk_id::text, c.document_id::text,
           array_to_string(c.terms, ' ') AS terms, array_to_string(c.freqs, ' ') AS freqs, c.term_count, c.vector, c.outside_graph, ${documentNameColumn}
      FROM mark LEFT JOIN changed ON true
      -- OFFSET 0 keeps the subquery whole, so NOT changed.moved gates its reads (a one-time
      -- filter before each lookup); flattened, it was a filter applied after them.
      LEFT JOIN LATERAL (SELECT * FROM ${bothTables(graphVectors)} AS b WHERE b.chunk_id = changed.chunk_id AND NOT changed.moved OFFSET 0) c ON true`;
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
    applyChange(held, row.logged, row, graphVectors);
  }
  if (movedUnheld.length > 0) {
    const read = await prisma.$queryRaw<ChunkRow[]>`
      SELECT chunk_id::text, document_id::text, array_to_string(terms, ' ') AS terms, array_to_string(freqs, ' ') AS freqs, term_count, vector, outside_graph,
             ${documentNameColumn}
        FROM ${bothTables(graphVectors)} AS c WHERE chunk_id = ANY(${movedUnheld}::uuid[])`;
    const byId = new Map(read.map((row) => [row.chunk_id, row]));
    for (const chunkId of movedUnheld) applyChange(held, chunkId, byId.get(chunkId), graphVectors);
  }
  held.horizon = first.horizon;
  held.syncedAt = Date.now();
}

/** A logged chunk as the tables hold it now (`row`), or gone from both (undefined, or a row of nulls). */
function applyChange(held: HeldWorkspace, chunkId: string, row: ChunkRow | undefined, graphVectors: boolean) {
  const graph = graphVectors ? held.graph : undefined;
  const chunk = row ? chunkTerms(row) : undefined;
  // Held already with these terms: moved by a merge, or read by the load as well as logged.
  // Written again with other terms (its document renamed): the new terms replace the old. Either
  // way its document's name is the one read now.
  if (chunk) {
    held.postings.refresh(chunk);
    const vector = row!.vector ? parseVector(row!.vector) : undefined;
    if (vector && row!.outside_graph) held.fresh.set(chunk.chunkId, chunk.documentId, vector);
    else held.fresh.delete(chunk.chunkId);
    graph?.applySync(chunk.chunkId, chunk.documentId, vector);
  } else {
    held.postings.remove(chunkId);
    held.fresh.delete(chunkId);
    graph?.applySync(chunkId);
  }
}
