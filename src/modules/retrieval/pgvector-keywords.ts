import { setImmediate as nextTurn } from 'node:timers/promises';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import type { BackgroundWork } from '../../observability/background-work.js';
import { FreshVectors, parseVector } from './fresh-vectors.js';
import { TermPostings, type ChunkTerms } from './term-postings.js';

/**
 * DDL of the change log the in-memory keyword side follows: one row per chunk inserted into or
 * deleted from `chunk_index` or `chunk_index_fresh`, written by statement triggers, with the
 * writing transaction's id. A merge into the graph moves rows from one to the other: logged
 * twice, it changes nothing a reader holds (a chunk's terms never change), but a reader that read
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

/** A chunk's row in either table, as the in-memory side reads it, with its vector (binary) when it waits outside the graph. */
const bothTables = Prisma.sql`(SELECT chunk_id, document_id, workspace_id, terms, freqs, term_count, NULL::bytea AS vector FROM chunk_index
                               UNION ALL SELECT chunk_id, document_id, workspace_id, terms, freqs, term_count, vector_send(embedding)
                                 FROM chunk_index_fresh)`;

/** How long log rows are kept after a cleanup marks them as old. */
const logRetentionHours = 24;
const retention = `${logRetentionHours} hours`;
/** Workspaces held in memory and not searched for this long are synced in the background. */
const refreshIdleAfterMs = 60 * 60_000;
/**
 * How often the log is read for workspaces that changed, so that their keyword sides are brought
 * up to date (or loaded, when memory allows) before a search needs them: after a bulk load the
 * first search would otherwise read every chunk's terms while its user waits.
 */
const followLogEveryMs = 5_000;
/**
 * A search waits for the statement under way on the store, so a load asks small pages: through
 * the index, this many chunks per statement...
 */
const loadPageSize = 1_500;
/** ...and in physical order, this many table blocks (8 kB): about 1,500 chunks, 60 ms here. */
const loadPageBlocks = 256;
/**
 * How long a search waits for its workspace's keyword postings while they load, before it is
 * served without them (by vectors alone). A load started earlier may be about to end.
 */
const loadWaitMs = 200;
/** A workspace of at most this many chunks is always waited for: its load takes a fraction of a second. */
const loadWaitedForChunks = 1_000;
const isLargeLoad = (chunks: number) => chunks > loadWaitedForChunks;
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

/** What is held of a workspace: its keyword postings, and the vectors and sketches of its chunks outside the graph. */
export type MirroredWorkspace = { postings: TermPostings; fresh: FreshVectors };

type HeldWorkspace = MirroredWorkspace & {
  /** Every transaction older than this had finished when the workspace was last synced. */
  horizon: string;
  /** The index's creation stamp at that sync: `kb reindex` makes a new index. */
  generation: string;
  syncedAt: number;
  /** Syncs of one workspace run one after another. */
  turn: Promise<unknown>;
  /**
   * Whether a load of the workspace waits for the searches in progress before each page: a load
   * ahead of searches does, and so does one that no search waits for any more.
   */
  loadYields: boolean;
  loadSize: LoadSize;
  waiters: Waiters;
};

