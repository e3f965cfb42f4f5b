import type { PrismaClient } from '../../generated/prisma/client.js';
import { movingSetting } from './pgvector-change-log.js';

/** Up to this many pages (8 MB, about 4,500 waiting chunks), `graphBacklog` counts the table exactly (a few milliseconds); past them it counts a sample of about this many pages. */
const exactCountPages = 1_024;

const firstUuid = '00000000-0000-0000-0000-000000000000';

/** An HNSW element's bytes beyond its vector: its header and up to 32 neighbours of 6 bytes on the bottom layer, and the upper layers' few. */
const graphElementOverheadBytes = 256;

/** Moving the chunks written since the last merge into the HNSW graph: how many wait, the merge itself, the space it leaves. */
export class FreshRowsMerge {
  /** The last chunk id this process merged into the graph (see mergeIntoGraph). */
  #mergeCursor = firstUuid;

  constructor(private readonly prisma: PrismaClient) {}

  /**
   * Empties the table of waiting chunks when a merge has drained it: TRUNCATE gives its space back
   * at once, where a VACUUM of the rows the merge deleted would hold the store for seconds. Only
   * when no row waits and no other transaction uses the table (its lock is asked for without
   * waiting); otherwise false, and the next drained merge tries again.
   */
  async releaseMergedSpace(): Promise<boolean> {
    try {
      return await this.prisma.$transaction(async (tx) => {
        await tx.$executeRawUnsafe('LOCK TABLE chunk_index_fresh IN ACCESS EXCLUSIVE MODE NOWAIT');
        const [row] = await tx.$queryRawUnsafe<{ waiting: boolean }[]>('SELECT EXISTS (SELECT 1 FROM chunk_index_fresh) AS waiting');
        if (row?.waiting !== false) return false;
        await tx.$executeRawUnsafe('TRUNCATE chunk_index_fresh');
        return true;
      });
    } catch (error) {
      // 55P03: another transaction holds the table.
      if (/55P03|could not obtain lock/.test((error as Error).message)) return false;
      throw error;
    }
  }

  /**
   * Chunks waiting outside the graph. `count(*)` reads every page of the table, the rows a merge
   * deleted included: at 90,000 waiting chunks it held the embedded store for about 150 ms, each
   * time the merge loop, /metrics or a benchmark asked. So a table of more than
   * `exactCountPages` is counted on a sample of about that many of its pages (`TABLESAMPLE
   * SYSTEM`), scaled to the whole: the merge takes rows in chunk id order, random with respect
   * to where they lie, so live rows stay spread over the pages and the sample sees their share.
   * PostgreSQL's count of live rows is no substitute: it lags other connections' writes by
   * seconds, an ANALYZE during writes counts the rows they have not reported yet twice (up to 7,207 for 5,007),
   * and a crash resets it. Whether any row waits at all is asked first: that stops at the first
   * live row, so 0 is exact.
   */
  async graphBacklog() {
    const [row] = await this.prisma.$queryRaw<{ pages: number; waiting: boolean }[]>`
      SELECT (pg_relation_size('chunk_index_fresh') / current_setting('block_size')::int)::int AS pages,
             EXISTS (SELECT 1 FROM chunk_index_fresh) AS waiting`;
    if (!row?.waiting) return 0;
    if (row.pages <= exactCountPages) {
      const [counted] = await this.prisma.$queryRaw<{ count: number }[]>`SELECT count(*)::int AS count FROM chunk_index_fresh`;
      return counted?.count ?? 0;
    }
    const percent = (100 * exactCountPages) / row.pages;
    const [sampled] = await this.prisma.$queryRaw<{ count: number }[]>`
      SELECT count(*)::int AS count FROM chunk_index_fresh TABLESAMPLE SYSTEM (${percent}::real)`;
    // A sample can miss the few pages that hold the last waiting rows; some row waits, as asked above.
    return Math.max(1, Math.round(((sampled?.count ?? 0) * 100) / percent));
  }

