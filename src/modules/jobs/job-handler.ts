import { Prisma } from '../../generated/prisma/client.js';
import type { JobKind, JobPayload } from './payloads.js';

export { allJobKinds, type JobKind } from './payloads.js';

export type ClaimedJob<Kind extends JobKind = JobKind> = {
  id: string;
  kind: Kind;
  document_id: string | null;
  user_id: string | null;
  attempts: number;
  /** This claim's token: a write that settles the job checks it, so one whose lease was taken over changes nothing. */
  claim: string;
  /** Read through its kind's schema before the handler sees it (payloads.ts). */
  payload: JobPayload<Kind>;
  /** Why the last attempt failed; null after a success or when it never ended (the process stopped or died). */
  last_error: string | null;
};

/** The rows of `jobs` this worker still holds: running under their claims. */
export const stillHeld = (jobs: readonly ClaimedJob[]) =>
  Prisma.sql`id = ANY(${jobs.map((job) => job.id)}::uuid[]) AND claim = ANY(${jobs.map((job) => job.claim)}::uuid[]) AND status = 'running'`;

/** A failure no retry can mend (a corrupt file, an answer of the wrong shape): the job fails at once. */
export class PermanentJobError extends Error {
  override name = 'PermanentJobError';
}

/**
 * The job's lease ran out (a process that stalled, or lost the store for longer than the lease)
 * and another worker claimed it: whatever this worker has not written yet is that one's to write.
 */
export class LeaseLostError extends Error {
  override name = 'LeaseLostError';
  constructor() {
    super('the job was claimed by another worker after its lease ran out');
  }
}

/** The job's document was deleted while it ran: nothing to record. */
export class DocumentDeletedError extends Error {
  override name = 'DocumentDeletedError';
  constructor() {
    super('the document was deleted');
  }
}

export type JobContext = {
  /**
   * Aborts when the queue stops, or when all the jobs run together are lost to this worker:
   * their documents deleted, or their leases taken over by another worker.
   */
  signal: AbortSignal;
  /**
   * Whether these jobs have had their turn: they have run for the queue's turn length
   * (`KB_INGEST_TURN_SECONDS`) and another user's job is waiting to be claimed. A handler whose
   * work comes in pieces asks between them; when it is over, the handler keeps what it did,
   * releases its jobs (`release`: the attempt not counted) and resolves to `'yielded'`.
   * Asks the store at most once per turn length.
   */
  turnOver(): Promise<boolean>;
};

/** How a handler's run ended when it did not throw: its jobs settled (`undefined`), or given back unfinished to let another user's jobs go first. */
export type RunOutcome = void | 'yielded';

/** What a kind of job does and how its failures are treated. */
export type JobHandler<Kind extends JobKind = JobKind> = {
  /** Attempts before a transient failure fails the job (and its document). */
  maxAttempts: number;
  /** Wait before the next attempt after `attempts` failures. */
  backoffMs(attempts: number): number;
  /**
   * Jobs of kinds that run together: after claiming `first`, the ids of other waiting jobs of
   * its kind to claim with it (those another worker took meanwhile are left out). Small jobs
   * share their fixed costs this way: one embedder call, one index write and one state change
   * for the chunks of many short documents.
   */
  companions?(first: ClaimedJob<Kind>): Promise<string[]>;
  /**
   * Does the work of the jobs claimed together (one, unless the kind has companions) and
   * settles each itself (done, moved on to its next kind, or released when its turn is over).
   * A throw is the failure of all.
   */
  run(jobs: ClaimedJob<Kind>[], context: JobContext): Promise<RunOutcome>;
  /** Records a failure for good: the job, and its document when it has one. */
  fail(job: ClaimedJob<Kind>, reason: string): Promise<void>;
};

/** A handler for each kind, each seeing its own kind's payloads. */
export type JobHandlers = { [Kind in JobKind]: JobHandler<Kind> };

export const exponentialBackoff = (baseMs: number, maxMs: number) => (attempts: number) =>
  Math.min(maxMs, baseMs * 2 ** Math.max(0, attempts - 1));
