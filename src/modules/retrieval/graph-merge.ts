import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Logger } from '../../logger.js';
import type { BackgroundWork } from '../../observability/background-work.js';
import type { VectorIndex } from './vector-index.js';

/** What the merge needs to know of ingestion: how long no job has been running. */
export type IngestionActivity = {
  /** Milliseconds since the last job of this process ended; 0 while one runs. */
  idleForMs(): number;
};

export type GraphMergeOptions = {
  /**
   * Most rows moved per statement, and the size of every slice while no request comes: the
   * embedded store answers one statement at a time, and a search waits for the slice under way.
   */
  sliceRows: number;
  /**
   * What a slice should take while requests come: fewer rows go in the next one when a slice
   * took longer (a larger graph costs more per row), more (up to `sliceRows`) when it took less.
   */
  sliceMs: number;
  /** Requests "come" until this long after the last one ended; then slices are full again. */
  quietMs: number;
  /** Ingestion must have been idle this long before a merge starts. */
  idleMs: number;
  /** Beyond this many rows outside the graph, merging goes on during ingestion too, in full slices: the graph must not fall far behind. */
  backlogLimit: number;
  /** How often the backlog is looked at while there is nothing to do. */
  pollMs: number;
  /**
   * Slices run side by side while no request comes. The embedded store answers one statement at
   * a time: 1 there.
   */
  lanes: number;
  /**
   * Whether a drained merge gives the table's space back (`releaseMergedSpace`: a TRUNCATE under
   * an exclusive lock, once the table is seen empty). The embedded store has no autovacuum to make
   * that space reusable.
   */
  releaseSpace: boolean;
};

/**
 * Measured on the 2-core machine, embedded store (docs/retrieval.md): a slice of 16 rows took
 * 13 ms (p50; 73 ms p95) with 20,000 chunks in the graph, and about 90 ms with 100,000. A search
 * arriving during a slice waits for the rest of it while its query is embedded (7-9 ms): a
 * 10 ms slice is mostly hidden behind that.
 */
export const defaultGraphMergeOptions: GraphMergeOptions = { sliceRows: 16, sliceMs: 10, quietMs: 5_000, idleMs: 1_000, backlogLimit: 20_000, pollMs: 1_000, lanes: 1, releaseSpace: true };

/**
 * PostgreSQL gives each statement its own connection, so a search does not queue behind a slice:
 * a quiet merge takes larger slices (256 rows moved 40 % more rows a second than 16 at 35,000
 * chunks here), two at a time (one per core of the machine it was measured on). Its autovacuum
 * makes the merged rows' space reusable, and a TRUNCATE there would hold the writers of other
 * connections: with a million merged rows behind it, checking that the table was empty under the
 * exclusive lock took seconds, and an upsert waiting for it outlived its transaction's 5 s.
 */
export const postgresGraphMergeOptions: GraphMergeOptions = { ...defaultGraphMergeOptions, sliceRows: 256, lanes: 2, releaseSpace: false };

export type GraphMerge = {
  /** Stops after the slice in progress. */
  stop(): Promise<void>;
};

/**
 * Keeps the pgvector index's HNSW graph complete without making ingestion pay for it: chunks are
 * written outside the graph, and this loop merges them in slices once ingestion has been idle for
 * `idleMs` (on two cores the embedder needs them both while it runs), or at once while more than
 * `backlogLimit` wait. Nothing is lost by a stop or a crash: the rows wait in the store, and the
 * next start merges them. Undefined for an index without such a graph (Elasticsearch builds its
 * own).
 */
