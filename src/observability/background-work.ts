/**
 * Work the service does on the store of its own accord, not for a request: merging chunks into
 * the vector graph, the embedded store's ANALYZE and VACUUM, loading a workspace's keyword
 * postings, restarting the embedded store with a larger page cache, and reading what searches use
 * into a new, empty cache. On the embedded store each holds its one connection while it runs, and
 * searches wait behind it; the time each kind took is what /metrics reports
 * (docs/observability.md) and what `bench:search --timeline` charts beside the searches' latency.
 */
export const backgroundTasks = ['graph_merge', 'analyze', 'vacuum', 'keyword_load', 'vector_graph_build', 'cache_resize', 'cache_warm', 'index_save'] as const;
export type BackgroundTask = (typeof backgroundTasks)[number];

export type BackgroundWorkState = { task: BackgroundTask; seconds: number; runs: number; running: number };

/**
 * Longest a step of background work waits for searches to end before it runs all the same: under
 * searches without pause it still gets a turn now and then, so merges and statistics never stop.
 */
export const longestYieldMs = 1_000;

export class BackgroundWork {
  readonly #states = new Map<BackgroundTask, BackgroundWorkState>(backgroundTasks.map((task) => [task, { task, seconds: 0, runs: 0, running: 0 }]));
  #foreground = 0;
  #foregroundEndedAt = Number.NEGATIVE_INFINITY;
  readonly #endedAt = new Map<BackgroundTask, number>();
  #waiting: (() => void)[] = [];
  readonly #longestYieldMs: number;

  constructor(options: { longestYieldMs?: number } = {}) {
    this.#longestYieldMs = options.longestYieldMs ?? longestYieldMs;
  }

  /**
   * Runs work a request waits for (a search). Background work starts its next step only once no
   * such work is in progress (see `turn`): a search then waits for at most the step under way,
   * not for every step queued for the store's one connection before its next statement.
   */
  async foreground<T>(work: () => Promise<T>): Promise<T> {
    this.#foreground += 1;
    try {
      return await work();
    } finally {
      this.#foreground -= 1;
      this.#foregroundEndedAt = performance.now();
      if (this.#foreground === 0) for (const wake of this.#waiting.splice(0)) wake();
    }
  }

  /** Milliseconds since the last request's work ended: 0 while one is in progress, Infinity before the first. */
  sinceForegroundMs(): number {
    return this.#foreground > 0 ? 0 : performance.now() - this.#foregroundEndedAt;
  }

  /** Resolves when no request's work is in progress, or after the longest yield (`longestYieldMs`) all the same. */
  async turn(): Promise<void> {
    if (this.#foreground === 0) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, this.#longestYieldMs);
      timer.unref();
      this.#waiting.push(done);
      function done() {
        clearTimeout(timer);
        resolve();
      }
    });
  }

  /** Runs `work`, counting its time against `task` whether it succeeds or fails. */
  async time<T>(task: BackgroundTask, work: () => Promise<T>): Promise<T> {
    const state = this.#states.get(task)!;
    const started = performance.now();
    state.running += 1;
    try {
      return await work();
    } finally {
      state.running -= 1;
      state.runs += 1;
      state.seconds += (performance.now() - started) / 1000;
      this.#endedAt.set(task, performance.now());
    }
  }

  /** Milliseconds since a run of `task` last ended: 0 while one runs, Infinity before the first. */
  sinceLastRunMs(task: BackgroundTask): number {
    if (this.#states.get(task)!.running > 0) return 0;
    return performance.now() - (this.#endedAt.get(task) ?? Number.NEGATIVE_INFINITY);
  }

  /** Seconds and runs so far (finished runs only), and how many of each are in progress. */
  states(): BackgroundWorkState[] {
    return [...this.#states.values()].map((state) => ({ ...state }));
  }
}
