import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import type { Logger } from '../../logger.js';
import { readSourceBytes } from '../documents/service.js';
import type { DocumentType } from './detect.js';
import type { ParseLimits } from './parse.js';
import { ParseLimitError, type ParsePool } from './parse-pool.js';

export type IngestionOptions = {
  /** Jobs processed at once by this process. */
  concurrency: number;
  maxAttempts: number;
  /** How long a claimed job stays claimed without its worker renewing the claim. */
  leaseMs: number;
  /** How often idle workers look for jobs (other processes may have queued some). */
  pollMs: number;
  /** A parse may take `base + perMegabyte × the file's size in MiB` seconds; longer fails the document. */
  parseTimeoutSeconds: { base: number; perMegabyte: number };
  parseLimits: ParseLimits;
};

type ClaimedJob = { id: string; document_id: string; user_id: string; attempts: number; chunk_tokens: number; overlap_tokens: number };

export type IngestionQueue = {
  /** Wakes idle workers: a job was just queued. */
  notify(): void;
  /** Stops at once the work on documents that no longer exist (just deleted, alone or with their workspace). */
  cancelDeleted(): Promise<void>;
  /** Stops claiming; waits for jobs in progress and releases what was not finished. */
  stop(): Promise<void>;
};

const CHUNK_WRITE_BATCH = 100;

function batches<Item>(items: readonly Item[], size: number): Item[][] {
  const result: Item[][] = [];
  for (let start = 0; start < items.length; start += size) result.push(items.slice(start, start + size));
  return result;
}

const backoffMs = (attempts: number) => Math.min(60_000, 1_000 * 2 ** (attempts - 1));

/**
 * Works through `ingestion_jobs`: claims a job (FOR UPDATE SKIP LOCKED, so workers in other
 * processes never take the same one), parses and chunks the document in a worker thread,
 * stores the chunks and the document's new status in one transaction, and retries transient
 * failures with exponential backoff. A claim is a lease renewed while the job runs; when a
 * process dies, its leases run out and the jobs are claimed again.
 */
