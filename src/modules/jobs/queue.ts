import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import type { Logger } from '../../logger.js';
import type { StoreSignals } from '../../db/database.js';
import { jobClaims } from './claims.js';
import type { ClaimedJob, JobHandlers, JobKind } from './job-handler.js';
import type { JobPayload } from './payloads.js';
import { claimedJobRunner } from './run-claimed.js';

export type JobQueueOptions = {
  /** Jobs processed at once by this process. */
  concurrency: number;
  /** How long a claimed job stays claimed without its worker renewing the claim. */
  leaseMs: number;
  /** How long a job whose work comes in pieces runs before it gives way to another user's waiting jobs (JobContext.turnOver). */
  turnMs: number;
  /** How often idle workers look for jobs (other processes may have queued some). */
  pollMs: number;
  /** In a single-process store, claims left by a killed process are released at start. */
  releaseStaleClaims: boolean;
  /** Wake-ups shared with the other processes of the store (PostgreSQL), so that an upload any of them takes starts at once. */
  signals?: StoreSignals;
};

/** The signal of `notify` and `wake` between processes. */
const jobsChannel = 'kb_jobs';

export type JobQueue = {
  /** A job was just queued (an upload): idle workers wake, and the next claim looks at every user's jobs. */
  notify(): void;
  /** A job moved on to its next kind: idle workers wake. */
  wake(): void;
  /** Stops at once the work on documents that no longer exist (just deleted, alone or with their workspace). */
  cancelDeleted(): Promise<void>;
  /** Kinds this process may claim, e.g. no `embed` while the index was built with another model. */
  setClaimable(kinds: readonly JobKind[]): void;
  /** Milliseconds since the last job of this process ended; 0 while one runs. */
  idleForMs(): number;
  /** Resolves once the queue hears other processes' signals (at once without any; after a failure, logged, polling alone finds their work). */
  listening: Promise<void>;
  /**
   * Stops claiming; gives the jobs in progress `graceMs` to finish, then stops them and releases
   * what was not finished (to any process, at once).
   */
  stop(graceMs?: number): Promise<void>;
};

/**
 * Works through `jobs`: claims a job (FOR UPDATE SKIP LOCKED, so workers in other processes
 * never take the same one) with, for kinds that run together, companions of its kind; runs its
 * kind's handler, and retries transient failures with the kind's backoff until its attempts run
 * out. A claim is a lease renewed while the job runs; when a process dies, its leases run out
 * and the jobs are claimed again.
 */
