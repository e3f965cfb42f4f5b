import type { PrismaClient } from '../../generated/prisma/client.js';
import type { AgentMode, Turn } from './answer-model.js';
import type { WrittenEvent } from './event-log.js';
import { eventOfLogged, loggedForm } from './logged-form.js';

/** What a resumable run keeps of its request (agent_jobs.request), so that another process can run it again. */
export type StoredRunRequest = {
  message: string;
  mode: AgentMode;
  workspaceIds: string[];
  budget: { hops: number; searches: number; seconds: number };
  sessionId: string | null;
  history: Turn[];
};

/** A run another process handed over: claimed by this one, with what its log holds, in order from event 1. */
export type HandedOverRun = { jobId: string; userId: string; request: StoredRunRequest; logged: WrittenEvent[] };

/** Times a run may be handed over; after that nobody takes it, and it is refunded once its lease passes. */
export const maxTakeovers = 3;

/** The channel on which a draining process says it gave runs up, so that the others take them at once. */
export const runsReleasedChannel = 'kb_agent_runs';

/**
 * Claims resumable runs that a draining process handed over (`running` are this process's own),
 * renewing their lease for this process, and reads what each one's log holds. Several processes
 * may look at once: each run is claimed by one. A run whose lease merely passed is not taken:
 * its process may only be stalled (cut from the store for a while) and still answering its
 * client, and two processes must never answer one run; the lease sweep refunds it.
 */
export async function claimHandedOverRuns(prisma: PrismaClient, options: { running: readonly string[]; leaseMs: number }): Promise<HandedOverRun[]> {
  const claimed = await prisma.$queryRaw<{ id: string; user_id: string; request: StoredRunRequest }[]>`
    UPDATE agent_jobs SET lease_expires_at = clock_timestamp() + ${options.leaseMs} * interval '1 millisecond', takeovers = takeovers + 1, handed_over = false
     WHERE id IN (
       SELECT id FROM agent_jobs
        WHERE status = 'running' AND handed_over AND resumable AND request IS NOT NULL AND takeovers < ${maxTakeovers}
          AND NOT (id = ANY(${[...options.running]}::uuid[]))
        ORDER BY lease_expires_at
        LIMIT 20
          FOR UPDATE SKIP LOCKED)
    RETURNING id, user_id, request`;
  const runs: HandedOverRun[] = [];
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

/**
 * Hands a run over: a draining process that has stopped it and written its events gives it to
 * the others (its lease stays, so that the lease sweep refunds it if nobody takes it meanwhile).
 * `deliveredSeq` is the last event its first client took: the process taking it over charges an
 * answer taken in any part, as this one would have, whether or not the client comes back.
 */
export async function releaseRun(prisma: PrismaClient, jobId: string, deliveredSeq: number) {
  await prisma.$executeRaw`
    UPDATE agent_jobs SET handed_over = true, delivered_seq = GREATEST(delivered_seq, ${deliveredSeq}::int)
     WHERE id = ${jobId}::uuid AND status = 'running'`;
}