export function startIngestionQueue(
  prisma: PrismaClient,
  pool: ParsePool,
  options: IngestionOptions,
  log: Logger,
  { releaseStaleClaims }: { releaseStaleClaims: boolean },
): IngestionQueue {
  let stopping = false;
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
  const markServed = (userId: string) => {
    const index = servedUsers.indexOf(userId);
    if (index >= 0) servedUsers.splice(index, 1);
    servedUsers.push(userId);
  };

  const claimable = Prisma.sql`((j.status = 'queued' AND j.run_after <= clock_timestamp()) OR (j.status = 'running' AND j.lease_expires < clock_timestamp()))`;

  /**
   * Finding every user's oldest job scans all waiting jobs (33 ms with 5,000 queued on the
   * embedded store), too much to do for each of a bulk upload's documents. So when the last
   * scan found one user waiting, claims take the oldest job in arrival order until the next
   * scan, which comes after `singleUserScanMs` or at once when an upload wakes the queue.
   */
  const singleUserScanMs = 2_000;
  let nextScanAt = 0;

  async function claim(): Promise<ClaimedJob | undefined> {
    let candidates: { id: string; user_id: string }[];
    if (Date.now() >= nextScanAt) {
      candidates = await prisma.$queryRaw`
        SELECT id, user_id FROM (
          SELECT DISTINCT ON (w.user_id) j.id, w.user_id, j.run_after, j.created_at
            FROM ingestion_jobs j
            JOIN documents d ON d.id = j.document_id
            JOIN workspaces w ON w.id = d.workspace_id
           WHERE j.status IN ('queued', 'running') AND ${claimable}
           ORDER BY w.user_id, j.run_after, j.created_at
        ) AS first_per_user
        ORDER BY coalesce(array_position(${servedUsers}::uuid[], user_id), 0), run_after, created_at
        LIMIT 8`;
      nextScanAt = candidates.length === 1 ? Date.now() + singleUserScanMs : 0;
    } else {
      // Two index scans (status, run_after), one per way a job becomes claimable.
      candidates = await prisma.$queryRaw`
        SELECT oldest.id, w.user_id FROM (
          (SELECT j.id, j.document_id, j.run_after, j.created_at FROM ingestion_jobs j
            WHERE j.status = 'queued' AND j.run_after <= clock_timestamp() ORDER BY j.run_after, j.created_at LIMIT 1)
          UNION ALL
          (SELECT j.id, j.document_id, j.run_after, j.created_at FROM ingestion_jobs j
            WHERE j.status = 'running' AND j.lease_expires < clock_timestamp() ORDER BY j.run_after, j.created_at LIMIT 1)
        ) AS oldest
        JOIN documents d ON d.id = oldest.document_id
        JOIN workspaces w ON w.id = d.workspace_id
        ORDER BY oldest.run_after, oldest.created_at
        LIMIT 1`;
      if (candidates.length === 0) nextScanAt = 0;
    }
    for (const candidate of candidates) {
      const rows = await prisma.$queryRaw<ClaimedJob[]>`
        UPDATE ingestion_jobs
           SET status = 'running', attempts = attempts + 1, updated_at = now(), lease_expires = ${leaseEnd}
         WHERE id = (SELECT j.id FROM ingestion_jobs j WHERE j.id = ${candidate.id}::uuid AND ${claimable} FOR UPDATE SKIP LOCKED)
        RETURNING id, document_id, ${candidate.user_id}::text AS user_id, attempts, chunk_tokens, overlap_tokens`;
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
    const deletion = new AbortController();
    inProgress.set(job.document_id, deletion);
    // Renewing the lease also notices a deletion made by another process: the job row goes
    // with its document.
    const renewal = setInterval(() => {
      prisma.$executeRaw`
        UPDATE ingestion_jobs SET lease_expires = ${leaseEnd}
         WHERE id = ${job.id}::uuid AND status = 'running'`
        .then((count) => {
          if (count === 0) deletion.abort(new DocumentDeletedError());
        })
        .catch((error: unknown) => log.error('could not renew an ingestion lease', error));
    }, options.leaseMs / 3);
    try {
      if (job.attempts > options.maxAttempts) {
        await fail(job, `processing was interrupted ${job.attempts - 1} times; giving up`);
        return;
      }
      const document = await prisma.document.findUnique({
        where: { id: job.document_id },
        select: { contentType: true, sizeBytes: true },
      });
      const bytes = document && (await readSourceBytes(prisma, job.document_id));
      if (!document || !bytes) return;
      const { count } = await prisma.document.updateMany({ where: { id: job.document_id }, data: { status: 'processing', error: null } });
      // Deleted meanwhile: the job went with it.
      if (count === 0) return;
      const timeoutSeconds = parseTimeoutSeconds(document.sizeBytes);
      const timeout = AbortSignal.timeout(timeoutSeconds * 1000);
      let result;
      try {
        result = await pool.parse(
          {
            bytes,
            type: document.contentType as DocumentType,
            chunkOptions: { chunkTokens: job.chunk_tokens, overlapTokens: job.overlap_tokens },
            limits: options.parseLimits,
          },
          AbortSignal.any([stopController.signal, deletion.signal, timeout]),
        );
      } catch (error) {
        if (timeout.aborted && !stopping && !deletion.signal.aborted) {
          throw new ParseLimitError(`parsing took longer than the limit of ${timeoutSeconds} s for a file of this size`);
        }
        throw error;
      }
      if (!result.ok) {
        await fail(job, result.error);
        return;
      }
      await prisma.$transaction(
        async (tx) => {
          await tx.chunk.deleteMany({ where: { documentId: job.document_id } });
          // A statement per batch keeps each within PostgreSQL's limit of 65,535 parameters.
          for (const batch of batches(result.chunks, CHUNK_WRITE_BATCH)) {
            await tx.chunk.createMany({
              data: batch.map((chunk) => ({
                documentId: job.document_id,
                chunkIndex: chunk.chunkIndex,
                content: chunk.content,
                tokenCount: chunk.tokenCount,
                metadata: chunk.metadata,
              })),
            });
          }
          await tx.document.update({
            where: { id: job.document_id },
            data: { status: 'ready', error: null, text: result.text, pageCount: result.pageCount, chunkCount: result.chunks.length },
          });
          await tx.ingestionJob.update({ where: { id: job.id }, data: { status: 'done', leaseExpires: null, lastError: null } });
        },
        { timeout: 120_000 },
      );
    } catch (error) {
      if (stopping) {
        await release(job);
        return;
      }
      const stillThere = await prisma.document.count({ where: { id: job.document_id } });
      if (stillThere === 0) return;
      const message = error instanceof Error ? error.message : String(error);
      if (error instanceof ParseLimitError) {
        // Over a limit of time or memory: the same file would fail the same way again.
        await fail(job, message);
      } else if (job.attempts >= options.maxAttempts) {
        await fail(job, `processing failed after ${job.attempts} attempts: ${message}`);
      } else {
        log.error(`ingestion of document ${job.document_id} failed (attempt ${job.attempts}); retrying`, error);
        await settle(job, { status: 'queued' }, { status: 'queued', lastError: message, runAfter: new Date(Date.now() + backoffMs(job.attempts)) });
      }
    } finally {
      clearInterval(renewal);
      inProgress.delete(job.document_id);
    }
  }

  const parseTimeoutSeconds = (sizeBytes: number) =>
    Math.ceil(options.parseTimeoutSeconds.base + (options.parseTimeoutSeconds.perMegabyte * sizeBytes) / (1024 * 1024));

  /** Ends a claim: the document's new status and the job's, in one transaction. */
  async function settle(
    job: ClaimedJob,
    document: Prisma.DocumentUpdateManyMutationInput,
    update: Prisma.IngestionJobUpdateManyMutationInput,
    onlyWhileRunning = false,
  ) {
    await prisma.$transaction([
      prisma.document.updateMany({ where: { id: job.document_id }, data: document }),
      prisma.ingestionJob.updateMany({
        where: { id: job.id, ...(onlyWhileRunning && { status: 'running' as const }) },
        data: { leaseExpires: null, ...update },
      }),
    ]);
  }

  const fail = (job: ClaimedJob, reason: string) =>
    settle(job, { status: 'failed', error: reason }, { status: 'failed', lastError: reason });

  /** Gives an unfinished job back at shutdown, without counting the attempt. */
  const release = (job: ClaimedJob) => settle(job, { status: 'queued' }, { status: 'queued', attempts: { decrement: 1 } }, true);

  async function workLoop() {
    while (!stopping) {
      let job: ClaimedJob | undefined;
      try {
        job = await claim();
      } catch (error) {
        if (stopping) break;
        log.error('could not claim an ingestion job', error);
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
    // In a single-process store nothing else can hold a claim, so claims left by a killed
    // process are released at once instead of waiting for their leases to run out.
    if (releaseStaleClaims) {
      await prisma.$transaction([
        prisma.$executeRaw`UPDATE documents SET status = 'queued' WHERE id IN (SELECT document_id FROM ingestion_jobs WHERE status = 'running')`,
        prisma.$executeRaw`UPDATE ingestion_jobs SET status = 'queued', lease_expires = NULL WHERE status = 'running'`,
      ]);
    }
    await Promise.all(Array.from({ length: options.concurrency }, () => workLoop()));
  })().catch((error: unknown) => log.error('the ingestion queue stopped', error));

  return {
    notify() {
      nextScanAt = 0;
      wakeAll();
    },
    cancelDeleted,
    async stop() {
      stopping = true;
      stopController.abort();
      wakeAll();
      await started;
    },
  };
}

class DocumentDeletedError extends Error {
  override name = 'DocumentDeletedError';
  constructor() {
    super('the document was deleted');
  }
}
