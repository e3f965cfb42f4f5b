import { setMaxListeners } from 'node:events';
import { AppError } from '../../errors.js';
import type { PrismaClient } from '../../generated/prisma/client.js';
import type { Logger } from '../../logger.js';
import type { StoreSignals } from '../../db/database.js';
import { refundAbandonedRuns, renewAgentLeases } from '../credits/service.js';
import type { RunEventLog } from './event-log.js';
import { maxReadersPerUser, type LocalRuns } from './run-reading.js';
import { claimHandedOverRuns, runsReleasedChannel, type HandedOverRun } from './takeover.js';

/**
 * The runs of this process: their leases are renewed while they run, and runs of processes that
 * stopped are refunded (at start, then whenever their lease has passed).
 */
export class AgentRuns implements LocalRuns {
  readonly #running = new Map<string, Promise<void>>();
  /** The event logs of the runs of this process. */
  readonly #logs = new Map<string, RunEventLog>();
  /** Readers of a job's events on this process, woken when its run writes some. */
  readonly #listeners = new Map<string, Set<() => void>>();
  /** Readers following jobs' events (jobs.ts): a shutdown ends them before the store closes. */
  readonly #followers = new Set<Promise<void>>();
  #timer: NodeJS.Timeout | undefined;
  readonly #stopped = new AbortController();
  /** Aborts when the process stops: its runs end and are refunded. */
  readonly signal = this.#stopped.signal;

  /** Runs resumable runs draining processes handed over (set once the agent's dependencies exist; see takeOverRun). */
  #takeOver: ((runs: HandedOverRun[]) => void) | undefined;
  #ticking = false;
  /** Whether other processes share the store, and so may take over this one's resumable runs when it drains. */
  handsOver = false;

  constructor(
    private readonly prisma: PrismaClient,
    readonly leaseMs: number,
    private readonly log: Logger,
    private readonly signals?: StoreSignals,
  ) {
    // Every run and every reader of a job's events listens for the shutdown: many at once is normal.
    setMaxListeners(0, this.signal);
  }

  /** `exclusive`: no other process uses the store (the embedded one), so every running job at start is abandoned. */
  async start(options: { exclusive: boolean }) {
    if (options.exclusive) {
      const refunded = await refundAbandonedRuns(this.prisma, { all: true });
      if (refunded > 0) this.log.info(`agent: refunded ${refunded} runs left unfinished by a process that stopped`);
    } else {
      // Runs handed over by a draining process are taken, and those of processes that stopped refunded, as at every turn.
      await this.#tick();
    }
    this.handsOver = !options.exclusive && this.signals !== undefined;
    // A draining process gave runs up: the first to look takes them, without waiting for its turn.
    await this.signals?.listen(runsReleasedChannel, () => void this.#tick());
    this.#timer = setInterval(() => void this.#tick(), Math.max(50, this.leaseMs / 3));
    this.#timer.unref();
  }

  /** Runs, with `takeOver`, the resumable runs that draining processes hand over. */
  takeOverWith(takeOver: (runs: HandedOverRun[]) => void) {
    this.#takeOver = takeOver;
  }

  /** This process gave a run's lease up (a drain): the others are told to take it now. */
  released() {
    this.signals?.send(runsReleasedChannel, 'released');
  }

  async #tick() {
    if (this.#ticking) return;
    this.#ticking = true;
    try {
      const running = [...this.#running.keys()];
      await renewAgentLeases(this.prisma, running, this.leaseMs);
      if (this.#takeOver && !this.#stopped.signal.aborted) {
        const claimed = await claimHandedOverRuns(this.prisma, { running, leaseMs: this.leaseMs });
        if (claimed.length > 0) {
          this.log.info(`agent: took over ${claimed.length} resumable runs handed over by a draining process`);
          this.#takeOver(claimed);
        }
      }
      const refunded = await refundAbandonedRuns(this.prisma, { running: [...this.#running.keys()] });
      if (refunded > 0) this.log.info(`agent: refunded ${refunded} runs whose process stopped`);
    } catch (error) {
      if (!this.#stopped.signal.aborted) this.log.error('agent: renewing leases failed', error);
    } finally {
      this.#ticking = false;
    }
  }

  track(jobId: string, run: Promise<void>, log: RunEventLog) {
    this.#running.set(jobId, run);
    this.#logs.set(jobId, log);
    const forget = () => {
      this.#running.delete(jobId);
      this.#logs.delete(jobId);
    };
    // Not `finally`: its promise would reject with the run, unhandled, and end the process.
    run.then(forget, (error: unknown) => {
      forget();
      this.log.error(`agent: run ${jobId} ended with an error`, error);
    });
  }

  localLog(jobId: string) {
    return this.#logs.get(jobId);
  }

  listen(jobId: string, listener: () => void) {
    let listeners = this.#listeners.get(jobId);
    if (!listeners) this.#listeners.set(jobId, (listeners = new Set()));
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this.#listeners.get(jobId) === listeners) this.#listeners.delete(jobId);
    };
  }

  /** The job's run wrote events to its log (or ended): its readers here look at once. */
  notify(jobId: string) {
    for (const listener of this.#listeners.get(jobId) ?? []) listener();
  }

  follow(work: Promise<void>) {
    this.#followers.add(work);
    const forget = () => this.#followers.delete(work);
    work.then(forget, (error: unknown) => {
      forget();
      this.log.error('agent: following a run ended with an error', error);
    });
  }

  readonly #readers = new Map<string, number>();

  enterReader(userId: string) {
    const reading = this.#readers.get(userId) ?? 0;
    if (reading >= maxReadersPerUser) return false;
    this.#readers.set(userId, reading + 1);
    return true;
  }

  leaveReader(userId: string) {
    const reading = (this.#readers.get(userId) ?? 1) - 1;
    if (reading > 0) this.#readers.set(userId, reading);
    else this.#readers.delete(userId);
  }

  get size() {
    return this.#running.size;
  }

  /** Cancels the runs still going and waits for their refunds; ends the readers of jobs' events. */
  async stop() {
    this.#stopped.abort(new AppError('service_unavailable', 'the server is shutting down; the run was stopped and nothing was charged'));
    clearInterval(this.#timer);
    await Promise.allSettled([...this.#running.values(), ...this.#followers]);
  }
}
