import { AppError, notFound } from '../../errors.js';
import type { Prisma, PrismaClient } from '../../generated/prisma/client.js';

export type SubscriptionStatus = 'active' | 'inactive';

async function userIdByEmail(prisma: PrismaClient, email: string) {
  const user = await prisma.user.findUnique({ where: { email: email.trim().toLowerCase() }, select: { id: true } });
  if (!user) throw notFound('user', email);
  return user.id;
}

/** Adds credits and the matching ledger entry in one transaction; returns the new balance. */
export async function grantCredits(prisma: PrismaClient, email: string, amount: number, reason = 'grant') {
  if (!Number.isSafeInteger(amount) || amount <= 0) throw new AppError('bad_request', 'amount: must be a positive integer');
  const userId = await userIdByEmail(prisma, email);
  const [user] = await prisma.$transaction([
    prisma.user.update({ where: { id: userId }, data: { creditsBalance: { increment: amount } } }),
    prisma.creditEntry.create({ data: { userId, amount, reason } }),
  ]);
  return { email: user.email, balance: user.creditsBalance };
}

export async function setSubscription(prisma: PrismaClient, email: string, status: SubscriptionStatus, plan?: string) {
  const userId = await userIdByEmail(prisma, email);
  const subscription = await prisma.subscription.upsert({
    where: { userId },
    create: { userId, status, plan: plan ?? 'free' },
    update: { status, ...(plan !== undefined && { plan }) },
  });
  return { email: email.trim().toLowerCase(), plan: subscription.plan, status: subscription.status };
}

const recentEntryCount = 20;

export async function creditSummary(prisma: PrismaClient, userId: string) {
  const [user, subscription, granted, used, recent] = await Promise.all([
    prisma.user.findUniqueOrThrow({ where: { id: userId }, select: { creditsBalance: true } }),
    prisma.subscription.findUnique({ where: { userId } }),
    prisma.creditEntry.aggregate({ where: { userId, amount: { gt: 0 }, reason: { not: refundReason } }, _sum: { amount: true } }),
    prisma.creditEntry.aggregate({ where: { userId, OR: [{ amount: { lt: 0 } }, { reason: refundReason }] }, _sum: { amount: true } }),
    prisma.creditEntry.findMany({
      where: { userId },
      orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      take: recentEntryCount,
    }),
  ]);
  return {
    balance: user.creditsBalance,
    subscription: {
      plan: subscription?.plan ?? 'free',
      status: subscription?.status ?? ('inactive' as const),
      currentPeriodEnd: subscription?.currentPeriodEnd ?? null,
    },
    // A refund cancels its reservation: `used` counts what runs were charged.
    totals: { granted: granted._sum.amount ?? 0, used: -(used._sum.amount ?? 0) },
    recent,
  };
}

export type AgentRunMode = 'fast' | 'deep';

/** Ledger reasons of the agent's entries: a reservation is `agent_fast` or `agent_deep`; its reversal is `agent_refund`. */
export const refundReason = 'agent_refund';

/**
 * Reserves an agent run's cost before its stream opens, in one transaction: a conditional update
 * of the balance (it never goes below zero, and two runs can never spend the same credit), the
 * ledger entry and the job row. 402 without an active subscription or with too few credits.
 */
export async function reserveAgentRun(
  prisma: PrismaClient,
  request: {
    userId: string;
    mode: AgentRunMode;
    cost: number;
    leaseMs: number;
    resumable?: boolean;
    workspaceIds?: readonly string[];
    /** What a resumable run was asked, for another process to take it over (agent/takeover.ts). */
    request?: Prisma.InputJsonObject;
  },
): Promise<{ jobId: string }> {
  const { userId, mode, cost } = request;
  return prisma.$transaction(async (tx) => {
    const subscription = await tx.subscription.findUnique({ where: { userId } });
    const lapsed = subscription?.currentPeriodEnd != null && subscription.currentPeriodEnd.getTime() < Date.now();
    if (!subscription || subscription.status !== 'active' || lapsed) {
      throw new AppError('payment_required', 'the agent needs an active subscription');
    }
    const { count } = await tx.user.updateMany({ where: { id: userId, creditsBalance: { gte: cost } }, data: { creditsBalance: { decrement: cost } } });
    if (count === 0) {
      const user = await tx.user.findUniqueOrThrow({ where: { id: userId }, select: { creditsBalance: true } });
      throw new AppError('payment_required', `a ${mode} agent run costs ${cost} credit${cost === 1 ? '' : 's'} and the balance is ${user.creditsBalance}`);
    }
    const job = await tx.agentJob.create({
      data: {
        userId,
        mode,
        creditsReserved: cost,
        leaseExpiresAt: new Date(Date.now() + request.leaseMs),
        resumable: request.resumable ?? false,
        workspaceIds: [...(request.workspaceIds ?? [])],
        ...(request.request && { request: request.request }),
      },
      select: { id: true },
    });
    await tx.creditEntry.create({ data: { userId, amount: -cost, reason: `agent_${mode}`, jobId: job.id } });
    return { jobId: job.id };
  });
}

