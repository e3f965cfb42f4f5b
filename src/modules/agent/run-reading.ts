import type { Viewer } from '../../auth/authenticate.js';
import { agentRunVisible } from '../../auth/policy.js';
import { AppError, badRequest, notFound } from '../../errors.js';
import type { PrismaClient } from '../../generated/prisma/client.js';
import { requireUuid } from '../../ids.js';
import type { Logger } from '../../logger.js';
import { isTerminal, loggedEvents, servedAfterEnd, type LoggedEvent, type SequencedEvent, type WrittenEvent } from './event-log.js';
import { eventOfLogged } from './logged-form.js';
import { EventChannel, type AgentEvent } from './events.js';

/**
 * Reading runs and their logged events, and following a run's events to its end, on any
 * server of a store (docs/agent.md, "Resuming a stream"). The API and the store call a run an
 * agent job (`AgentJob`, `/v1/agent/jobs`, `agent_jobs`): the contract's name.
 */

/** What of the agent's dependencies reading and following runs needs. */
export type RunReading = {
  prisma: PrismaClient;
  log: Pick<Logger, 'error'>;
  runs: LocalRuns;
  /** KB_AGENT_RESUME_GRACE_SECONDS in ms. */
  resumeGraceMs: number;
};

/** What this process knows of its own runs (AgentRuns). */
export type LocalRuns = {
  readonly signal: AbortSignal;
  /** The log of a run of this process, while it runs. */
  localLog(jobId: string): { readonly lastSeq: number; flush(): Promise<void>; written(after: number): WrittenEvent[] } | undefined;
  /** Calls `listener` whenever events of the job were written to its log by this process. */
  listen(jobId: string, listener: () => void): () => void;
  /** Keeps a follower's work, so that a shutdown waits for it before closing the store. */
  follow(work: Promise<void>): void;
  /** Counts a reader of the user's; false when the user has `maxReadersPerUser` already. */
  enterReader(userId: string): boolean;
  leaveReader(userId: string): void;
};

/** Streams of job events one user may read at once from one server (a storm of reconnections is refused beyond). */
export const maxReadersPerUser = 100;

/** A job as `GET /v1/agent/jobs/{id}` and `Query.agentJob` show it. */
export type RunState = {
  id: string;
  status: 'running' | 'done' | 'failed' | 'cancelled';
  mode: 'fast' | 'deep';
  sessionId: string | null;
  resumable: boolean;
  creditsReserved: number;
  creditsUsed: number;
  error: string | null;
  createdAt: Date;
  finishedAt: Date | null;
  workspaceIds: string[];
};

const jobNotFound = (id: string) => notFound('agent job', id);

/** The viewer's job `id`; 404 for an unknown one, or one the policy hides (agentRunVisible, src/auth/policy.ts). */
export async function findRun(prisma: PrismaClient, viewer: Viewer, id: string): Promise<RunState> {
  const jobId = requireUuid(id, 'agent job');
  const job = await prisma.agentJob.findFirst({
    where: { id: jobId, userId: viewer.userId },
    select: {
      id: true,
      userId: true,
      status: true,
      mode: true,
      sessionId: true,
      resumable: true,
      creditsReserved: true,
      creditsUsed: true,
      error: true,
      createdAt: true,
      finishedAt: true,
      workspaceIds: true,
    },
  });
  const sessionWorkspaces = async (sessionId: string) =>
    (await prisma.chatSession.findFirst({ where: { id: sessionId, userId: viewer.userId }, select: { workspaceIds: true } }))?.workspaceIds ?? null;
  if (!job || !(await agentRunVisible(viewer, job, sessionWorkspaces))) throw jobNotFound(id);
  return { ...job, workspaceIds: job.workspaceIds ?? [] };
}

/**
 * The logged events of a job, read as JSON (not followed as a stream). Reading them takes the
 * answer as following does: a resumable run still going counts them as delivered, so an answer
 * read this way is charged like one read from the stream.
 */
export async function readLoggedEvents(prisma: PrismaClient, job: RunState, after: number, limit: number): Promise<LoggedEvent[]> {
  const events = await loggedEvents(prisma, job.id, after, limit);
  if (job.resumable && job.status === 'running' && events.length > 0) await markFollowed(prisma, job.id, events.at(-1)!.seq);
  return events.filter((event) => servedAfterEnd(job.status, event.data as { type: AgentEvent['type'] }));
}

export const countLoggedEvents = (prisma: PrismaClient, jobId: string) => prisma.agentEvent.count({ where: { jobId } });

/**
 * A resumable run's readers say they are there: `followed_at` now, and `delivered_seq` raised to
 * the last event a client has taken. The run (on whichever server) reads both: nobody following
 * for the grace period cancels it, and it is charged once a client has taken its answer.
 */
