import type { Prisma, PrismaClient } from '../../generated/prisma/client.js';
import type { Logger } from '../../logger.js';
import { advance } from './advance.js';
import { DocumentDeletedError, LeaseLostError, PermanentJobError, stillHeld, type ClaimedJob, type JobHandler, type JobHandlers, type RunOutcome } from './job-handler.js';
import { readPayload } from './payloads.js';

/**
 * Runs claimed jobs for the queue's workers: renews their leases while they run, and retries,
 * fails or (once `stopSignal` aborts) gives back what they did not finish.
 */
export function claimedJobRunner(
  prisma: PrismaClient,
  handlers: JobHandlers,
  options: {
    leaseMs: number;
    leaseEnd: Prisma.Sql;
    stopSignal: AbortSignal;
    /** How long claimed jobs run before they give way to another user's waiting jobs (JobContext.turnOver). */
    turnMs: number;
    anotherUserWaiting(userIds: readonly (string | null)[]): Promise<boolean>;
  },
  log: Logger,
) {
  const { leaseEnd, stopSignal } = options;

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
    await advance(prisma, [job], { step: 'retry', error: message, afterMs: handler.backoffMs(job.attempts) });
  }

  /** JobContext.turnOver for jobs claimed now. */
  function turnOf(jobs: readonly ClaimedJob[]): () => Promise<boolean> {
    const userIds = [...new Set(jobs.map((job) => job.user_id))];
    let askAt = performance.now() + options.turnMs;
    return async () => {
      if (performance.now() < askAt) return false;
      try {
        return await options.anotherUserWaiting(userIds);
      } catch (error) {
        log.error('could not look for other users\' waiting jobs; the job keeps its turn', error);
        return false;
      } finally {
        askAt = performance.now() + options.turnMs;
      }
    };
  }

  /** Runs claimed jobs; resolves to `'yielded'` when their handler gave them back for another user's turn. */
  async function processClaimed(claimed: ClaimedJob[]): Promise<RunOutcome> {
    // Jobs claimed together are of one kind; its handler is seen as taking any kind's jobs here.
    const handler = handlers[claimed[0]!.kind] as JobHandler;
    const jobs: ClaimedJob[] = [];
    for (const job of claimed) {
      const read = readPayload(job.kind, job.payload);
      // Interrupted too often (a crash each time, say): given up without running again.
      if (job.attempts > handler.maxAttempts) await handler.fail(job, `processing was interrupted ${job.attempts - 1} times; giving up`);
      else if (!read.ok) await handler.fail(job, `${job.kind} job ${job.id} cannot run: ${read.reason}`);
      else jobs.push({ ...job, payload: read.payload });
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
      return await handler.run(jobs, { signal: AbortSignal.any([stopSignal, allLost.signal]), turnOver: turnOf(jobs) });
    } catch (error) {
      // Stopped (not merely no longer claiming): given back unfinished, the attempt not counted.
      if (stopSignal.aborted) {
        await advance(prisma, jobs, { step: 'release' });
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
        await advance(prisma, survivors, { step: 'release', solo: true });
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


  return { processClaimed, cancelDeleted };
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
