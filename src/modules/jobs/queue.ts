import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import type { Logger } from '../../logger.js';

export type JobKind = 'parse' | 'embed' | 'index_delete';

export type ClaimedJob = {
  id: string;
  kind: JobKind;
  document_id: string | null;
  user_id: string | null;
  attempts: number;
  payload: Record<string, unknown>;
};

/** A failure no retry can mend (a corrupt file, an answer of the wrong shape): the job fails at once. */
export class PermanentJobError extends Error {
  override name = 'PermanentJobError';
}

/** The job's document was deleted while it ran: nothing to record. */
export class DocumentDeletedError extends Error {
  override name = 'DocumentDeletedError';
  constructor() {
    super('the document was deleted');
  }
}

export type JobContext = {
  /** Aborts when the queue stops, the document is deleted, or the job's own time runs out. */
  signal: AbortSignal;
};

/** What a kind of job does and how its failures are treated. */
export type JobHandler = {
  /** Attempts before a transient failure fails the job (and its document). */
  maxAttempts: number;
  /** Wait before the next attempt after `attempts` failures. */
  backoffMs(attempts: number): number;
  /** Does the work and settles the job itself (done, or moved on to its next kind). */
  run(job: ClaimedJob, context: JobContext): Promise<void>;
  /** Records a failure for good: the job, and its document when it has one. */
  fail(job: ClaimedJob, reason: string): Promise<void>;
};

export type JobQueueOptions = {
  /** Jobs processed at once by this process. */
  concurrency: number;
  /** How long a claimed job stays claimed without its worker renewing the claim. */
  leaseMs: number;
  /** How often idle workers look for jobs (other processes may have queued some). */
  pollMs: number;
  /** In a single-process store, claims left by a killed process are released at start. */
  releaseStaleClaims: boolean;
};

export type JobQueue = {
  /** Wakes idle workers: a job was just queued. */
  notify(): void;
  /** Stops at once the work on documents that no longer exist (just deleted, alone or with their workspace). */
  cancelDeleted(): Promise<void>;
  /** Kinds this process may claim, e.g. no `embed` while the index was built with another model. */
  setClaimable(kinds: readonly JobKind[]): void;
  /** Stops claiming; waits for jobs in progress and releases what was not finished. */
  stop(): Promise<void>;
};

export const exponentialBackoff = (baseMs: number, maxMs: number) => (attempts: number) =>
  Math.min(maxMs, baseMs * 2 ** Math.max(0, attempts - 1));

/**
 * Works through `jobs`: claims a job (FOR UPDATE SKIP LOCKED, so workers in other processes
 * never take the same one), runs its kind's handler, and retries transient failures with the
 * kind's backoff until its attempts run out. A claim is a lease renewed while the job runs; when
 * a process dies, its leases run out and the jobs are claimed again.
 */
