import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import { advanceStatement } from '../jobs/advance.js';
import { stillHeld, type ClaimedJob } from '../jobs/job-handler.js';

/** Fails the job and its document for good, with the reason the document shows; nothing when another worker holds the job now. */
export async function failDocument(prisma: PrismaClient, job: ClaimedJob, reason: string) {
  await prisma.$executeRaw`
    WITH failed AS (${advanceStatement([job], { step: 'failed', reason })} RETURNING document_id)
    UPDATE documents SET status = 'failed', error = ${reason}, updated_at = now()
     WHERE id IN (SELECT document_id FROM failed)`;
}

/**
 * The documents of `jobs` whose jobs this worker still holds, for the statements of a transaction
 * that begins with `lockHeld` (so no other worker can claim them before it commits).
 */
export const heldDocuments = (jobs: ClaimedJob[]) => Prisma.sql`SELECT document_id FROM jobs WHERE ${stillHeld(jobs)}`;
/**
 * Locks the jobs' documents, then the jobs, in the order a deletion takes them (the document,
 * then by cascade its job), so that a deletion meanwhile waits rather than deadlocks.
 */
export const lockHeld = (prisma: PrismaClient, jobs: ClaimedJob[]) => [
  prisma.$queryRaw`
    SELECT id FROM documents WHERE id = ANY(${jobs.map((job) => job.document_id)}::uuid[]) ORDER BY id FOR NO KEY UPDATE`,
  prisma.$queryRaw`SELECT id FROM jobs WHERE ${stillHeld(jobs)} ORDER BY id FOR UPDATE`,
];