type Transaction = Parameters<Parameters<PrismaClient['$transaction']>[0]>[0];

/**
 * Turns a reservation into the charge, inside the transaction that stores the answer; the
 * reserved amount is what a run costs. Throws when the job is no longer running (refunded as
 * stale meanwhile): the answer is then not stored either.
 */
export async function chargeAgentRun(tx: Transaction, jobId: string, outcome: { sessionId: string; supportScore: number | null }): Promise<number> {
  const [job] = await tx.$queryRaw<{ credits_reserved: number }[]>`
    UPDATE agent_jobs SET status = 'done', credits_used = credits_reserved, session_id = ${outcome.sessionId}::uuid,
           support_score = ${outcome.supportScore}, finished_at = now(), lease_expires_at = NULL
     WHERE id = ${jobId}::uuid AND status = 'running'
    RETURNING credits_reserved`;
  if (!job) throw new AppError('internal_error', 'the run was stopped before its answer could be stored');
  return job.credits_reserved;
}

/**
 * The run's last event in its log (`agent_events`), written in the transaction that ends the job,
 * so the log ends with `error` exactly when the job was refunded. `seq` null: after the last
 * event logged (a job refunded by another process, which does not know how far the run got);
 * the slot taken already (the run's own writer got there first) leaves the job without one, and
 * readers then tell its end from the job's status.
 */
export type TerminalEvent = { seq: number | null; data: Prisma.InputJsonObject };

/**
 * Gives a run's reservation back (failure, cancellation, a dead process). Does nothing for a run
 * that is no longer running, so a refund can never be made twice or after a charge.
 */
export async function refundAgentRun(
  prisma: PrismaClient,
  jobId: string,
  status: 'failed' | 'cancelled',
  error: string | null,
  terminal?: TerminalEvent,
): Promise<boolean> {
  return prisma.$transaction(async (tx) => {
    const [job] = await tx.$queryRaw<{ user_id: string; credits_reserved: number }[]>`
      UPDATE agent_jobs SET status = ${status}::agent_job_status, error = ${error}, finished_at = now(), lease_expires_at = NULL
       WHERE id = ${jobId}::uuid AND status = 'running'
      RETURNING user_id::text, credits_reserved`;
    if (!job) return false;
    await tx.user.update({ where: { id: job.user_id }, data: { creditsBalance: { increment: job.credits_reserved } } });
    await tx.creditEntry.create({ data: { userId: job.user_id, amount: job.credits_reserved, reason: refundReason, jobId } });
    if (terminal) await logTerminalEvent(tx, jobId, terminal);
    return true;
  });
}

/** Appends a job's last event inside the transaction that ends it (see TerminalEvent). */
export async function logTerminalEvent(tx: Transaction, jobId: string, terminal: TerminalEvent) {
  const data = JSON.stringify(terminal.data);
  if (terminal.seq !== null) {
    await tx.$executeRaw`INSERT INTO agent_events (job_id, seq, data) VALUES (${jobId}::uuid, ${terminal.seq}, ${data}::jsonb) ON CONFLICT DO NOTHING`;
  } else {
    await tx.$executeRaw`
      INSERT INTO agent_events (job_id, seq, data)
      SELECT ${jobId}::uuid, COALESCE(MAX(seq), 0) + 1, ${data}::jsonb FROM agent_events WHERE job_id = ${jobId}::uuid
      ON CONFLICT DO NOTHING`;
  }
}

/** Keeps running jobs' leases ahead of the sweep. */
export async function renewAgentLeases(prisma: PrismaClient, jobIds: readonly string[], leaseMs: number) {
  if (jobIds.length === 0) return;
  await prisma.agentJob.updateMany({
    where: { id: { in: [...jobIds] }, status: 'running' },
    data: { leaseExpiresAt: new Date(Date.now() + leaseMs) },
  });
}

/** The `error` a lease sweep ends an abandoned run with. */
export const abandonedRunError = { type: 'error', code: 'service_unavailable', message: 'the process running the run stopped; nothing was charged' } as const;

/**
 * Refunds runs left reserved by a process that stopped: those whose lease has passed, or, with
 * `all`, every running one (the embedded store at start: no other process can be running them).
 */
export async function refundAbandonedRuns(prisma: PrismaClient, options: { all?: boolean; running?: readonly string[] } = {}): Promise<number> {
  const stale = await prisma.agentJob.findMany({
    where: {
      status: 'running',
      // This process's own runs are alive whatever their lease says (a stalled renewal).
      ...(options.running && options.running.length > 0 && { id: { notIn: [...options.running] } }),
      ...(!options.all && { OR: [{ leaseExpiresAt: { lt: new Date() } }, { leaseExpiresAt: null }] }),
    },
    select: { id: true },
    take: 1000,
  });
  let refunded = 0;
  // Readers of the run's events are told how it ended (a stream that was following it, elsewhere, ends too).
  const terminal: TerminalEvent = { seq: null, data: abandonedRunError };
  for (const job of stale) {
    if (await refundAgentRun(prisma, job.id, 'failed', 'the process running it stopped', terminal)) refunded += 1;
  }
  return refunded;
}