export function startJobQueue(
  prisma: PrismaClient,
  handlers: JobHandlers,
  options: JobQueueOptions,
  log: Logger,
): JobQueue {
  let stopping = false;
  let stopped: Promise<void> | undefined;
  const stopController = new AbortController();
  const wakers = new Set<() => void>();
  const wakeAll = () => {
    for (const waker of wakers) waker();
  };

  const leaseEnd = Prisma.sql`clock_timestamp() + make_interval(secs => ${options.leaseMs / 1000})`;

  /** Jobs being run by this process's workers, by kind. */
  const runningKinds = new Map<JobKind, number>();
  const claims = jobClaims(prisma, handlers, { leaseEnd, runningKinds }, log);
  const runner = claimedJobRunner(
    prisma,
    handlers,
    { leaseMs: options.leaseMs, leaseEnd, stopSignal: stopController.signal, turnMs: options.turnMs, anotherUserWaiting: claims.anotherUserWaiting },
    log,
  );

  /**
   * Wakes idle workers here and in the other processes. `queued`: a new job, so the next claim
   * looks at every user's jobs again; `moved`: a job went on to its next kind.
   */
  const wakeEverywhere = (signal: 'queued' | 'moved') => {
    if (signal === 'queued') claims.rescan();
    wakeAll();
    options.signals?.send(jobsChannel, signal);
  };
  // A queue with no workers (an `api` process) only sends.
  const listening = (
    (options.concurrency === 0 ? undefined : options.signals)?.listen(jobsChannel, (signal) => {
      // No message: signals may have been missed while the connection was down.
      if (signal !== 'moved') claims.rescan();
      wakeAll();
    }) ?? Promise.resolve()
  ).catch((error: unknown) => log.error('could not listen for jobs queued by other processes (they are found by polling)', error));

  let lastJobEndedAt = performance.now();
  const jobsRunning = () => [...runningKinds.values()].reduce((sum, count) => sum + count, 0);

  /** Runs jobs that `claim` counted in `runningKinds`. */
  async function processJobs(claimed: ClaimedJob[]) {
    try {
      // Given back for another user's turn: the next claim looks at every user's jobs.
      if ((await runner.processClaimed(claimed)) === 'yielded') claims.rescan();
    } finally {
      runningKinds.set(claimed[0]!.kind, runningKinds.get(claimed[0]!.kind)! - 1);
      lastJobEndedAt = performance.now();
    }
  }

  async function workLoop() {
    while (!stopping) {
      let jobs: ClaimedJob[] = [];
      try {
        jobs = await claims.claim();
      } catch (error) {
        if (stopping) break;
        log.error('could not claim a job', error);
      }
      if (jobs.length > 0) {
        await processJobs(jobs);
        continue;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(finish, options.pollMs);
        function finish() {
          clearTimeout(timer);
          wakers.delete(finish);
          resolve();
        }
        wakers.add(finish);
      });
    }
  }

  const started = (async () => {
    if (options.releaseStaleClaims) {
      await prisma.$executeRaw`UPDATE jobs SET status = 'queued', lease_expires = NULL, claim = NULL WHERE status = 'running'`;
    }
    await Promise.all(Array.from({ length: options.concurrency }, () => workLoop()));
  })().catch((error: unknown) => log.error('the job queue stopped', error));

  return {
    notify: () => wakeEverywhere('queued'),
    wake: () => wakeEverywhere('moved'),
    listening,
    cancelDeleted: runner.cancelDeleted,
    idleForMs: () => (jobsRunning() > 0 ? 0 : performance.now() - lastJobEndedAt),
    setClaimable(kinds) {
      claims.setClaimable(kinds);
      wakeAll();
    },
    stop(graceMs?: number) {
      // A second call (the close after a drain) waits for the first, never longer.
      stopped ??= stopWithin(graceMs);
      return stopped;
    },
  };

  async function stopWithin(graceMs: number | undefined) {
    stopping = true;
    wakeAll();
    const within = async (ms: number) => {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([started, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
      clearTimeout(timer);
    };
    if (graceMs !== undefined) await within(Math.max(0, graceMs));
    stopController.abort();
    // A drain is bounded: work that does not heed the abort (a store write) is left to its
    // lease, which gives the job to another process.
    if (graceMs !== undefined) await within(5_000);
    else await started;
  }
}

/** Queues the removal of index entries for what was just deleted, in the deleting transaction. */
export function queueIndexDelete(tx: Prisma.TransactionClient, userId: string, target: JobPayload<'index_delete'>) {
  return tx.job.create({ data: { kind: 'index_delete', userId, payload: target } });
}

/**
 * Queues the chunks of documents to be embedded again (`documents`: a query of `document_id,
 * user_id` rows): a new embed job, or the document's job made one, unless it is still parsing
 * (its parse job becomes its embed job). Within the caller's transaction, beside the reset of the
 * chunks' `embedded_at`.
 */
export function queueEmbedding(tx: Prisma.TransactionClient | PrismaClient, documents: Prisma.Sql) {
  return tx.$executeRaw`
    INSERT INTO jobs (id, kind, document_id, user_id, status, updated_at)
    SELECT gen_random_uuid(), 'embed', d.document_id, d.user_id, 'queued', clock_timestamp() FROM (${documents}) AS d(document_id, user_id)
    ON CONFLICT (document_id) DO UPDATE
      SET kind = 'embed', status = 'queued', attempts = 0, run_after = clock_timestamp(), lease_expires = NULL,
          claim = NULL, last_error = NULL, payload = '{}', updated_at = clock_timestamp()
      WHERE jobs.kind <> 'parse'`;
}
