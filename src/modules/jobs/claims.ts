import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import type { Logger } from '../../logger.js';
import type { ClaimedJob, JobHandler, JobHandlers, JobKind } from './job-handler.js';

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

export type JobClaims = {
  /** Claims the next jobs to run together (none when nothing is due), each claim counted in `runningKinds`. */
  claim(): Promise<ClaimedJob[]>;
  /** The next claim looks at every user's jobs again. */
  rescan(): void;
  /** Kinds this process may claim from now on; the next claim looks at every user's jobs. */
  setClaimable(kinds: readonly JobKind[]): void;
  /** Whether a job this process may claim, of a user other than these, is waiting for a worker. */
  anotherUserWaiting(userIds: readonly (string | null)[]): Promise<boolean>;
};

/**
 * Claims for the queue's workers. `leaseEnd` is when a claim made now runs out; `runningKinds`
 * holds the jobs being run by this process's workers, by kind.
 */
export function jobClaims(
  prisma: PrismaClient,
  handlers: JobHandlers,
  { leaseEnd, runningKinds }: { leaseEnd: Prisma.Sql; runningKinds: Map<JobKind, number> },
  log: Logger,
): JobClaims {
  let claimableKinds: JobKind[] = Object.keys(handlers) as JobKind[];

  const claimable = () =>
    Prisma.sql`j.kind = ANY(${claimableKinds}::job_kind[]) AND ((j.status = 'queued' AND j.run_after <= clock_timestamp()) OR (j.status = 'running' AND j.lease_expires < clock_timestamp()))`;
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
      const handler = handlers[first.kind] as JobHandler;
      // A job that failed in company runs alone; so does one whose last attempt never ended (a
      // crash, perhaps on this very job), lest it take others down with it.
      const interrupted = first.attempts > 1 && first.last_error === null;
      if (!handler.companions || (first.payload as { solo?: unknown }).solo === true || interrupted) return [first];
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

  async function anotherUserWaiting(userIds: readonly (string | null)[]): Promise<boolean> {
    const users = userIds.filter((user): user is string => user !== null);
    const [row] = await prisma.$queryRaw<{ waiting: boolean }[]>`
      SELECT EXISTS (
        SELECT 1 FROM jobs j
         WHERE j.status IN ('queued', 'running') AND ${claimable()} AND (j.user_id IS NULL OR j.user_id <> ALL(${users}::uuid[]))
      ) AS waiting`;
    return row?.waiting === true;
  }

  return {
    claim,
    anotherUserWaiting,
    rescan() {
      nextScanAt = 0;
    },
    setClaimable(kinds) {
      claimableKinds = [...kinds];
      nextScanAt = 0;
    },
  };
}
