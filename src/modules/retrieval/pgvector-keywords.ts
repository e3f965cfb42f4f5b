import type { PrismaClient } from '../../generated/prisma/client.js';
import type { BackgroundWork } from '../../observability/background-work.js';
import { heldBytes, unloaded, type HeldWorkspace, type MirroredWorkspace } from './held-workspace.js';
import { workspacesInIndex, workspacesLargestFirst } from './indexed-workspaces.js';
import type { IndexSnapshots, SavedGraph, SavedWorkspace } from './index-snapshots.js';
import { SnapshotFormatError } from './term-postings.js';
import { applyGraphChanges, buildGraph, catchUpWorkspace, loadSavedWorkspace, loadWorkspace, yieldToSearches } from './mirror-sync.js';
import { VectorGraph } from './vector-graph.js';
import type { ReadBack } from './vector-index.js';

/** Workspaces held in memory and not searched for this long are synced in the background. */
const refreshIdleAfterMs = 60 * 60_000;
/**
 * How often the log is read for workspaces that changed, so that their keyword sides are brought
 * up to date (or loaded, when memory allows) before a search needs them: after a bulk load the
 * first search would otherwise read every chunk's terms while its user waits.
 */
const followLogEveryMs = 5_000;
/**
 * How long a search waits for its workspace's keyword postings while they load, before it is
 * served without them (by vectors alone). A load started earlier may be about to end.
 */
const loadWaitMs = 200;
/** A workspace of at most this many chunks is always waited for: its load takes a fraction of a second. */
const loadWaitedForChunks = 1_000;
const isLargeLoad = (chunks: number) => chunks > loadWaitedForChunks;
/** How often the postings of large workspaces held are saved to disk, where they changed (IndexSnapshots). */
const saveEveryMs = 60_000;
/**
 * Postings saved once are written again when a twentieth of their chunks changed, or when any
 * changed and the save is this old: the catch-up from an older save reads more of the log, and
 * one older than what the log's cleanup keeps (a day) is of no use.
 */