/** The chunks a workspace's load reads, known once its first statement has counted them. */
class LoadSize {
  #chunks: number | undefined;
  #announce!: (chunks: number) => void;
  /** Resolves with the count of the first load. */
  readonly counted = new Promise<number>((resolve) => (this.#announce = resolve));

  get chunks(): number | undefined {
    return this.#chunks;
  }

  set(chunks: number) {
    this.#chunks = chunks;
    this.#announce(chunks);
  }
}

/**
 * The searches waiting for a workspace's sync or load. Background work on the workspace yields
 * to the searches in progress only while none of them waits for it: a search waiting behind a
 * step that waits for the searches to end would wait for itself, until the longest yield is over.
 */
class Waiters {
  #count = 0;
  readonly #wakers = new Set<() => void>();

  /** Counts a search as waiting; the function returned ends its wait. */
  enter(): () => void {
    this.#count += 1;
    for (const wake of this.#wakers) wake();
    let left = false;
    return () => {
      if (!left) this.#count -= 1;
      left = true;
    };
  }

  /** Waits for the searches in progress to end, unless a search waits for this workspace or begins to meanwhile. */
  async yieldUnlessAwaited(backgroundWork: BackgroundWork | undefined): Promise<void> {
    if (!backgroundWork || this.#count > 0) return;
    let wake!: () => void;
    const awaited = new Promise<void>((resolve) => (wake = resolve));
    this.#wakers.add(wake);
    try {
      await Promise.race([backgroundWork.turn(), awaited]);
    } finally {
      this.#wakers.delete(wake);
    }
  }
}

/** Bytes a held workspace takes, roughly. */
const heldBytes = (held: MirroredWorkspace) => held.postings.approximateBytes + held.fresh.approximateBytes;

const unloaded = (): HeldWorkspace => {
  return {
    postings: new TermPostings(),
    fresh: new FreshVectors(),
    horizon: '0',
    generation: '',
    syncedAt: 0,
    turn: Promise.resolve(),
    loadYields: false,
    loadSize: new LoadSize(),
    waiters: new Waiters(),
  };
};

/**
 * What the pgvector index keeps in this process's memory per workspace: its keyword side, and the
 * vectors of its chunks waiting outside the HNSW graph, with their sketches (fresh-vectors.ts).
 * Both are kept equal to the index tables through their change log, so that several processes
 * sharing a PostgreSQL database each see every change.
 *
 * A sync reads the log rows of transactions that may not have been finished at the previous sync
 * (transaction id at or above that sync's horizon: the oldest transaction then running), and sets
 * each chunk they name to what the tables hold now: present with its terms, and its vector while
 * it waits outside the graph, or absent. Setting a chunk to its current state can be repeated in
 * any order with the same result, so rows read twice do no harm, and a transaction that commits
 * late is read at a later sync because its id stays at or above every horizon taken while it ran.
 *
 * Workspaces are loaded on first search and dropped, least recently searched first, when the
 * whole exceeds the memory budget.
 */
export class StoreIndexMirror {
  readonly #held = new Map<string, HeldWorkspace>();
  readonly #refresher: NodeJS.Timeout;
  readonly #follower: NodeJS.Timeout;
  private readonly backgroundWork: BackgroundWork | undefined;
  /** The last log row read by `#followLog`; undefined until its first reading. */
  #followedSeq: string | undefined;
  #following = false;

  constructor(
    private readonly prisma: PrismaClient,
    private readonly budgetBytes: number,
    options: { backgroundWork?: BackgroundWork; loadAhead: boolean },
  ) {
    this.backgroundWork = options.backgroundWork;
    // A workspace nobody searches still follows the log, so the log's cleanup never gets ahead
    // of it and its next search needs no reload.
    this.#refresher = setInterval(() => this.#refreshIdle(), refreshIdleAfterMs / 4);
    this.#refresher.unref();
    this.#follower = setInterval(() => void (options.loadAhead && this.#followLog()), followLogEveryMs);
    this.#follower.unref();
  }

  /** Stops the background syncs. */
  close() {
    clearInterval(this.#refresher);
    clearInterval(this.#follower);
  }

  /**
   * Brings the workspaces that changed since the last reading up to date in the background: a
   * held one is synced, one not held is loaded while the memory budget allows. Each waits for
   * the searches in progress (BackgroundWork.turn), and a load yields to them between its pages.
   */
  async #followLog() {
    if (this.#following) return;
    this.#following = true;
    try {
      if (this.#followedSeq === undefined) {
        // The first reading only marks where the log stands: what was written before, a search or `warm` loads.
        const [row] = await this.prisma.$queryRaw<{ last: string | null }[]>`SELECT max(seq)::text AS last FROM chunk_index_log`;
        this.#followedSeq = row?.last ?? '0';
        return;
      }
      const changed = await this.prisma.$queryRaw<{ workspace_id: string; last: string }[]>`
        SELECT workspace_id::text, max(seq)::text AS last FROM chunk_index_log WHERE seq > ${this.#followedSeq}::bigint GROUP BY workspace_id`;
      for (const { workspace_id: workspaceId, last } of changed) {
        if (BigInt(last) > BigInt(this.#followedSeq)) this.#followedSeq = last;
        let held = this.#held.get(workspaceId);
        if (!held) {
          if (this.approximateBytes >= this.budgetBytes) continue;
          held = unloaded();
          this.#held.set(workspaceId, held);
        }
        const workspace = held;
        const sync = workspace.turn
          .catch(() => undefined)
          .then(async () => {
            await workspace.waiters.yieldUnlessAwaited(this.backgroundWork);
            if (workspace.syncedAt !== 0) return this.#catchUp(workspaceId, workspace);
            workspace.loadYields = true;
            return this.#timedLoad(workspaceId, workspace);
          });
        workspace.turn = sync;
        await sync.catch(() => {
          // Not loaded: a search loads it, as it would have without the follower.
          if (workspace.syncedAt === 0 && this.#held.get(workspaceId) === workspace) this.#held.delete(workspaceId);
        });
      }
      this.#evictBeyondBudget(new Set());
    } catch {
      // The next reading tries again; searches sync for themselves meanwhile.
    } finally {
      this.#following = false;
    }
  }

  #refreshIdle() {
    for (const [workspaceId, held] of this.#held) {
      if (held.syncedAt === 0 || Date.now() - held.syncedAt < refreshIdleAfterMs) continue;
      // Not a search: the workspace keeps its place in the eviction order. A failure waits for the next search.
      held.turn = held.turn
        .catch(() => undefined)
        .then(() => this.#catchUp(workspaceId, held))
        .catch(() => undefined);
    }
  }

  /** The workspaces as held in memory, loaded when they are not, and synced with the store. */
  async mirrored(workspaceIds: readonly string[]): Promise<MirroredWorkspace[]> {
    const held: MirroredWorkspace[] = [];
    for (const workspaceId of workspaceIds) held.push(await this.#synced(workspaceId));
    this.#evictBeyondBudget(new Set(workspaceIds));
    return held;
  }

  /**
   * As `mirrored`, but undefined when a workspace of more than `loadWaitedForChunks` chunks is
   * still loading `loadWaitMs` after the call: the search is then served without the keyword
   * side, and the load goes on in the background, yielding to searches. Without this the first
   * search after a start waited for the largest workspace's load: 10-25 s at 100,000 chunks.
   */
  async mirroredUnlessLoading(workspaceIds: readonly string[]): Promise<MirroredWorkspace[] | undefined> {
    const deadline = performance.now() + loadWaitMs;
    const held: MirroredWorkspace[] = [];
    for (const workspaceId of workspaceIds) {
      const workspace = await this.#synced(workspaceId, { until: deadline });
      if (!workspace) return undefined;
      held.push(workspace);
    }
    this.#evictBeyondBudget(new Set(workspaceIds));
    return held;
  }

  /** As `mirrored`, when every one of the workspaces is held already; undefined, and nothing loaded, otherwise. */
  async mirroredIfHeld(workspaceIds: readonly string[]): Promise<MirroredWorkspace[] | undefined> {
    if (!workspaceIds.every((workspaceId) => this.#held.get(workspaceId)?.syncedAt)) return undefined;
    return this.mirrored(workspaceIds);
  }

  /** Forgets everything held: the index was emptied in this process. */
  clear() {
    this.#held.clear();
  }

  /** Bytes held across workspaces, roughly. */
  get approximateBytes() {
    let bytes = 0;
    for (const held of this.#held.values()) bytes += heldBytes(held);
    return bytes;
  }

  /**
   * The workspace loaded, or caught up with the store. With `until` (a `performance.now()` time),
   * undefined when it is still loading then and holds more than `loadWaitedForChunks` chunks.
   */
  async #synced(workspaceId: string): Promise<MirroredWorkspace>;
  async #synced(workspaceId: string, options: { until?: number; ahead?: boolean }): Promise<MirroredWorkspace | undefined>;
  async #synced(workspaceId: string, options: { until?: number; ahead?: boolean } = {}): Promise<MirroredWorkspace | undefined> {
    let held = this.#held.get(workspaceId);
    if (held) {
      // Most recently searched last, for eviction.
      this.#held.delete(workspaceId);
    } else {
      held = unloaded();
    }
    this.#held.set(workspaceId, held);
    const workspace = held;
    if (options.until !== undefined && workspace.syncedAt === 0 && isLargeLoad(workspace.loadSize.chunks ?? 0)) {
      workspace.loadYields = true;
      return undefined;
    }
    if (options.ahead && workspace.syncedAt === 0) workspace.loadYields = true;
    const leave = options.ahead ? undefined : workspace.waiters.enter();
    try {
      return await this.#turnOf(workspaceId, workspace, options.until);
    } finally {
      leave?.();
    }
  }

  /** Queues the workspace's load or catch-up, and waits for it, or with `until` as `#synced` says. */
  async #turnOf(workspaceId: string, workspace: HeldWorkspace, until: number | undefined): Promise<MirroredWorkspace | undefined> {
    const waitsLittle = until !== undefined && workspace.syncedAt === 0;
    const turn = workspace.turn
      .catch(() => undefined)
      .then(() => (workspace.syncedAt === 0 ? this.#timedLoad(workspaceId, workspace) : this.#catchUp(workspaceId, workspace)));
    workspace.turn = turn;
    const settled = turn.then(
      () => workspace,
      (error: unknown) => {
        if (workspace.syncedAt === 0 && this.#held.get(workspaceId) === workspace) this.#held.delete(workspaceId);
        throw error;
      },
    );
    if (!waitsLittle) return await settled;
    // A search not waiting for the load any more must not leave its failure unhandled.
    settled.catch(() => undefined);
    // Until the load is known to be large, or the wait is over.
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), Math.max(0, until - performance.now()));
    });
    const known = workspace.loadSize.counted.then<HeldWorkspace | 'late'>((chunks) => (isLargeLoad(chunks) ? 'late' : settled));
    const first = await Promise.race([settled, late, known]).finally(() => clearTimeout(timer));
    if (first !== 'late') return first;
    if (!isLargeLoad(workspace.loadSize.chunks ?? (await this.#chunkCount(workspaceId)))) return await settled;
    workspace.loadYields = true;
    return undefined;
  }

  /** Chunks of the workspace in either table. */
  async #chunkCount(workspaceId: string): Promise<number> {
    const [row] = await this.prisma.$queryRaw<{ chunks: number }[]>`
      SELECT ((SELECT count(*) FROM chunk_index WHERE workspace_id = ${workspaceId}::uuid)
              + (SELECT count(*) FROM chunk_index_fresh WHERE workspace_id = ${workspaceId}::uuid))::float8 AS chunks`;
    return row!.chunks;
  }

  #timedLoad(workspaceId: string, held: HeldWorkspace) {
    const load = () => this.#load(workspaceId, held);
    return this.backgroundWork ? this.backgroundWork.time('keyword_load', load) : load();
  }

  /**
   * Reads the workspace's chunks afresh, a page per statement so other work on the store runs
   * between pages. A workspace holding a fifth of the table or more is read in physical order,
   * a range of blocks at a time: through the index it would be one random read per chunk
   * (measured at 100,000 chunks: 4 s in block ranges against over 20 s through the index). A
   * smaller one is read through the index, in chunk id order.
   */
  async #load(workspaceId: string, held: HeldWorkspace) {
    // Loading ahead of searches, not for one: each page waits for the searches in progress. The
    // turn of the event loop first lets a search that has arrived begin before the page is asked.
    const page = async () => {
      if (!held.loadYields) return;
      await nextTurn();
      await held.waiters.yieldUnlessAwaited(this.backgroundWork);
    };
    const [mark] = await this.prisma.$queryRaw<{ horizon: string; generation: string; rows: number; fresh_rows: number; total: number; blocks: number }[]>`
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
          await this.prisma.$queryRaw<ChunkRow[]>`
            SELECT chunk_id::text, document_id::text, array_to_string(terms, ' ') AS terms, array_to_string(freqs, ' ') AS freqs, term_count
              FROM chunk_index
             WHERE ctid >= ${`(${block},0)`}::tid AND ctid < ${`(${block + loadPageBlocks},0)`}::tid AND workspace_id = ${workspaceId}::uuid`,
        );
      }
    } else if (mark!.rows > 0) {
      let after = '00000000-0000-0000-0000-000000000000';
      for (;;) {
        await page();
        const rows = await this.prisma.$queryRaw<ChunkRow[]>`
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
      const rows = await this.prisma.$queryRaw<ChunkRow[]>`
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

  /**
   * Loads the workspaces with the most chunks first, until the memory budget is used: a server
   * calls this at start, so that searches soon find their workspaces held. Each page waits for
   * the searches in progress, and a search meanwhile is served without waiting for the load
   * (`mirroredUnlessLoading`).
   */
  async warm(signal: AbortSignal, onLoaded?: (workspaceId: string, chunks: number, ms: number) => void) {
    const workspaces = await this.prisma.$queryRaw<{ workspace_id: string; chunks: number }[]>`
      SELECT workspace_id::text, count(*)::int AS chunks FROM chunk_index GROUP BY workspace_id ORDER BY count(*) DESC`;
    for (const { workspace_id: workspaceId, chunks } of workspaces) {
      if (signal.aborted || this.approximateBytes >= this.budgetBytes) break;
      const started = performance.now();
      await this.#synced(workspaceId, { ahead: true });
      this.#evictBeyondBudget(new Set([workspaceId]));
      onLoaded?.(workspaceId, chunks, performance.now() - started);
    }
  }

  async #catchUp(workspaceId: string, held: HeldWorkspace) {
    // `stale`: the log's cleanup may have dropped rows this sync needs (see cleanChangeLog); the
    // workspace is read afresh then, as after a reindex (a new `generation`).
    const rows = await this.prisma.$queryRaw<(ChunkRow & { horizon: string; generation: string; stale: boolean | null; logged: string | null })[]>`
      WITH mark AS (
        SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS horizon, (SELECT created_at::text FROM chunk_index_model) AS generation,
               (SELECT horizon FROM chunk_index_log_marks WHERE marked_at < clock_timestamp() - ${retention}::interval
                 ORDER BY marked_at DESC LIMIT 1) > ${held.horizon}::xid8 AS stale
      ), changed AS (
        SELECT DISTINCT chunk_id FROM chunk_index_log WHERE workspace_id = ${workspaceId}::uuid AND xid >= ${held.horizon}::xid8
      )
      SELECT mark.horizon, mark.generation, mark.stale, changed.chunk_id::text AS logged, c.chunk_id::text, c.document_id::text,
             array_to_string(c.terms, ' ') AS terms, array_to_string(c.freqs, ' ') AS freqs, c.term_count, c.vector
        FROM mark LEFT JOIN changed ON true LEFT JOIN ${bothTables} c ON c.chunk_id = changed.chunk_id`;
    const [first] = rows;
    if (!first) throw new Error('the keyword sync read no horizon');
    if (first.generation !== held.generation || first.stale) {
      await this.#load(workspaceId, held);
      return;
    }
    for (const row of rows) {
      if (row.logged === null) continue;
      const chunk = chunkTerms(row);
      // Held already: moved by a merge, or read by the load as well as logged (terms never change).
      if (chunk) {
        if (!held.postings.has(chunk.chunkId)) held.postings.add(chunk);
        if (row.vector) held.fresh.set(chunk.chunkId, chunk.documentId, parseVector(row.vector));
        else held.fresh.delete(chunk.chunkId);
      } else {
        held.postings.remove(row.logged);
        held.fresh.delete(row.logged);
      }
    }
    held.horizon = first.horizon;
    held.syncedAt = Date.now();
  }

  #evictBeyondBudget(inUse: ReadonlySet<string>) {
    let bytes = this.approximateBytes;
    for (const [workspaceId, held] of this.#held) {
      if (bytes <= this.budgetBytes) break;
      if (inUse.has(workspaceId)) continue;
      bytes -= heldBytes(held);
      this.#held.delete(workspaceId);
    }
  }
}

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
