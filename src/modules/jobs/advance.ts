import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import { stillHeld, type ClaimedJob, type JobKind } from './job-handler.js';
import type { JobPayload } from './payloads.js';

/**
 * Where a claimed job goes next. Every step gives up the claim, so the worker's later writes
 * (which check it) change nothing.
 * - `done`: finished for good.
 * - `failed`: failed for good, with the reason its owner sees.
 * - `retry`: the attempt failed and counts; queued again after `afterMs`.
 * - `release`: given back unfinished, the attempt not counted (a stop, or a failure in company:
 *   `solo` then makes it run alone).
 * - `next`: its stage is over; it is queued at once as the next stage's kind, attempts from zero.
 */
export type JobStep =
  | { step: 'done' }
  | { step: 'failed'; reason: string }
  | { step: 'retry'; error: string; afterMs: number }
  | { step: 'release'; solo?: boolean }
  | { [Kind in JobKind]: { step: 'next'; kind: Kind; payload: JobPayload<Kind> } }[JobKind];

function assignments(to: JobStep): Prisma.Sql {
  const common = Prisma.sql`lease_expires = NULL, claim = NULL, updated_at = now()`;
  switch (to.step) {
    case 'done':
      return Prisma.sql`status = 'done', last_error = NULL, ${common}`;
    case 'failed':
      return Prisma.sql`status = 'failed', last_error = ${to.reason}, ${common}`;
    case 'retry':
      return Prisma.sql`status = 'queued', last_error = ${to.error}, run_after = clock_timestamp() + make_interval(secs => ${to.afterMs / 1000}), ${common}`;
    case 'release':
      return Prisma.sql`status = 'queued', attempts = attempts - 1, ${to.solo ? Prisma.sql`payload = payload || '{"solo": true}'::jsonb,` : Prisma.empty} ${common}`;
    case 'next':
      return Prisma.sql`kind = ${to.kind}::job_kind, status = 'queued', attempts = 0, last_error = NULL, run_after = now(), payload = ${JSON.stringify(to.payload)}::jsonb, ${common}`;
  }
}

/**
 * The UPDATE that moves `jobs` on, for those this worker still holds (a job whose document went,
 * or that another worker took over after its lease ran out, stays as it is).
 */
export const advanceStatement = (jobs: readonly ClaimedJob[], to: JobStep) => Prisma.sql`UPDATE jobs SET ${assignments(to)} WHERE ${stillHeld(jobs)}`;

/** Moves `jobs` on: a statement of its own, or one of a batch transaction's. Resolves to how many moved. */
export const advance = (db: PrismaClient | Prisma.TransactionClient, jobs: readonly ClaimedJob[], to: JobStep) => db.$executeRaw(advanceStatement(jobs, to));
