import type { PrismaClient } from '../../generated/prisma/client.js';
import type { AgentMode, Turn } from './answer-model.js';
import { eventOfLogged, loggedForm, type WrittenEvent } from './event-log.js';

/** What a resumable run keeps of its request (agent_jobs.request), so that another process can run it again. */
export type StoredRunRequest = {
  message: string;
  mode: AgentMode;
  workspaceIds: string[];
  budget: { hops: number; searches: number; seconds: number };
  sessionId: string | null;
  history: Turn[];
};

/** A run another process left: claimed by this one, with what its log holds, in order from event 1. */
export type AbandonedRun = { jobId: string; userId: string; request: StoredRunRequest; logged: WrittenEvent[] };

/** Times a run may be taken over; a run whose processes keep dying is refunded after that. */
export const maxTakeovers = 3;

/** The channel on which a draining process says it gave runs up, so that the others take them at once. */
export const runsReleasedChannel = 'kb_agent_runs';

/**
 * Claims resumable runs whose process stopped (their lease passed; `running` are this process's
 * own), renewing their lease for this process, and reads what each one's log holds. Several
 * processes may look at once: each run is claimed by one.
 */
export async function claimAbandonedRuns(prisma: PrismaClient, options: { running: readonly string[]; leaseMs: number }): Promise<AbandonedRun[]> {
  const claimed = await prisma.$queryRaw<{ id: string; user_id: string; request: StoredRunRequest }[]>`
    UPDATE agent_jobs SET lease_expires_at = clock_timestamp() + ${options.leaseMs} * interval '1 millisecond', takeovers = takeovers + 1
     WHERE id IN (
       SELECT id FROM agent_jobs
        WHERE status = 'running' AND resumable AND request IS NOT NULL AND takeovers < ${maxTakeovers}
          AND lease_expires_at < clock_timestamp() AND NOT (id = ANY(${[...options.running]}::uuid[]))
        ORDER BY lease_expires_at
        LIMIT 20
          FOR UPDATE SKIP LOCKED)
    RETURNING id, user_id, request`;
  const runs: AbandonedRun[] = [];
  for (const job of claimed) {
    const rows = await prisma.agentEvent.findMany({ where: { jobId: job.id }, orderBy: { seq: 'asc' }, select: { seq: true, data: true } });
    // The log has no gaps (events are numbered as they are made and written in order); the
    // replay follows it from event 1 as far as it is whole.
    const logged: WrittenEvent[] = [];
    for (const row of rows) {
      if (row.seq !== logged.length + 1) break;
      logged.push({ seq: row.seq, data: loggedForm(eventOfLogged(row.data)) });
    }
    runs.push({ jobId: job.id, userId: job.user_id, request: job.request, logged });
  }
  return runs;
}

/** Gives a run's lease up at once: a draining process hands it to the others. */
export async function releaseRun(prisma: PrismaClient, jobId: string) {
  await prisma.$executeRaw`
    UPDATE agent_jobs SET lease_expires_at = clock_timestamp() - interval '1 second' WHERE id = ${jobId}::uuid AND status = 'running'`;
}
