import type { BackgroundWork } from '../../observability/background-work.js';
import type { CandidateDocument } from './document-prior.js';
import { FreshVectors } from './fresh-vectors.js';
import { TermPostings } from './term-postings.js';
import type { VectorGraph } from './vector-graph.js';

/**
 * What is held of a workspace: its keyword postings, the vectors and sketches of its chunks outside
 * the store's HNSW graph and, where the index keeps one, every chunk's vector in a graph in memory
 * (being filled until it is `complete`).
 */
export type MirroredWorkspace = { postings: TermPostings; fresh: FreshVectors; graph?: VectorGraph | undefined };

export type HeldWorkspace = MirroredWorkspace & {
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
  /**
   * What of `postings` is saved on disk (index-snapshots.ts): the version and horizon saved, and
   * when (0: read back, not written here); and the graph saved with them, at its version.
   */
  saved?: { postings: TermPostings; version: number; horizon: string; file: string; at: number; graph?: { graph: VectorGraph; version: number } | undefined } | undefined;
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

  /** Whether a search waits for this workspace now. */
  get awaited(): boolean {
    return this.#count > 0;
  }

  /** Waits for the searches in progress to end, unless a search waits for this workspace or begins to meanwhile. */
  async yieldUnlessAwaited(backgroundWork: BackgroundWork | undefined): Promise<void> {
    if (!backgroundWork || this.awaited) return;
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

/** The document of a chunk held in one of the workspaces, where its name is known (TermPostings.documentOf). */
export const heldDocuments =
  (held: readonly MirroredWorkspace[]) =>
  (chunkId: string): CandidateDocument | undefined => {
    for (const workspace of held) {
      const document = workspace.postings.documentOf(chunkId);
      if (document) return document;
    }
    return undefined;
  };

/** Bytes a held workspace takes, roughly. */
export const heldBytes = (held: MirroredWorkspace) => held.postings.approximateBytes + held.fresh.approximateBytes + (held.graph?.approximateBytes ?? 0);

export const unloaded = (): HeldWorkspace => {
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
