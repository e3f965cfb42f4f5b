import { AppError, badRequest } from '../../errors.js';
import type { PrismaClient } from '../../generated/prisma/client.js';
import type { Viewer } from '../../auth/authenticate.js';
import { readSessions, requireSessionId, requireWorkspaces, sessionNotFound } from '../../auth/policy.js';
import type { Logger } from '../../logger.js';
import type { Metrics } from '../../observability/metrics.js';
import { reserveAgentRun } from '../credits/service.js';
import { parseEventId, RunEventLog, type SequencedEvent, type WrittenEvent } from './event-log.js';
import { followRun } from './run-reading.js';
import type { RetrievalDependencies } from '../retrieval/service.js';
import type { AnswerModel, Turn } from './answer-model.js';
import { EventChannel, type AgentEvent } from './events.js';
import { executeRun, RunCancelled, RunHandedOver, type Run, type RunSpec } from './execution.js';
import { Following } from './following.js';
import { agentLimits, checkInput, type AgentStreamInput } from './input.js';
import type { AgentRuns } from './runs.js';
import type { HandedOverRun, StoredRunRequest } from './takeover.js';
/** A write of events that failed is tried again after this, then after twice as long, up to 2 s. */
const eventRetryMs = 100;

export type AgentDependencies = {
  prisma: PrismaClient;
  retrieval: RetrievalDependencies;
  answerModel: AnswerModel;
  runs: AgentRuns;
  log: Logger;
  cost: { fast: number; deep: number };
  /** A run that has not ended by then ends with an `error` event and a refund. */
  timeoutMs: number;
  /** How long a resumable run goes on with nobody reading its events (KB_AGENT_RESUME_GRACE_SECONDS). */
  resumeGraceMs: number;
  metrics?: Pick<Metrics, 'agentTimeToFirstToken' | 'agentRuns' | 'creditsCharged'>;
};

/**
 * Starts an agent run. Everything that can refuse it does so here, before a stream exists, in the
 * contract's order: the input (400), the workspaces and the session (404), the credits (402,
 * reserved atomically). Then the run goes on in the background and its events are returned.
 * `signal` is the request's: when the client goes away, the run stops and is refunded.
 */
export async function startAgentRun(
  dependencies: AgentDependencies,
  viewer: Viewer,
  input: AgentStreamInput,
  signal: AbortSignal,
): Promise<AsyncIterableIterator<SequencedEvent>> {
  const { prisma } = dependencies;
  const { userId } = viewer;
  const request = checkInput(input);
  // Workspaces and session as the policy lets the viewer see them (404 otherwise, src/auth/policy.ts).
  await requireWorkspaces(prisma, viewer, request.workspaceIds);
  let history: Turn[] = [];
  let sessionId: string | null = null;
  if (input.sessionId !== undefined && input.sessionId !== null) {
    sessionId = requireSessionId(String(input.sessionId));
    const id = sessionId;
    // The history is read in the snapshot that found the session visible.
    const messages = await readSessions(prisma, viewer, async (db, where) => {
      const session = await db.chatSession.findFirst({ where: { ...where, id }, select: { id: true } });
      if (!session) throw sessionNotFound(String(input.sessionId));
      return db.chatMessage.findMany({
        where: { sessionId: id },
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
        take: agentLimits.historyTurns,
        select: { role: true, content: true, rewrittenQuery: true },
      });
    });
    history = messages.reverse().map((message) => ({ role: message.role, content: message.rewrittenQuery ?? message.content }));
  }
  if (signal.aborted) throw new AppError('bad_request', 'the request was cancelled');
  const cost = dependencies.cost[request.mode];
  const resumable = input.resumable === true;
  // A resumable run keeps its request, so that another process can take it over.
  const stored: StoredRunRequest | undefined = resumable ? { ...request, sessionId, history } : undefined;
  const { jobId } = await reserveAgentRun(prisma, { userId, mode: request.mode, cost, leaseMs: dependencies.runs.leaseMs, resumable, workspaceIds: request.workspaceIds, request: stored });
  return launchRun(dependencies, { ...request, jobId, userId, sessionId, history, resumable }, { signal });
}