  /**
   * Bytes the store's tables will gain once the waiting chunks are merged, estimated from the
   * table's statistics: each chunk's row again in the graph's table (the rows' average size in
   * the waiting table, deleted ones included) and its element in the HNSW graph (the vector and
   * its neighbour lists). After a bulk load of 120,000 chunks the merge grew the store by about
   * 4.2 kB a chunk.
   */
  async pendingGraphBytes(dimensions: number): Promise<number> {
    await this.prisma.$executeRawUnsafe('SELECT pg_stat_force_next_flush()');
    const [row] = await this.prisma.$queryRaw<{ live: number; rows: number; bytes: number }[]>`
      SELECT pg_stat_get_live_tuples('chunk_index_fresh'::regclass)::float8 AS live,
             (pg_stat_get_live_tuples('chunk_index_fresh'::regclass) + pg_stat_get_dead_tuples('chunk_index_fresh'::regclass))::float8 AS rows,
             pg_relation_size('chunk_index_fresh')::float8 AS bytes`;
    if (!row || row.live <= 0) return 0;
    const rowBytes = row.rows > 0 ? row.bytes / row.rows : 0;
    return row.live * (rowBytes + 4 * dimensions + graphElementOverheadBytes);
  }

  /**
   * Moves up to `maxRows` fresh rows into `chunk_index` (and so into the HNSW graph), in one
   * transaction; returns how many moved. Rows another transaction holds are skipped, never
   * waited for: a merge in each of several processes, or a document being deleted, cannot
   * block it. The chunk rows are held too, as the foreign key check would hold them, and skipped
   * as well when a deletion holds them: a merge that waited there while holding the fresh row the
   * deletion's cascade needs would deadlock with it. A deletion that comes later waits for the merge.
   *
   * Rows are taken in chunk id order from where the last merge of this process stopped, through
   * the table's key: the rows merged before are deleted but stay in the table until a vacuum
   * (which comes once a fifth of it is dead), and a scan from the table's start read past all of
   * them. At the end of the ids the next merge starts over.
   */
  async mergeIntoGraph(maxRows: number): Promise<number> {
    const moved = await this.#mergeFrom(this.#mergeCursor, maxRows);
    if (moved > 0 || this.#mergeCursor === firstUuid) return moved;
    this.#mergeCursor = firstUuid;
    return this.#mergeFrom(firstUuid, maxRows);
  }

  async #mergeFrom(after: string, maxRows: number): Promise<number> {
    // The setting, local to this statement's transaction, marks the rows the log's triggers write
    // at its end as a merge's moves; the final SELECT reads it, so it is set before they run.
    const [row] = await this.prisma.$queryRaw<{ moved: number; last: string | null }[]>`
      WITH moving AS (
        SELECT set_config(${movingSetting}, 'on', true) AS setting
      ), picked AS (
        SELECT f.chunk_id FROM chunk_index_fresh f JOIN chunks c ON c.id = f.chunk_id
         WHERE f.chunk_id > ${after}::uuid ORDER BY f.chunk_id
         LIMIT ${maxRows} FOR KEY SHARE OF c SKIP LOCKED FOR UPDATE OF f SKIP LOCKED
      ), moved AS (
        DELETE FROM chunk_index_fresh f USING picked WHERE f.chunk_id = picked.chunk_id
        RETURNING f.chunk_id, f.document_id, f.workspace_id, f.embedding, f.terms, f.freqs, f.term_count
      ), inserted AS (
        INSERT INTO chunk_index (chunk_id, document_id, workspace_id, embedding, terms, freqs, term_count)
        SELECT chunk_id, document_id, workspace_id, embedding, terms, freqs, term_count FROM moved
        -- Never met while upserts delete the fresh row before the merged one; should a chunk ever
        -- be in both tables, the fresh row (the newer) wins instead of the merge failing for good.
        ON CONFLICT (chunk_id) DO UPDATE
          SET document_id = EXCLUDED.document_id, workspace_id = EXCLUDED.workspace_id, embedding = EXCLUDED.embedding,
              terms = EXCLUDED.terms, freqs = EXCLUDED.freqs, term_count = EXCLUDED.term_count
        RETURNING chunk_id
      )
      SELECT count(*)::int AS moved, max(chunk_id::text) AS last FROM inserted, moving`;
    const moved = row?.moved ?? 0;
    // Fewer than asked: the end of the ids is reached, and the next merge starts over.
    this.#mergeCursor = moved < maxRows || !row?.last ? firstUuid : row.last;
    return moved;
  }
}