export function startJobQueue(
  prisma: PrismaClient,
  handlers: Record<JobKind, JobHandler>,
  options: JobQueueOptions,
  log: Logger,
): JobQueue {
  let stopping = false;
  let claimableKinds: JobKind[] = Object.keys(handlers) as JobKind[];
  const stopController = new AbortController();
  const wakers = new Set<() => void>();
  const wakeAll = () => {
    for (const waker of wakers) waker();
  };

  const leaseEnd = Prisma.sql`clock_timestamp() + make_interval(secs => ${options.leaseMs / 1000})`;

  /**
   * Users in the order they were last served, least recently first. A claim takes the oldest
   * job of the user served longest ago (a user never served comes first), so one user's many
   * or large uploads cannot hold back everybody else's: users take turns. The order lives in
   * this process; with several processes on PostgreSQL each keeps its own turns.
   */
  const servedUsers: string[] = [];
  const markServed = (userId: string | null) => {
    if (!userId) return;
    const index = servedUsers.indexOf(userId);
    if (index >= 0) servedUsers.splice(index, 1);
    servedUsers.push(userId);
  };

  const claimable = () =>
    Prisma.sql`j.kind = ANY(${claimableKinds}::job_kind[]) AND ((j.status = 'queued' AND j.run_after <= clock_timestamp()) OR (j.status = 'running' AND j.lease_expires < clock_timestamp()))`;

  /**
   * Finding every user's oldest job scans all waiting jobs (33 ms with 5,000 queued on the
   * embedded store), too much to do for each of a bulk upload's documents. So when the last
   * scan found one user waiting, claims take the oldest job in arrival order until the next
   * scan, which comes after `singleUserScanMs` or at once when an upload wakes the queue.
   */
  const singleUserScanMs = 2_000;
  let nextScanAt = 0;

  async function claim(): Promise<ClaimedJob | undefined> {
    let candidates: { id: string; user_id: string | null }[];
    if (Date.now() >= nextScanAt) {
      candidates = await prisma.$queryRaw`
        SELECT id, user_id FROM (
          SELECT DISTINCT ON (j.user_id) j.id, j.user_id, j.run_after, j.created_at
            FROM jobs j
           WHERE j.status IN ('queued', 'running') AND ${claimable()}
           ORDER BY j.user_id, j.run_after, j.created_at
        ) AS first_per_user
        ORDER BY coalesce(array_position(${servedUsers}::uuid[], user_id), 0), run_after, created_at
        LIMIT 8`;
      nextScanAt = candidates.length === 1 ? Date.now() + singleUserScanMs : 0;
    } else {
      // Two index scans (status, run_after), one per way a job becomes claimable.
      candidates = await prisma.$queryRaw`
        SELECT oldest.id, oldest.user_id FROM (
          (SELECT j.id, j.user_id, j.run_after, j.created_at FROM jobs j
            WHERE j.status = 'queued' AND j.run_after <= clock_timestamp() AND ${claimable()} ORDER BY j.run_after, j.created_at LIMIT 1)
          UNION ALL
          (SELECT j.id, j.user_id, j.run_after, j.created_at FROM jobs j
            WHERE j.status = 'running' AND j.lease_expires < clock_timestamp() AND ${claimable()} ORDER BY j.run_after, j.created_at LIMIT 1)
        ) AS oldest
        ORDER BY oldest.run_after, oldest.created_at
        LIMIT 1`;
      if (candidates.length === 0) nextScanAt = 0;
    }
    for (const candidate of candidates) {
      const rows = await prisma.$queryRaw<ClaimedJob[]>`
        UPDATE jobs
           SET status = 'running', attempts = attempts + 1, updated_at = now(), lease_expires = ${leaseEnd}
         WHERE id = (SELECT j.id FROM jobs j WHERE j.id = ${candidate.id}::uuid AND ${claimable()} FOR UPDATE SKIP LOCKED)
        RETURNING id, kind::text AS kind, document_id, user_id, attempts, payload`;
      if (rows[0]) {
        markServed(candidate.user_id);
        return rows[0];
      }
    }
    return undefined;
  }

  /** Work in progress in this process, by document, so a deletion can stop it at once. */
  const inProgress = new Map<string, AbortController>();

  async function cancelDeleted() {
    const documentIds = [...inProgress.keys()];
    if (documentIds.length === 0) return;
    const remaining = await prisma.document.findMany({ where: { id: { in: documentIds } }, select: { id: true } });
    const still = new Set(remaining.map((document) => document.id));
    for (const documentId of documentIds) {
      if (!still.has(documentId)) inProgress.get(documentId)?.abort(new DocumentDeletedError());
    }
  }

  async function processJob(job: ClaimedJob) {
    const handler = handlers[job.kind];
    const deletion = new AbortController();
    if (job.document_id) inProgress.set(job.document_id, deletion);
    // Renewing the lease also notices a deletion made by another process: the job row goes
    // with its document.
    const renewal = setInterval(() => {
      prisma.$executeRaw`
        UPDATE jobs SET lease_expires = ${leaseEnd}
         WHERE id = ${job.id}::uuid AND status = 'running'`
        .then((count) => {
          if (count === 0) deletion.abort(new DocumentDeletedError());
        })
        .catch((error: unknown) => log.error('could not renew a job lease', error));
    }, options.leaseMs / 3);
    try {
      if (job.attempts > handler.maxAttempts) {
        await handler.fail(job, `processing was interrupted ${job.attempts - 1} times; giving up`);
        return;
      }
      await handler.run(job, { signal: AbortSignal.any([stopController.signal, deletion.signal]) });
    } catch (error) {
      if (stopping) {
        await release(job);
        return;
      }
      if (error instanceof DocumentDeletedError || deletion.signal.aborted) return;
      if (job.document_id && (await prisma.document.count({ where: { id: job.document_id } })) === 0) return;
      const message = error instanceof Error ? error.message : String(error);
      if (error instanceof PermanentJobError) {
        await handler.fail(job, message);
      } else if (job.attempts >= handler.maxAttempts) {
        await handler.fail(job, `${job.kind} failed after ${job.attempts} attempts: ${message}`);
      } else {
        log.error(`${job.kind} job ${job.id}${job.document_id ? ` (document ${job.document_id})` : ''} failed (attempt ${job.attempts}); retrying`, message);
        await prisma.job.updateMany({
          where: { id: job.id },
          data: { status: 'queued', leaseExpires: null, lastError: message, runAfter: new Date(Date.now() + handler.backoffMs(job.attempts)) },
        });
      }
    } finally {
      clearInterval(renewal);
      if (job.document_id) inProgress.delete(job.document_id);
    }
  }

  /** Gives an unfinished job back at shutdown, without counting the attempt. */
  const release = (job: ClaimedJob) =>
    prisma.job.updateMany({
      where: { id: job.id, status: 'running' },
      data: { status: 'queued', leaseExpires: null, attempts: { decrement: 1 } },
    });

  async function workLoop() {
    while (!stopping) {
      let job: ClaimedJob | undefined;
      try {
        job = await claim();
      } catch (error) {
        if (stopping) break;
        log.error('could not claim a job', error);
      }
      if (job) {
        await processJob(job);
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
      await prisma.$executeRaw`UPDATE jobs SET status = 'queued', lease_expires = NULL WHERE status = 'running'`;
    }
    await Promise.all(Array.from({ length: options.concurrency }, () => workLoop()));
  })().catch((error: unknown) => log.error('the job queue stopped', error));

  return {
    notify() {
      nextScanAt = 0;
      wakeAll();
    },
    cancelDeleted,
    setClaimable(kinds) {
      claimableKinds = [...kinds];
      nextScanAt = 0;
      wakeAll();
    },
    async stop() {
      stopping = true;
      stopController.abort();
      wakeAll();
      await started;
    },
  };
}

/** Queues the removal of index entries for what was just deleted, in the deleting transaction. */
export function queueIndexDelete(tx: Prisma.TransactionClient, userId: string, target: { documentId: string } | { workspaceId: string }) {
  return tx.job.create({ data: { kind: 'index_delete', userId, payload: target } });
}
