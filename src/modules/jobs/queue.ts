import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import type { Logger } from '../../logger.js';
import type { StoreSignals } from '../../db/database.js';

export type JobKind = 'parse' | 'embed' | 'index_delete';

export const allJobKinds: readonly JobKind[] = ['parse', 'embed', 'index_delete'];

export type ClaimedJob = {
  id: string;
  kind: JobKind;
  document_id: string | null;
  user_id: string | null;
  attempts: number;
  /** This claim's token: a write that settles the job checks it, so one whose lease was taken over changes nothing. */
  claim: string;
  payload: Record<string, unknown>;
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
};

/** What a kind of job does and how its failures are treated. */
export type JobHandler = {
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
  companions?(first: ClaimedJob): Promise<string[]>;
  /**
   * Does the work of the jobs claimed together (one, unless the kind has companions) and
   * settles each itself (done, or moved on to its next kind). A throw is the failure of all.
   */
  run(jobs: ClaimedJob[], context: JobContext): Promise<void>;
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

export const exponentialBackoff = (baseMs: number, maxMs: number) => (attempts: number) =>
  Math.min(maxMs, baseMs * 2 ** Math.max(0, attempts - 1));

/**
 * Kinds whose new jobs go before any other job (within one user's turn), in this order, while no
 * worker of this process runs one: work that finishes documents before work that starts new
 * ones, so a bulk upload's first documents become ready while the rest are parsed, and embed
 * jobs wait together long enough to be embedded in full batches. The other workers take jobs by
 * due time meanwhile, so one worker keeps the embedder fed while the others parse what it will
 * embed next, and an embedder that keeps failing (each attempt waiting on its retries) does not
 * hold back parsing. Jobs being retried and every other kind follow by due time.
 */
const firstKinds: JobKind[] = ['index_delete', 'embed'];

/**
 * Works through `jobs`: claims a job (FOR UPDATE SKIP LOCKED, so workers in other processes
 * never take the same one) with, for kinds that run together, companions of its kind; runs its
 * kind's handler, and retries transient failures with the kind's backoff until its attempts run
 * out. A claim is a lease renewed while the job runs; when a process dies, its leases run out
 * and the jobs are claimed again.
 */
export function startJobQueue(
  prisma: PrismaClient,
  handlers: Record<JobKind, JobHandler>,
  options: JobQueueOptions,
  log: Logger,
): JobQueue {
  let stopping = false;
  let stopped: Promise<void> | undefined;
  let claimableKinds: JobKind[] = Object.keys(handlers) as JobKind[];
  const stopController = new AbortController();
  const wakers = new Set<() => void>();
  const wakeAll = () => {
    for (const waker of wakers) waker();
  };

  /**
   * Wakes idle workers here and in the other processes. `queued`: a new job, so the next claim
   * looks at every user's jobs again; `moved`: a job went on to its next kind.
   */
  const wakeEverywhere = (signal: 'queued' | 'moved') => {
    if (signal === 'queued') nextScanAt = 0;
    wakeAll();
    options.signals?.send(jobsChannel, signal);
  };
  // A queue with no workers (an `api` process) only sends.
  const listening = (
    (options.concurrency === 0 ? undefined : options.signals)?.listen(jobsChannel, (signal) => {
      // No message: signals may have been missed while the connection was down.
      if (signal !== 'moved') nextScanAt = 0;
      wakeAll();
    }) ?? Promise.resolve()
  ).catch((error: unknown) => log.error('could not listen for jobs queued by other processes (they are found by polling)', error));

  const leaseEnd = Prisma.sql`clock_timestamp() + make_interval(secs => ${options.leaseMs / 1000})`;

  const claimable = () =>
    Prisma.sql`j.kind = ANY(${claimableKinds}::job_kind[]) AND ((j.status = 'queued' AND j.run_after <= clock_timestamp()) OR (j.status = 'running' AND j.lease_expires < clock_timestamp()))`;
  /** Jobs being run by this process's workers, by kind. */
  const runningKinds = new Map<JobKind, number>();
  const jumpingKinds = () => firstKinds.filter((kind) => claimableKinds.includes(kind) && !runningKinds.get(kind));
  const rank = (jumping: JobKind[]) =>
    jumping.length === 0
      ? Prisma.sql`0`
      : Prisma.sql`CASE WHEN j.status = 'queued' AND j.attempts = 0 THEN coalesce(array_position(${jumping}::job_kind[], j.kind), ${jumping.length + 1}) ELSE ${jumping.length + 1} END`;

  /**
   * Finding every user's first job scans all waiting jobs (33 ms with 5,000 queued on the
   * embedded store), too much to do for each of a bulk upload's documents. So when the last
   * scan found one user waiting, claims take that user's first job in the same order until the
   * next scan, which comes after `singleUserScanMs` or at once when an upload wakes
   * the queue.
   */
  const singleUserScanMs = 2_000;
  let nextScanAt = 0;

  async function candidates(): Promise<{ id: string; user_id: string | null }[]> {
    const jumping = jumpingKinds();
    if (Date.now() >= nextScanAt) {
      const found = await prisma.$queryRaw<{ id: string; user_id: string | null }[]>`
        SELECT id, user_id FROM (
          SELECT DISTINCT ON (j.user_id) j.id, j.user_id, j.run_after, j.created_at
            FROM jobs j
           WHERE j.status IN ('queued', 'running') AND ${claimable()}
           ORDER BY j.user_id, ${rank(jumping)}, j.run_after, j.created_at
        ) AS first_per_user
        LEFT JOIN job_turns t USING (user_id)
        ORDER BY t.served_at NULLS FIRST, run_after, created_at
        LIMIT 8`;
      nextScanAt = found.length === 1 ? Date.now() + singleUserScanMs : 0;
      return found;
    }
    // Index scans: the first new job of each jumping kind (kind, status, run_after), the first
    // due job of any kind (status, run_after), the first expired lease.
    const newOfKind = jumping.map(
        (kind) => Prisma.sql`
          (SELECT j.id, j.user_id, j.kind, j.status, j.attempts, j.run_after, j.created_at FROM jobs j
            WHERE j.kind = ${kind}::job_kind AND j.status = 'queued' AND j.attempts = 0 AND j.run_after <= clock_timestamp()
            ORDER BY j.run_after, j.created_at LIMIT 1) UNION ALL`,
      );
    const found = await prisma.$queryRaw<{ id: string; user_id: string | null }[]>`
      SELECT j.id, j.user_id FROM (
        ${newOfKind.length > 0 ? Prisma.join(newOfKind, ' ') : Prisma.empty}
        (SELECT j.id, j.user_id, j.kind, j.status, j.attempts, j.run_after, j.created_at FROM jobs j
          WHERE j.status = 'queued' AND j.run_after <= clock_timestamp() AND ${claimable()} ORDER BY j.run_after, j.created_at LIMIT 1)
        UNION ALL
        (SELECT j.id, j.user_id, j.kind, j.status, j.attempts, j.run_after, j.created_at FROM jobs j
          WHERE j.status = 'running' AND j.lease_expires < clock_timestamp() AND ${claimable()} ORDER BY j.run_after, j.created_at LIMIT 1)
      ) AS j
      ORDER BY ${rank(jumping)}, j.run_after, j.created_at
      LIMIT 1`;
    if (found.length === 0) nextScanAt = 0;
    return found;
  }

  /**
   * Claims the jobs with these ids that are still claimable (a given id may be taken meanwhile),
   * and records that their users were served now. A scan takes the first job of the user served
   * longest ago, by any process (a user never served comes first), so one user's many or large
   * uploads cannot hold back everybody else's: users take turns across all processes.
   */
  const claimIds = (ids: string[]) =>
    prisma.$queryRaw<ClaimedJob[]>`
      WITH claimed AS (
        UPDATE jobs
           SET status = 'running', attempts = attempts + 1, updated_at = now(), lease_expires = ${leaseEnd}, claim = gen_random_uuid()
         WHERE id IN (SELECT j.id FROM jobs j WHERE j.id = ANY(${ids}::uuid[]) AND ${claimable()} FOR UPDATE SKIP LOCKED)
        RETURNING id, kind, document_id, user_id, attempts, claim, payload, last_error),
      served AS (
        INSERT INTO job_turns (user_id, served_at)
        SELECT served.user_id, clock_timestamp() FROM (SELECT DISTINCT c.user_id FROM claimed c JOIN users u ON u.id = c.user_id) AS served
        ON CONFLICT (user_id) DO UPDATE SET served_at = excluded.served_at)
      SELECT id, kind::text AS kind, document_id, user_id, attempts, claim::text AS claim, payload, last_error FROM claimed`;

  /**
   * This process's workers claim one at a time, each claim counted in `runningKinds` before the
   * next starts: two idle workers woken together must not both take the turn of a jumping kind.
   */
  let claiming: Promise<unknown> = Promise.resolve();
  function claim(): Promise<ClaimedJob[]> {
    const claimed = claiming.then(async () => {
      const jobs = await claimNext();
      if (jobs[0]) runningKinds.set(jobs[0].kind, (runningKinds.get(jobs[0].kind) ?? 0) + 1);
      return jobs;
    });
    claiming = claimed.catch(() => {});
    return claimed;
  }

  async function claimNext(): Promise<ClaimedJob[]> {
    for (const candidate of await candidates()) {
      const [first] = await claimIds([candidate.id]);
      if (!first) continue;
      const handler = handlers[first.kind];
      // A job that failed in company runs alone; so does one whose last attempt never ended (a
      // crash, perhaps on this very job), lest it take others down with it.
      const interrupted = first.attempts > 1 && first.last_error === null;
      if (!handler.companions || first.payload.solo === true || interrupted) return [first];
      const companionIds = await handler.companions(first).catch((error: unknown) => {
        log.error(`could not look for ${first.kind} jobs to run with job ${first.id}`, error);
        return [];
      });
      // The first job is claimed already: a failure here must not leave it waiting for its lease.
      const companions =
        companionIds.length > 0
          ? await claimIds(companionIds).catch((error: unknown) => {
              log.error(`could not claim ${first.kind} jobs to run with job ${first.id}; it runs alone`, error);
              return [];
            })
          : [];
      return [first, ...companions];
    }
    return [];
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

  /** Puts a job back for another attempt after `backoffMs`, or fails it when its attempts are spent. */
  async function retryOrFail(job: ClaimedJob, handler: JobHandler, error: unknown) {
    const message = error instanceof Error ? error.message : String(error);
    if (job.attempts >= handler.maxAttempts) {
      if (message !== ownersMessage(error)) log.error(`${job.kind} job ${job.id} failed for good`, message);
      await handler.fail(job, `${job.kind} failed after ${job.attempts} attempts: ${ownersMessage(error)}`);
      return;
    }
    log.error(`${job.kind} job ${job.id}${job.document_id ? ` (document ${job.document_id})` : ''} failed (attempt ${job.attempts}); retrying`, message);
    // Only a job still running under this claim: one its handler already settled (a document of
    // a batch that failed alone, say) or another worker took over stays as it is.
    await prisma.job.updateMany({
      where: { id: job.id, status: 'running', claim: job.claim },
      data: { status: 'queued', leaseExpires: null, claim: null, lastError: message, runAfter: new Date(Date.now() + handler.backoffMs(job.attempts)) },
    });
  }

  let lastJobEndedAt = performance.now();
  const jobsRunning = () => [...runningKinds.values()].reduce((sum, count) => sum + count, 0);

  /** Runs jobs that `claim` counted in `runningKinds`. */
  async function processJobs(claimed: ClaimedJob[]) {
    try {
      await processClaimed(claimed);
    } finally {
      runningKinds.set(claimed[0]!.kind, runningKinds.get(claimed[0]!.kind)! - 1);
      lastJobEndedAt = performance.now();
    }
  }

  async function processClaimed(claimed: ClaimedJob[]) {
    const handler = handlers[claimed[0]!.kind];
    // Interrupted too often (a crash each time, say): given up without running again.
    const jobs: ClaimedJob[] = [];
    for (const job of claimed) {
      if (job.attempts > handler.maxAttempts) await handler.fail(job, `processing was interrupted ${job.attempts - 1} times; giving up`);
      else jobs.push(job);
    }
    if (jobs.length === 0) return;

    // One controller per job, aborted when the job is lost to this worker (its document deleted,
    // or its lease taken over); the jobs' common signal aborts when all of them are.
    const losses = new Map(jobs.map((job) => [job.id, new AbortController()]));
    const allLost = new AbortController();
    for (const job of jobs) {
      const loss = losses.get(job.id)!;
      if (job.document_id) inProgress.set(job.document_id, loss);
      loss.signal.addEventListener('abort', () => {
        if ([...losses.values()].every((controller) => controller.signal.aborted)) allLost.abort(loss.signal.reason);
      });
    }
    const jobIds = jobs.map((job) => job.id);
    // Only this worker's claims are renewed. A job missing from the answer is lost: its row went
    // with its document (deleted by any process), or its lease ran out and another worker holds
    // it now.
    const renewal = setInterval(() => {
      prisma.$queryRaw<{ id: string; held: boolean }[]>`
        WITH renewed AS (
          UPDATE jobs SET lease_expires = ${leaseEnd} WHERE ${stillHeld(jobs)}
          RETURNING id)
        SELECT j.id, EXISTS (SELECT 1 FROM renewed r WHERE r.id = j.id) AS held
          FROM jobs j WHERE j.id = ANY(${jobIds}::uuid[])`
        .then((rows) => {
          const heldBy = new Map(rows.map((row) => [row.id, row.held]));
          for (const [jobId, loss] of losses) {
            const held = heldBy.get(jobId);
            if (held === undefined) loss.abort(new DocumentDeletedError());
            else if (!held) loss.abort(new LeaseLostError());
          }
        })
        .catch((error: unknown) => log.error('could not renew a job lease', error));
    }, options.leaseMs / 3);
    try {
      await handler.run(jobs, { signal: AbortSignal.any([stopController.signal, allLost.signal]) });
    } catch (error) {
      // Stopped (not merely no longer claiming): given back unfinished, the attempt not counted.
      if (stopController.signal.aborted) {
        await Promise.all(jobs.map(release));
        return;
      }
      if (error instanceof DocumentDeletedError || error instanceof LeaseLostError || allLost.signal.aborted) return;
      const message = error instanceof Error ? error.message : String(error);
      // The jobs still running under this worker's claims: a job goes with its deleted document,
      // another worker may hold it now, and a handler may have settled some itself before the
      // failure (a document of a batch that failed alone).
      const running = new Set((await prisma.$queryRaw<{ id: string }[]>`SELECT id FROM jobs WHERE ${stillHeld(jobs)}`).map((job) => job.id));
      const survivors = jobs.filter((job) => running.has(job.id));
      if (error instanceof PermanentJobError && survivors.length > 1) {
        // Which of them the failure belongs to is not known: each runs again alone, this attempt not counted.
        await prisma.$executeRaw`
          UPDATE jobs SET status = 'queued', lease_expires = NULL, claim = NULL, attempts = attempts - 1, payload = payload || '{"solo": true}'::jsonb
           WHERE ${stillHeld(survivors)}`;
        return;
      }
      for (const job of survivors) {
        if (error instanceof PermanentJobError) await handler.fail(job, message);
        else await retryOrFail(job, handler, error);
      }
    } finally {
      clearInterval(renewal);
      for (const job of jobs) if (job.document_id) inProgress.delete(job.document_id);
    }
  }

  /** Gives an unfinished job back at shutdown, without counting the attempt. */
  const release = (job: ClaimedJob) =>
    prisma.job.updateMany({
      where: { id: job.id, status: 'running', claim: job.claim },
      data: { status: 'queued', leaseExpires: null, claim: null, attempts: { decrement: 1 } },
    });

  async function workLoop() {
    while (!stopping) {
      let jobs: ClaimedJob[] = [];
      try {
        jobs = await claim();
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
    cancelDeleted,
    idleForMs: () => (jobsRunning() > 0 ? 0 : performance.now() - lastJobEndedAt),
    setClaimable(kinds) {
      claimableKinds = [...kinds];
      nextScanAt = 0;
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
export function queueIndexDelete(tx: Prisma.TransactionClient, userId: string, target: { documentId: string } | { workspaceId: string }) {
  return tx.job.create({ data: { kind: 'index_delete', userId, payload: target } });
}

/**
 * What a job's failure tells the document's owner: the error's own words (a model server's
 * status, a parser's reason), but not the store client's, whose queries and internals go to the
 * log only.
 */
export function ownersMessage(error: unknown): string {
  if (error instanceof Error && error.name.startsWith('PrismaClient')) return 'the store failed while the results were written; the service log has the details';
  return error instanceof Error ? error.message : String(error);
}