export async function markFollowed(prisma: PrismaClient, jobId: string, deliveredSeq = 0) {
  await prisma.$executeRaw`
    UPDATE agent_jobs SET followed_at = clock_timestamp(), delivered_seq = GREATEST(delivered_seq, ${deliveredSeq}::int)
     WHERE id = ${jobId}::uuid AND status = 'running'`;
}

/** How often a reader of a resumable run says it is still there: well within the grace period. */
export const followHeartbeatMs = (graceMs: number) => Math.min(graceMs / 3, 5_000);

/** Events read per query. */
const pageSize = 500;
/** How often a follower looks at the log of a run of another process (or of this one, when not woken). */
const remotePollMs = 200;
const localPollMs = 1_000;
/** How long a reconnection naming an event not yet in the log waits for the run's process to write it. */
const catchUpMs = 1_000;

/**
 * Checks that `after` names an event the job has sent (0: none yet): a client cannot have seen a
 * later one. A run of this process has its events in memory first; they are written now, so the
 * follower finds them. A run of another process may not have written the newest yet: the check
 * waits a little for them.
 */
async function checkAfter(reading: RunReading, job: RunState, after: number, field: string) {
  const local = reading.runs.localLog(job.id);
  const beyond = (last: number) => badRequest(field, `names event ${after} of agent job ${job.id}, which has sent ${last} so far`);
  if (local) {
    if (after > local.lastSeq) throw beyond(local.lastSeq);
    await local.flush().catch(() => undefined);
    return;
  }
  for (let waited = 0; ; waited += 100) {
    const last = (await reading.prisma.agentEvent.aggregate({ where: { jobId: job.id }, _max: { seq: true } }))._max.seq ?? 0;
    if (after <= last) return;
    if (job.status !== 'running' || waited >= catchUpMs) throw beyond(last);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * The job's events after `after`: those logged first, then the rest as they are logged, until
 * the terminal event (`done` or `error`). Reading a resumable run keeps it going (see
 * markFollowed); reading any other run has no effect on it. The stream ends without a terminal
 * event only when the server shuts down (the client reconnects elsewhere) or the job is deleted.
 * `field` names what `after` came from, for the 400.
 */
export async function followRun(
  reading: RunReading,
  viewer: Viewer,
  request: { jobId: string; after: number; field: string },
  signal: AbortSignal,
): Promise<AsyncIterableIterator<SequencedEvent>> {
  if (!reading.runs.enterReader(viewer.userId)) {
    throw new AppError('rate_limited', `at most ${maxReadersPerUser} streams of agent events may be open at once; close some first`, { retryAfterSeconds: 1 });
  }
  try {
    if (!Number.isInteger(request.after) || request.after < 0) throw badRequest(request.field, 'must be an event number from 0');
    const job = await findRun(reading.prisma, viewer, request.jobId);
    await checkAfter(reading, job, request.after, request.field);
    return new JobFollower(reading, viewer.userId, job, request.after, signal).start();
  } catch (error) {
    reading.runs.leaveReader(viewer.userId);
    throw error;
  }
}

type LogRow = { status: RunState['status']; seq: number | null; data: unknown };

class JobFollower {
  readonly channel: EventChannel<SequencedEvent>;
  readonly #stop = new AbortController();
  #woken = false;
  #wake: (() => void) | undefined;

  constructor(
    private readonly reading: RunReading,
    private readonly userId: string,
    private readonly job: RunState,
    private readonly after: number,
    private readonly requestSignal: AbortSignal,
  ) {
    this.channel = new EventChannel<SequencedEvent>(() => this.#stop.abort());
  }

  start(): AsyncIterableIterator<SequencedEvent> {
    const stop = () => this.#stop.abort();
    this.requestSignal.addEventListener('abort', stop, { once: true });
    this.reading.runs.signal.addEventListener('abort', stop, { once: true });
    if (this.requestSignal.aborted || this.reading.runs.signal.aborted) stop();
    const unlisten = this.reading.runs.listen(this.job.id, () => {
      this.#woken = true;
      this.#wake?.();
    });
    const work = this.#pump().finally(() => {
      this.reading.runs.leaveReader(this.userId);
      unlisten();
      this.requestSignal.removeEventListener('abort', stop);
      this.reading.runs.signal.removeEventListener('abort', stop);
    });
    this.reading.runs.follow(work);
    return this.channel;
  }

  async #pump() {
    const { prisma } = this.reading;
    const jobId = this.job.id;
    const following = this.job.resumable && this.job.status === 'running';
    let heartbeat: NodeJS.Timeout | undefined;
    const mark = (delivered = 0) =>
      markFollowed(prisma, jobId, delivered).catch((error: unknown) => {
        if (!this.#stop.signal.aborted) this.reading.log.error(`agent job ${jobId}: recording a reader failed`, error);
      });
    let after = this.after;
    let ended = false;
    let answerTaken = false;
    try {
      if (following) {
        await mark();
        heartbeat = setInterval(() => void mark(), followHeartbeatMs(this.reading.resumeGraceMs));
        heartbeat.unref();
      }
      while (!this.#stop.signal.aborted) {
        this.#woken = false;
        // A run of this server: what it has written is in memory (it says when it writes more),
        // and it is running until its terminal event. Any other: the store, with the job's status.
        const local = this.reading.runs.localLog(jobId);
        let rows: LogRow[];
        if (local) {
          rows = local.written(after).map((event) => ({ status: 'running', ...event }));
        } else {
          rows = await prisma.$queryRaw<LogRow[]>`
            SELECT j.status::text AS status, e.seq, e.data
              FROM agent_jobs j
              LEFT JOIN LATERAL (SELECT seq, data FROM agent_events WHERE job_id = j.id AND seq > ${after}::int ORDER BY seq LIMIT ${pageSize}) e ON true
             WHERE j.id = ${jobId}::uuid
             ORDER BY e.seq`;
          // The job was deleted (its user was): there is nothing more to follow.
          if (rows.length === 0) return;
        }
        if (this.#stop.signal.aborted) return;
        const status = rows[0]?.status ?? 'running';
        // What the run needs to hear of: the first of the answer's words a client takes (any of
        // the answer read is the answer taken) and its sources.
        let taken = 0;
        for (const row of rows) {
          if (row.seq === null) continue;
          const event: SequencedEvent = { ...eventOfLogged(typeof row.data === 'string' ? JSON.parse(row.data) : row.data), jobId, seq: row.seq };
          after = row.seq;
          if (!servedAfterEnd(status, event)) continue;
          this.channel.push(event);
          if (event.type === 'sources' || (event.type === 'token' && !answerTaken)) taken = row.seq;
          if (isTerminal(event)) {
            ended = true;
            return;
          }
        }
        // Nothing more is read before the client has taken these (a slow reader holds no more than
        // that in memory); once it has taken any of the answer, the run may charge it.
        if (rows.some((row) => row.seq !== null)) {
          await this.channel.drained();
          if (this.#stop.signal.aborted) return;
          if (taken > 0 && following) {
            answerTaken = true;
            await mark(taken);
          }
        }
        if (!local && rows.length >= pageSize) continue;
        // Read in the snapshot that saw the status: a run that ended has its terminal event
        // (written with the status) among these rows, or before `after`.
        if (status !== 'running') {
          const last = await prisma.agentEvent.findFirst({ where: { jobId }, orderBy: { seq: 'desc' }, select: { data: true } });
          const lastEvent = last ? eventOfLogged(last.data) : undefined;
          if (!lastEvent || !isTerminal(lastEvent)) this.channel.push({ ...(await endOf(prisma, jobId, status)), jobId, seq: after + 1 });
          ended = true;
          return;
        }
        await this.#sleep(local ? localPollMs : remotePollMs);
      }
    } catch (error) {
      if (!this.#stop.signal.aborted) this.reading.log.error(`agent job ${jobId}: following its events failed`, error);
    } finally {
      clearInterval(heartbeat);
      this.channel.end();
      // The grace period of a run still going starts when its last reader leaves.
      if (following && !ended) await mark();
    }
  }

  /** Until the job's run logs something (this process's runs say so), `ms` pass, or the follower stops. */
  #sleep(ms: number) {
    if (this.#woken) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#wake = undefined;
        this.#stop.signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wake = done;
      this.#stop.signal.addEventListener('abort', done, { once: true });
    });
  }
}

/**
 * The terminal event of a job that ended without one in its log: a job of a version before the
 * log, or one whose slot was taken (see TerminalEvent in the credits service).
 */
async function endOf(prisma: PrismaClient, jobId: string, status: RunState['status']): Promise<AgentEvent> {
  const job = await prisma.agentJob.findUniqueOrThrow({ where: { id: jobId }, select: { sessionId: true, creditsUsed: true, supportScore: true, error: true } });
  if (status === 'done') {
    const answer = await prisma.chatMessage.findFirst({ where: { jobId }, select: { sessionId: true, createdAt: true } });
    const question = answer
      ? await prisma.chatMessage.findFirst({
          where: { sessionId: answer.sessionId, role: 'user', createdAt: { lt: answer.createdAt } },
          orderBy: { createdAt: 'desc' },
          select: { content: true, rewrittenQuery: true },
        })
      : null;
    return {
      type: 'done',
      jobId,
      sessionId: job.sessionId ?? answer?.sessionId ?? '',
      creditsUsed: job.creditsUsed,
      supportScore: job.supportScore,
      rewrittenQuery: question?.rewrittenQuery ?? question?.content ?? '',
    };
  }
  return status === 'cancelled'
    ? { type: 'error', code: 'cancelled', message: `the run was cancelled (${job.error ?? 'no reason given'}); nothing was charged` }
    : { type: 'error', code: 'service_unavailable', message: `the run failed (${job.error ?? 'no reason given'}); nothing was charged` };
}