/**
 * Takes over a resumable run a draining process handed over: runs it again from its
 * request, checking each event against the one its log holds (nothing is sent or written again
 * for those), then goes on logging new ones. Its readers, on any process, follow the log as
 * before; nobody reading it for the grace period cancels it. An event that differs from the log
 * ends the run with an `error` and a refund.
 */
export function takeOverRun(dependencies: AgentDependencies, handedOver: HandedOverRun) {
  launchRun(dependencies, { ...handedOver.request, jobId: handedOver.jobId, userId: handedOver.userId, resumable: true }, { replay: handedOver.logged });
}

/**
 * A run's events and work: its log, its stream, who follows it, and its execution in the
 * background. `signal` is its first client's request (a run taken over has none); `replay` the
 * events an earlier process logged for it.
 */
function launchRun(
  dependencies: AgentDependencies,
  spec: RunSpec,
  options: { signal?: AbortSignal; replay?: readonly WrittenEvent[] },
): EventChannel<SequencedEvent> {
  const { jobId, resumable } = spec;
  const { signal } = options;
  const cancel = new AbortController();
  // Every event is in the log before it is sent, whichever client reads it (event-log.ts).
  const log = new RunEventLog(dependencies.prisma, jobId, { retryMs: eventRetryMs, log: dependencies.log, flushed: () => dependencies.runs.notify(jobId), replay: options.replay });
  const following = resumable ? new Following(dependencies, jobId, cancel) : undefined;
  // The client going away cancels the run, unless it is resumable: then it goes on for the grace
  // period, for the client to come back. The server stopping fails it (the client is told), or,
  // with other processes to take it, hands a resumable run over.
  const leave = () => (following ? following.detach(channel) : cancel.abort(new RunCancelled('client')));
  const channel: EventChannel<SequencedEvent> = new EventChannel<SequencedEvent>(leave);
  const onShutdown = () => cancel.abort(following && dependencies.runs.handsOver ? new RunHandedOver() : dependencies.runs.signal.reason);
  signal?.addEventListener('abort', leave, { once: true });
  dependencies.runs.signal.addEventListener('abort', onShutdown, { once: true });
  // Taken over: its first client is gone already.
  if (!signal || signal.aborted) leave();
  if (dependencies.runs.signal.aborted) onShutdown();
  const emit = (event: AgentEvent) => log.append(event, (seq) => channel.push({ ...event, jobId, seq }));
  const started = performance.now();
  let tokens = 0;
  const run: Run = {
    ...spec,
    channel,
    log,
    following,
    emit,
    token(content: string) {
      const first = tokens++ === 0;
      if (first && !log.replaying) dependencies.metrics?.agentTimeToFirstToken.observe({ mode: spec.mode }, (performance.now() - started) / 1000);
      const seq = emit({ type: 'token', content });
      if (first) following?.answerStartsAt(seq);
    },
  };
  const execution = (async () => {
    emit({ type: 'job_started', jobId });
    await executeRun(dependencies, run, cancel);
  })().finally(async () => {
    signal?.removeEventListener('abort', leave);
    dependencies.runs.signal.removeEventListener('abort', onShutdown);
    following?.stop();
    channel.end();
    // Whatever a failing store kept from the log is tried once more.
    await log.flush().catch(() => log.discard());
  });
  dependencies.runs.track(jobId, execution, log);
  return channel;
}

/**
 * Resumes a run's stream (POST /agent/stream with `Last-Event-ID`, or an `Idempotency-Key` sent
 * again): the events after `<jobId>:<seq>`, then the rest as they come; nothing new is started
 * or charged. The request is still checked (400), as it is for a new run.
 */
export async function resumeAgentStream(dependencies: AgentDependencies, viewer: Viewer, input: AgentStreamInput, lastEventId: string, signal: AbortSignal) {
  checkInput(input);
  const position = parseEventId(lastEventId);
  if (!position) throw badRequest('Last-Event-ID', 'must be an event id of this API, <jobId>:<seq> (the `id` of an event of the stream)');
  // The body's workspaces are checked as for a new run: a caller naming one it may not see gets
  // the same 404, whatever run it resumes.
  await requireWorkspaces(dependencies.prisma, viewer, input.workspaceIds);
  return followRun(dependencies, viewer, { jobId: position.jobId, after: position.seq, field: 'Last-Event-ID' }, signal);
}