export function startGraphMerge(
  dependencies: { index: VectorIndex; activity: IngestionActivity; log: Logger; backgroundWork?: BackgroundWork },
  options: GraphMergeOptions = defaultGraphMergeOptions,
): GraphMerge | undefined {
  const { activity, log } = dependencies;
  const { graphBacklog, mergeIntoGraph } = dependencies.index;
  if (!graphBacklog || !mergeIntoGraph) return undefined;
  const index = {
    graphBacklog: graphBacklog.bind(dependencies.index),
    mergeIntoGraph: mergeIntoGraph.bind(dependencies.index),
    releaseMergedSpace: dependencies.index.releaseMergedSpace?.bind(dependencies.index),
  };
  let stopping = false;
  let wakeUp: (() => void) | undefined;
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      function done() {
        clearTimeout(timer);
        wakeUp = undefined;
        resolve();
      }
      wakeUp = done;
    });

  let sliceRows = options.sliceRows;
  /** A step of the merge on the store, timed as `graph_merge` when there is background work to count it. */
  const timed = <T>(step: () => Promise<T>): Promise<T> => (dependencies.backgroundWork ? dependencies.backgroundWork.time('graph_merge', step) : step());

  async function mergeWhileAllowed(backlog: number) {
    const started = performance.now();
    let merged = 0;
    const allowed = () => !stopping && backlog > 0 && (activity.idleForMs() >= options.idleMs || backlog > options.backlogLimit);
    // Lanes beyond the first end with it: waiting for a quiet store, one would otherwise keep this
    // merge going (and the backlog unread) for as long as requests come.
    let firstEnded = false;
    const lane = async (first: boolean) => {
      while (allowed() && (first || !firstEnded)) {
        // A request in progress goes first: its next statement would otherwise queue behind this
        // slice. While requests come, a slice takes about `sliceMs`, since the next search waits
        // for the one under way; with none for `quietMs`, slices are full and the merge goes as
        // fast as the store allows (docs/retrieval.md, "Merging into the graph").
        await dependencies.backgroundWork?.turn();
        const requestsCome = (dependencies.backgroundWork?.sinceForegroundMs() ?? Number.POSITIVE_INFINITY) < options.quietMs;
        if (!first && requestsCome) {
          // Lanes beyond the first wait for a quiet store.
          await new Promise((resolve) => setTimeout(resolve, options.pollMs).unref());
          continue;
        }
        const rows = requestsCome ? sliceRows : options.sliceRows;
        const sliceStarted = performance.now();
        const moved = await timed(() => index.mergeIntoGraph(rows));
        const took = Math.max(performance.now() - sliceStarted, 1);
        // Every slice, full or not, tells what a row costs now.
        sliceRows = Math.max(1, Math.min(options.sliceRows, 2 * rows, Math.round((rows * options.sliceMs) / took)));
        if (moved === 0) return;
        merged += moved;
        backlog -= moved;
        // Between slices, other work on this process's event loop and store goes first.
        await nextTurn();
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, options.lanes) }, (_, n) => (n === 0 ? lane(true).finally(() => (firstEnded = true)) : lane(false))));
    // Drained (as far as this process knows): the rows it deleted can give their space back.
    const release = options.releaseSpace ? index.releaseMergedSpace : undefined;
    if (!stopping && merged > 0 && release && (backlog <= 0 || (await index.graphBacklog()) === 0)) {
      await dependencies.backgroundWork?.turn();
      await timed(release);
    }
    if (merged > 0) {
      const seconds = ((performance.now() - started) / 1000).toFixed(1);
      log.info(`search: ${merged} chunks merged into the vector graph in ${seconds} s${backlog > 0 ? `, ${backlog} left` : ''}`);
    }
  }

  const running = (async () => {
    while (!stopping) {
      let failed = false;
      try {
        const backlog = await index.graphBacklog();
        if (backlog > 0 && (activity.idleForMs() >= options.idleMs || backlog > options.backlogLimit)) await mergeWhileAllowed(backlog);
      } catch (error) {
        failed = true;
        if (!stopping) log.error(`search: merging chunks into the vector graph failed; trying again in ${(30 * options.pollMs) / 1000} s`, error);
      }
      // Searches find the waiting chunks all the same: a store that keeps failing is not asked every second.
      if (!stopping) await pause(failed ? 30 * options.pollMs : options.pollMs);
    }
  })();

  return {
    async stop() {
      stopping = true;
      wakeUp?.();
      await running;
    },
  };
}