const rewriteShare = 0.05;
const rewriteAfterMs = 30 * 60_000;
/** How often what was saved of deleted workspaces is looked for and removed (and at each start). */
const forgetEveryMs = 60 * 60_000;

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
  /**
   * The workspace held whatever the budget: the one searched last or, before any search, the
   * largest loaded at start. A workspace larger than the whole budget is still held while it is
   * the one searched; dropping it would mean reading every one of its chunks again at its next search.
   */
  #kept: string | undefined;
  /** Workspaces the follower loaded and had to drop at once, over the budget: loaded again only when searched. */
  readonly #tooLargeAhead = new Set<string>();
  readonly #refresher: NodeJS.Timeout;
  readonly #follower: NodeJS.Timeout;
  readonly #saver: NodeJS.Timeout | undefined;
  readonly #snapshots: IndexSnapshots | undefined;
  #saving = false;
  /** Saves run one after another: two at once could leave a workspace's entry naming a file the other removed. */
  #saves: Promise<void> = Promise.resolve();
  #forgottenAt = 0;
  private readonly backgroundWork: BackgroundWork | undefined;
  /** The last log row read by `#followLog`; undefined until its first reading. */
  #followedSeq: string | undefined;
  #following = false;
  /**
   * Graphs being restored from what was saved (`#restoreGraph`), with the bytes they will take:
   * meanwhile none is built from the store and the workspace is not saved.
   */
  readonly #graphRestores = new Map<HeldWorkspace, { restored: Promise<boolean>; bytes: number }>();
  #closed = false;
  /** Graphs whose noted changes are being applied (`#applyGraphChanges`). */
  readonly #applying = new WeakSet<VectorGraph>();
  /** The vectors' dimensions, when each held workspace also keeps its vectors in a graph in memory (VectorGraph); undefined otherwise. */
  readonly #graphDimensions: (() => number) | undefined;

  constructor(
    private readonly prisma: PrismaClient,
    private readonly budgetBytes: number,
    options: {
      backgroundWork?: BackgroundWork;
      loadAhead: boolean;
      followLogEveryMs?: number;
      graphDimensions?: (() => number) | undefined;
      /** Where large workspaces' postings are read back from and, when loading ahead, saved to. */
      snapshots?: IndexSnapshots;
      saveEveryMs?: number;
    },
  ) {
    this.backgroundWork = options.backgroundWork;
    this.#snapshots = options.snapshots;
    this.#graphDimensions = options.graphDimensions;
    // A workspace nobody searches still follows the log, so the log's cleanup never gets ahead
    // of it and its next search needs no reload.
    this.#refresher = setInterval(() => this.#refreshIdle(), refreshIdleAfterMs / 4);
    this.#refresher.unref();
    this.#follower = setInterval(() => void (options.loadAhead && this.#followLog()), options.followLogEveryMs ?? followLogEveryMs);
    this.#follower.unref();
    if (options.snapshots && options.loadAhead) {
      this.#saver = setInterval(() => void this.#saveChanged(), options.saveEveryMs ?? saveEveryMs);
      this.#saver.unref();
    }
  }

  /** Stops the background work, and waits for a save under way: none rewrites an entry after the index is closed. */
  async close() {
    this.#closed = true;
    clearInterval(this.#refresher);
    clearInterval(this.#follower);
    clearInterval(this.#saver);
    await this.#saves;
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
        const loadingAhead = !held;
        if (!held) {
          if (this.approximateBytes >= this.budgetBytes || this.#tooLargeAhead.has(workspaceId)) continue;
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
        if (loadingAhead && this.approximateBytes > this.budgetBytes && this.#kept !== workspaceId && this.#held.get(workspaceId) === workspace) {
          // Loaded for no search, it would push out the ones searched: dropped, and left to its first search.
          this.#held.delete(workspaceId);
          this.#tooLargeAhead.add(workspaceId);
        }
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
   * still loading, or still catching up with the store, `loadWaitMs` after the call: the search
   * is then served without the keyword side, and the load or catch-up goes on in the background.
   * Without this the first search after a start waited for the largest workspace's load (10-25 s
   * at 100,000 chunks), and the first after a bulk write for the catch-up (344 ms on PostgreSQL).
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

  /** Forgets everything held, and saved: the index was emptied in this process. */
  clear() {
    this.#held.clear();
    this.#kept = undefined;
    this.#tooLargeAhead.clear();
    // Of no use to the new index (a load would find them of another generation); after any save under way.
    const snapshots = this.#snapshots;
    if (snapshots) this.#afterSaves(() => snapshots.keepOnly(new Set())).catch(() => undefined);
  }

  /** Runs `work` on the saved files after the saves and removals queued before it (see `#saves`). */
  #afterSaves<T>(work: () => Promise<T>): Promise<T> {
    const done = this.#saves.then(work);
    this.#saves = done.then(
      () => undefined,
      () => undefined,
    );
    return done;
  }

  /** Bytes held across workspaces, roughly. */
  get approximateBytes() {
    let bytes = 0;
    for (const held of this.#held.values()) bytes += heldBytes(held) + (this.#graphRestores.get(held)?.bytes ?? 0);
    return bytes;
  }

  /**
   * The workspace loaded, or caught up with the store. With `until` (a `performance.now()` time),
   * undefined when it is still loading or catching up then and holds more than `loadWaitedForChunks` chunks.
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
    if (!options.ahead) {
      this.#kept = workspaceId;
      this.#tooLargeAhead.delete(workspaceId);
    }
    const workspace = held;
    if (options.until !== undefined && workspace.syncedAt === 0 && isLargeLoad(workspace.loadSize.chunks ?? 0)) {
      workspace.loadYields = true;
      return undefined;
    }
    if (options.ahead && workspace.syncedAt === 0) workspace.loadYields = true;
    const leave = options.ahead ? undefined : workspace.waiters.enter();
    try {
      const synced = await this.#turnOf(workspaceId, workspace, options.until);
      if (synced) this.#buildGraph(workspaceId, workspace);
      return synced;
    } finally {
      leave?.();
    }
  }

  /** Queues the workspace's load or catch-up, and waits for it, or with `until` as `#synced` says. */
  async #turnOf(workspaceId: string, workspace: HeldWorkspace, until: number | undefined): Promise<MirroredWorkspace | undefined> {
    const loading = workspace.syncedAt === 0;
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
    if (until === undefined) return await settled;
    // A search not waiting for the load or catch-up any more must not leave its failure unhandled.
    settled.catch(() => undefined);
    // Until the load is known to be large, or the wait is over.
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), Math.max(0, until - performance.now()));
    });
    const known = loading ? [workspace.loadSize.counted.then<HeldWorkspace | 'late'>((chunks) => (isLargeLoad(chunks) ? 'late' : settled))] : [];
    const first = await Promise.race([settled, late, ...known]).finally(() => clearTimeout(timer));
    if (first !== 'late') return first;
    // A catch-up of many changes (after a bulk write; its own and the follower's before it) is
    // not waited for past the deadline either: the held postings lack the newest chunks meanwhile.
    if (!loading) return isLargeLoad(workspace.postings.chunkCount) ? undefined : await settled;
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

  async #timedLoad(workspaceId: string, held: HeldWorkspace) {
    const load = async () => {
      if (await this.#loadSaved(workspaceId, held)) return;
      await loadWorkspace(this.prisma, this.backgroundWork, workspaceId, held);
      void this.#save(workspaceId, held);
    };
    await (this.backgroundWork ? this.backgroundWork.time('keyword_load', load) : load());
    // A graph read back has the catch-up's changes to apply; none read back is built from the store.
    this.#buildGraph(workspaceId, held);
    this.#applyGraphChanges(workspaceId, held);
  }

  /** Waits between slices of reading postings back or saving them, as a load waits between its pages. */
  #pause(held: HeldWorkspace) {
    return () => yieldToSearches(this.backgroundWork, held);
  }

  /**
   * Loads the workspace from its saved postings; false, and nothing held, when none can be read.
   * The graph saved with them, where the index keeps graphs, is restored after the load, in the
   * background (`#restoreGraph`): a search waiting for the postings does not wait for it.
   */
  async #loadSaved(workspaceId: string, held: HeldWorkspace): Promise<boolean> {
    const snapshots = this.#snapshots;
    const saved = await snapshots?.read(workspaceId, this.#pause(held)).catch(() => undefined);
    if (!snapshots || !saved) return false;
    held.saved = { postings: saved.postings, version: saved.postings.version, horizon: saved.horizon, file: saved.file, at: 0 };
    await loadSavedWorkspace(this.prisma, this.backgroundWork, workspaceId, held, saved);
    if (held.postings !== saved.postings) {
      // Read afresh from the store instead (the saved postings were of another index, or too old): saved again.
      void this.#save(workspaceId, held);
    } else if (saved.graph && this.#graphDimensions) {
      // Counted in the budget from now: the graph takes about as many bytes in memory as on disk.
      this.#graphRestores.set(held, { restored: this.#restoreGraph(snapshots, workspaceId, held, saved, saved.graph), bytes: saved.graph.bytes });
    }
    return true;
  }

  /**
   * Restores the graph saved with the postings, once the searches in progress are done: checks
   * its file, reads it (native code, the whole graph at once), then, in the workspace's turn so
   * that no sync runs meanwhile, catches the workspace up from the save's horizon, which notes
   * for the graph what changed since (the postings hold it already). True when it is the
   * workspace's graph then; otherwise (a file not whole, the workspace reloaded or dropped) the
   * graph is built from the store.
   */
  async #restoreGraph(snapshots: IndexSnapshots, workspaceId: string, held: HeldWorkspace, saved: SavedWorkspace, savedGraph: SavedGraph): Promise<boolean> {
    const current = () => !this.#closed && this.#held.get(workspaceId) === held && held.postings === saved.postings && !held.graph;
    const restore = async () => {
      const pause = this.#pause(held);
      await pause();
      let graph: VectorGraph | undefined;
      try {
        const files = current() ? await snapshots.readGraph(savedGraph, pause) : undefined;
        await pause();
        if (files && current()) graph = VectorGraph.restore(this.#graphDimensions!(), files.path, files.ids);
      } catch (error) {
        if (!(error instanceof SnapshotFormatError)) throw error;
        // In turn with the saves: one under way may be replacing the entry.
        await this.#afterSaves(() => snapshots.dropGraph(savedGraph));
      }
      if (!graph) return false;
      const restored = graph;
      const turn = held.turn
        .catch(() => undefined)
        .then(async () => {
          if (!current()) return false;
          held.graph = restored;
          if (held.saved?.postings === saved.postings && held.saved.file === saved.file) held.saved.graph = { graph: restored, version: restored.version };
          try {
            await catchUpWorkspace(this.prisma, this.backgroundWork, workspaceId, held, saved.horizon);
          } catch (error) {
            // Not caught up, it lacks what changed since the save: built from the store instead.
            if (held.graph === restored) held.graph = undefined;
            if (held.saved?.graph?.graph === restored) held.saved.graph = undefined;
            throw error;
          }
          return held.graph === restored;
        });
      held.turn = turn;
      return await turn;
    };
    try {
      return await (this.backgroundWork ? this.backgroundWork.time('vector_graph_build', restore) : restore());
    } catch {
      return false;
    } finally {
      // Built from the store when not restored; the catch-up's notes applied when it was.
      this.#graphRestores.delete(held);
      if (!this.#closed && this.#held.get(workspaceId) === held) {
        this.#buildGraph(workspaceId, held);
        this.#applyGraphChanges(workspaceId, held);
      }
    }
  }

  /** Saves the held postings that changed since their last save (see `rewriteShare`), and moves forward the horizon of those that did not. */
  async #saveChanged() {
    if (this.#saving) return;
    this.#saving = true;
    try {
      for (const [workspaceId, held] of [...this.#held]) await this.#save(workspaceId, held);
      if (Date.now() - this.#forgottenAt >= forgetEveryMs) await this.#forgetDeleted();
    } finally {
      this.#saving = false;
    }
  }

  /**
   * Removes what is saved of workspaces that have no chunk in the index any more (deleted, or
   * emptied). In turn with the saves, so that none is written between the reading of the
   * workspaces and the removal.
   */
  #forgetDeleted(): Promise<void> {
    const snapshots = this.#snapshots;
    if (!snapshots) return Promise.resolve();
    this.#forgottenAt = Date.now();
    return this.#afterSaves(async () => {
      await snapshots.keepOnly(await workspacesInIndex(this.prisma));
    }).catch(() => undefined);
  }

  /**
   * Saves a large workspace's postings as held now, with the horizon and generation they were
   * synced to, unless the save on disk is recent and differs by little; if they have not changed
   * since that save, only its horizon moves forward. A failure (a full disk) leaves the last save
   * or none: the next start reads the workspace from the store.
   */
  #save(workspaceId: string, held: HeldWorkspace): Promise<void> {
    return this.#afterSaves(() => this.#saveNow(workspaceId, held));
  }

  async #saveNow(workspaceId: string, held: HeldWorkspace) {
    const snapshots = this.#snapshots;
    const { postings, saved } = held;
    // A graph being restored may be held before its catch-up has noted what changed since its save.
    if (!snapshots || held.syncedAt === 0 || !isLargeLoad(postings.chunkCount) || this.#graphRestores.has(held)) return;
    // A graph is saved only complete: then it holds every change the syncs up to the horizon found.
    const graph = held.graph?.complete ? held.graph : undefined;
    // The graph saved, if any, is still the workspace's as held only if it is complete and
    // unchanged since: a vector changed without its terms leaves notes, or moves its version.
    const graphAsSaved = saved?.graph !== undefined && graph === saved.graph.graph && graph.version === saved.graph.version;
    try {
      if (saved?.postings === postings) {
        const changes = postings.version - saved.version;
        if (changes === 0 && (graph === undefined || graphAsSaved)) {
          if (saved.graph && !graphAsSaved) return;
          const horizon = held.horizon;
          // Another save replaced the entry: this one is written again at the next round.
          if (horizon !== saved.horizon && !(await snapshots.advance(workspaceId, saved.file, horizon))) held.saved = undefined;
          else saved.horizon = horizon;
          return;
        }
        // A graph never saved (built since the postings' save) is saved soon; one saved, with the postings' rule.
        const graphNeverSaved = graph !== undefined && saved.graph?.graph !== graph;
        if (!graphNeverSaved && changes < postings.chunkCount * rewriteShare && Date.now() - saved.at < rewriteAfterMs) return;
      }
      const write = () => this.#write(snapshots, workspaceId, held);
      await (this.backgroundWork ? this.backgroundWork.time('index_save', write) : write());
    } catch {
      // Saved again at the next round.
    }
  }

  /**
   * Writes the held postings, and the graph when it holds every change up to their horizon: one
   * complete when the horizon is taken. It is written after the postings are copied, as it is
   * then; changes it took since the horizon are in the log after it, and a catch-up from the
   * horizon finds them again (setting a chunk as it is held changes nothing).
   */
  async #write(snapshots: IndexSnapshots, workspaceId: string, held: HeldWorkspace) {
    const { postings } = held;
    const pause = this.#pause(held);
    await pause();
    const { horizon, generation } = held;
    const graph = held.graph?.complete ? held.graph : undefined;
    const version = postings.version;
    const parts = await postings.encode(pause);
    if (!parts || held.postings !== postings) return;
    let savedGraph: { graph: VectorGraph; version: number } | undefined;
    const writeGraph = (file: string) => {
      if (!graph || held.graph !== graph || !graph.complete) return undefined;
      savedGraph = { graph, version: graph.version };
      return graph.save(file);
    };
    const file = await snapshots.write(workspaceId, parts, { horizon, generation }, graph && { write: writeGraph, pause });
    held.saved = { postings, version, horizon, file, at: Date.now(), graph: savedGraph };
  }

  /**
   * Starts filling a new graph of the workspace's vectors in the background, when the index keeps
   * them in memory and the workspace has none being built: after its load (which drops the graph
   * it held), or after a build that failed. Searches use the store's graph until it is complete.
   */
  #buildGraph(workspaceId: string, held: HeldWorkspace) {
    if (this.#graphDimensions === undefined || held.graph || this.#graphRestores.has(held)) return;
    const graph = new VectorGraph(this.#graphDimensions());
    held.graph = graph;
    const current = () => this.#held.get(workspaceId) === held && held.graph === graph;
    const build = () => buildGraph(this.prisma, this.backgroundWork, workspaceId, held, graph, current);
    (this.backgroundWork ? this.backgroundWork.time('vector_graph_build', build) : build()).then(
      () => this.#applyGraphChanges(workspaceId, held),
      () => {
        // The next search of the workspace starts another.
        if (held.graph === graph) held.graph = undefined;
      },
    );
  }

  /** Starts applying the changes syncs noted in the workspace's graph, unless that is under way already or none waits. */
  #applyGraphChanges(workspaceId: string, held: HeldWorkspace) {
    const graph = held.graph;
    if (!graph || graph.pending === 0 || this.#applying.has(graph)) return;
    this.#applying.add(graph);
    const current = () => this.#held.get(workspaceId) === held && held.graph === graph;
    const apply = () => applyGraphChanges(this.backgroundWork, held, graph, current);
    (this.backgroundWork ? this.backgroundWork.time('vector_graph_build', apply) : apply())
      .catch(() => {
        // Built again at the workspace's next search.
        if (held.graph === graph) held.graph = undefined;
      })
      .finally(() => this.#applying.delete(graph));
  }

  /**
   * Loads the workspaces with the most chunks first (by the store's statistics, which no count
   * holds the store for: indexed-workspaces.ts), until the memory budget is used: a server
   * calls this at start, so that searches soon find their workspaces held. Each page waits for
   * the searches in progress, and a search meanwhile is served without waiting for the load
   * (`mirroredUnlessLoading`). A workspace whose graph is restored from disk (`#restoreGraph`) is
   * reported once that is done; the next workspace's load does not wait for it.
   */
  async warm(signal: AbortSignal, onLoaded?: (workspaceId: string, chunks: number, ms: number, readBack: ReadBack) => void) {
    const workspaces = await workspacesLargestFirst(this.prisma);
    await this.#forgetDeleted();
    const restores: Promise<void>[] = [];
    for (const { workspaceId } of workspaces) {
      if (signal.aborted || this.approximateBytes >= this.budgetBytes) break;
      const started = performance.now();
      this.#kept ??= workspaceId;
      await this.#synced(workspaceId, { ahead: true });
      const held = this.#held.get(workspaceId);
      this.#evictBeyondBudget(new Set([workspaceId]));
      const ms = performance.now() - started;
      const chunks = held?.postings.chunkCount ?? 0;
      const postings = held?.saved?.at === 0 && held.saved.postings === held.postings;
      const restoring = held && this.#graphRestores.get(held);
      if (restoring) restores.push(restoring.restored.then((graph) => onLoaded?.(workspaceId, chunks, ms, { postings, graph })));
      else onLoaded?.(workspaceId, chunks, ms, { postings, graph: false });
    }
    await Promise.all(restores);
  }

  async #catchUp(workspaceId: string, held: HeldWorkspace) {
    await catchUpWorkspace(this.prisma, this.backgroundWork, workspaceId, held);
    this.#applyGraphChanges(workspaceId, held);
  }

  #evictBeyondBudget(inUse: ReadonlySet<string>) {
    let bytes = this.approximateBytes;
    for (const [workspaceId, held] of this.#held) {
      if (bytes <= this.budgetBytes) break;
      if (inUse.has(workspaceId) || workspaceId === this.#kept) continue;
      bytes -= heldBytes(held);
      this.#held.delete(workspaceId);
    }
  }
}
