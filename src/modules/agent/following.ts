import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import type { SequencedEvent } from './event-log.js';
import type { EventChannel } from './events.js';
import { markFollowed } from './run-reading.js';
import { aborted, RunCancelled } from './execution.js';
import type { AgentDependencies } from './service.js';

/**
 * Who follows a resumable run: its first client while that stream is open, then readers of its
 * events on any server (they record themselves in agent_jobs: markFollowed). Once the first client
 * has left, a run nobody has followed for the grace period is cancelled and refunded, unless a
 * client has taken any of its answer (its first token, or anything after it) by then: an answer
 * read in any part, by stream or as JSON, is taken, and the run is then finished and charged
 * whether or not anyone reads the rest.
 */
export class Following {
  #attached = true;
  /** The last event the first client had taken when it left. */
  #takenWhenLeft = 0;
  /** The number of the answer's first event (its first token), once the run has sent it. */
  #answerSeq: number | undefined;
  #watch: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(
    private readonly dependencies: AgentDependencies,
    private readonly jobId: string,
    private readonly cancel: AbortController,
  ) {}

  answerStartsAt(seq: number) {
    this.#answerSeq ??= seq;
  }

  /** The first client left: its stream ends, and the grace period starts now. */
  detach(channel: EventChannel<SequencedEvent>) {
    if (!this.#attached) return;
    this.#attached = false;
    // The request may be seen gone before its stream is: what the stream's writer reads after now
    // reaches nobody.
    this.#takenWhenLeft = channel.taken;
    channel.end();
    const { prisma, log, resumeGraceMs } = this.dependencies;
    void markFollowed(prisma, this.jobId)
      .catch((error: unknown) => log.error(`agent run ${this.jobId}: recording its client's departure failed`, error))
      .finally(() => {
        if (this.#stopped) return;
        this.#watch = setInterval(() => void this.#check(), Math.max(100, Math.min(resumeGraceMs / 4, 2_000)));
        this.#watch.unref();
      });
  }

  /** The last event the first client has taken (so far, or when it left). */
  takenByFirstClient(channel: EventChannel<SequencedEvent>) {
    return this.#attached ? channel.taken : this.#takenWhenLeft;
  }

  /** Whether a client has taken events up to `seq`: the first one when it left, or a reader that recorded `deliveredSeq`. */
  #taken(seq: number | undefined, deliveredSeq: number) {
    return seq !== undefined && (this.#takenWhenLeft >= seq || deliveredSeq >= seq);
  }

  async #check() {
    const { prisma, log, resumeGraceMs } = this.dependencies;
    try {
      const [job] = await prisma.$queryRaw<{ followed: boolean | null; delivered_seq: number }[]>`
        SELECT followed_at > clock_timestamp() - ${resumeGraceMs} * interval '1 millisecond' AS followed, delivered_seq
          FROM agent_jobs WHERE id = ${this.jobId}::uuid AND status = 'running'`;
      if (!job || job.followed || this.#taken(this.#answerSeq, job.delivered_seq)) return;
      this.cancel.abort(new RunCancelled('abandoned', resumeGraceMs));
    } catch (error) {
      if (!this.#stopped) log.error(`agent run ${this.jobId}: checking for its readers failed`, error);
    }
  }

  /**
   * Settles once the run may be charged: a client has taken the events up to `seq` (the first
   * client while its stream is open, or a reader on any server), or any part of the answer before
   * it left. Throws when the run is stopped meanwhile (nobody came back within the grace period).
   */
  async delivered(channel: EventChannel<SequencedEvent>, seq: number, signal: AbortSignal) {
    if (this.#attached) {
      await Promise.race([channel.drained(), aborted(signal)]);
      signal.throwIfAborted();
      // A turn of the event loop: a connection closed meanwhile is noticed.
      await nextTurn();
      if (this.#attached) return;
    }
    // Readers on other servers record what they took in the store; its answer is asked for at a
    // slowing pace (a run may wait the whole grace period), with one timer and no listener left behind.
    for (let pauseMs = 50; ; pauseMs = Math.min(pauseMs * 2, 1_000)) {
      if (this.#taken(seq, 0) || this.#taken(this.#answerSeq, 0)) return;
      const [job] = await this.dependencies.prisma.$queryRaw<{ delivered_seq: number }[]>`SELECT delivered_seq FROM agent_jobs WHERE id = ${this.jobId}::uuid`;
      const deliveredSeq = job?.delivered_seq ?? 0;
      if (this.#taken(seq, deliveredSeq) || this.#taken(this.#answerSeq, deliveredSeq)) return;
      await sleep(pauseMs, undefined, { signal }).catch(() => undefined);
      signal.throwIfAborted();
    }
  }

  stop() {
    this.#stopped = true;
    clearInterval(this.#watch);
  }
}
