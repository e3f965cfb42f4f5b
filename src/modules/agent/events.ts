import type { Source } from './citations.js';

/** One step of deep research, as its `reasoning` event reports it (docs/agent.md describes them). */
export type ReasoningStep = {
  /** 1, 2, ... in the order the steps were taken. */
  index: number;
  kind: 'decompose' | 'search' | 'refine' | 'verify';
  /** What the step searched for, or the sub-questions it made. */
  queries: string[];
  /** Passages the step found (search) or sentences it judged (verify). */
  found: { documentId: string; filename: string; chunkIndex: number; page: number | null; score: number }[];
  /** `continue` or `stop`: whether research goes on after this step. */
  decision: 'continue' | 'stop';
  reason: string;
};

/** What the agent's stream carries, in order: job_started, reasoning (deep), token..., sources, then done or error. */
export type AgentEvent =
  | { type: 'job_started'; jobId: string }
  | { type: 'reasoning'; steps: ReasoningStep[] }
  | { type: 'token'; content: string }
  | { type: 'sources'; sources: Source[] }
  | { type: 'done'; jobId: string; sessionId: string; creditsUsed: number; supportScore: number | null; rewrittenQuery: string }
  | { type: 'error'; code: string; message: string };

/**
 * The events of one run, buffered until read. Reading stops when the run ends it; a reader that
 * stops early (`return`, as a closed connection does) calls `onStop`, which cancels the run.
 */
export class EventChannel<Event> implements AsyncIterableIterator<Event> {
  #buffer: Event[] = [];
  #waiting: ((result: IteratorResult<Event>) => void) | undefined;
  #ended = false;
  #drained: (() => void)[] = [];
  /** How many events the reader has taken (an agent run numbers its events from 1: the last one it has). */
  taken = 0;

  constructor(private readonly onStop: () => void) {}

  push(event: Event) {
    if (this.#ended) return;
    if (this.#waiting) {
      const resolve = this.#waiting;
      this.#waiting = undefined;
      this.taken += 1;
      resolve({ value: event, done: false });
    } else {
      this.#buffer.push(event);
    }
  }

  end() {
    this.#ended = true;
    this.#settleDrained();
    if (this.#waiting && this.#buffer.length === 0) {
      const resolve = this.#waiting;
      this.#waiting = undefined;
      resolve({ value: undefined, done: true });
    }
  }

  next(): Promise<IteratorResult<Event>> {
    if (this.#buffer.length > 0) {
      this.taken += 1;
      return Promise.resolve({ value: this.#buffer.shift()!, done: false });
    }
    if (this.#ended) return Promise.resolve({ value: undefined, done: true });
    this.#settleDrained();
    return new Promise((resolve) => (this.#waiting = resolve));
  }

  /** Settles once the reader has taken every event pushed so far (or reading has ended). */
  drained(): Promise<void> {
    if (this.#ended || (this.#buffer.length === 0 && this.#waiting)) return Promise.resolve();
    return new Promise((resolve) => this.#drained.push(resolve));
  }

  #settleDrained() {
    for (const resolve of this.#drained.splice(0)) resolve();
  }

  return(): Promise<IteratorResult<Event>> {
    const wasOpen = !this.#ended;
    this.#buffer = [];
    this.end();
    if (wasOpen) this.onStop();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}
