import { setMaxListeners } from 'node:events';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { AppError, badRequest } from '../../errors.js';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import { isUuid } from '../../ids.js';
import type { Viewer } from '../../auth/authenticate.js';
import { readSessions, requireSessionId, requireWorkspaces, sessionNotFound } from '../../auth/policy.js';
import type { Logger } from '../../logger.js';
import type { Metrics } from '../../observability/metrics.js';
import { characterCount, textProblem, hasVisibleCharacter } from '../../input-limits.js';
import { abandonedRunError, chargeAgentRun, refundAbandonedRuns, refundAgentRun, renewAgentLeases, reserveAgentRun } from '../credits/service.js';
import { eventOfLogged, isTerminal, loggedForm, parseEventId, restSources, RunDiverged, RunEventLog, type SequencedEvent, type WrittenEvent } from './event-log.js';
import { followAgentJob, markFollowed, maxReadersPerUser, type LocalRuns } from './jobs.js';
import { searchPassages, type RetrievalDependencies } from '../retrieval/service.js';
import { AnswerModelError, GenerationClock, notFoundAnswer, pageOf, type AgentMode, type AnswerModel, type NumberedPassage, type Turn } from './answer-model.js';
import { checkSentences, sourcesOf, supportScoreOf, withoutMarkers, type CheckedSentence } from './citations.js';
import { EventChannel, type AgentEvent, type ReasoningStep } from './events.js';
import { claimHandedOverRuns, releaseRun, runsReleasedChannel, type HandedOverRun, type StoredRunRequest } from './takeover.js';
import type { StoreSignals } from '../../db/database.js';

export const agentLimits = {
  maxMessageCharacters: 50_000,
  maxWorkspaces: 100,
  /** Passages a fast answer reads, and each deep search. */
  fastPassages: 6,
  deepPassagesPerSearch: 4,
  /** Turns of the session read to rewrite a follow-up. */
  historyTurns: 10,
  /** Deep research's budget when the request sets none, and the most a request may set. */
  deep: {
    hops: { default: 4, max: 6 },
    searches: { default: 8, max: 20 },
    seconds: { default: 60, max: 300 },
  },
} as const;

export type DeepLimits = { maxHops?: number | null; maxSearches?: number | null; maxSeconds?: number | null };

export type AgentStreamInput = {
  message: string;
  workspaceIds: readonly string[];
  sessionId?: string | null;
  mode?: AgentMode | null;
  limits?: DeepLimits | null;
  /** A disconnect does not cancel the run: it goes on for the grace period, and the client may resume (docs/agent.md). */
  resumable?: boolean | null;
};

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
 * The runs of this process: their leases are renewed while they run, and runs of processes that
 * stopped are refunded (at start, then whenever their lease has passed).
 */
export class AgentRuns implements LocalRuns {
  readonly #running = new Map<string, Promise<void>>();
  /** The event logs of the runs of this process. */
  readonly #logs = new Map<string, RunEventLog>();
  /** Readers of a job's events on this process, woken when its run writes some. */
  readonly #listeners = new Map<string, Set<() => void>>();
  /** Readers following jobs' events (jobs.ts): a shutdown ends them before the store closes. */
  readonly #followers = new Set<Promise<void>>();
  #timer: NodeJS.Timeout | undefined;
  readonly #stopped = new AbortController();
  /** Aborts when the process stops: its runs end and are refunded. */
  readonly signal = this.#stopped.signal;

  /** Runs resumable runs draining processes handed over (set once the agent's dependencies exist; see takeOverRun). */
  #takeOver: ((runs: HandedOverRun[]) => void) | undefined;
  #ticking = false;
  /** Whether other processes share the store, and so may take over this one's resumable runs when it drains. */
  handsOver = false;

  constructor(
    private readonly prisma: PrismaClient,
    readonly leaseMs: number,
    private readonly log: Logger,
    private readonly signals?: StoreSignals,
  ) {
    // Every run and every reader of a job's events listens for the shutdown: many at once is normal.
    setMaxListeners(0, this.signal);
  }

  /** `exclusive`: no other process uses the store (the embedded one), so every running job at start is abandoned. */
  async start(options: { exclusive: boolean }) {
    if (options.exclusive) {
      const refunded = await refundAbandonedRuns(this.prisma, { all: true });
      if (refunded > 0) this.log.info(`agent: refunded ${refunded} runs left unfinished by a process that stopped`);
    } else {
      // Runs handed over by a draining process are taken, and those of processes that stopped refunded, as at every turn.
      await this.#tick();
    }
    this.handsOver = !options.exclusive && this.signals !== undefined;
    // A draining process gave runs up: the first to look takes them, without waiting for its turn.
    await this.signals?.listen(runsReleasedChannel, () => void this.#tick());
    this.#timer = setInterval(() => void this.#tick(), Math.max(50, this.leaseMs / 3));
    this.#timer.unref();
  }

  /** Runs, with `takeOver`, the resumable runs that draining processes hand over. */
  takeOverWith(takeOver: (runs: HandedOverRun[]) => void) {
    this.#takeOver = takeOver;
  }

  /** This process gave a run's lease up (a drain): the others are told to take it now. */
  released() {
    this.signals?.send(runsReleasedChannel, 'released');
  }

  async #tick() {
    if (this.#ticking) return;
    this.#ticking = true;
    try {
      const running = [...this.#running.keys()];
      await renewAgentLeases(this.prisma, running, this.leaseMs);
      if (this.#takeOver && !this.#stopped.signal.aborted) {
        const claimed = await claimHandedOverRuns(this.prisma, { running, leaseMs: this.leaseMs });
        if (claimed.length > 0) {
          this.log.info(`agent: took over ${claimed.length} resumable runs handed over by a draining process`);
          this.#takeOver(claimed);
        }
      }
      const refunded = await refundAbandonedRuns(this.prisma, { running: [...this.#running.keys()] });
      if (refunded > 0) this.log.info(`agent: refunded ${refunded} runs whose process stopped`);
    } catch (error) {
      if (!this.#stopped.signal.aborted) this.log.error('agent: renewing leases failed', error);
    } finally {
      this.#ticking = false;
    }
  }

  track(jobId: string, run: Promise<void>, log: RunEventLog) {
    this.#running.set(jobId, run);
    this.#logs.set(jobId, log);
    const forget = () => {
      this.#running.delete(jobId);
      this.#logs.delete(jobId);
    };
    // Not `finally`: its promise would reject with the run, unhandled, and end the process.
    run.then(forget, (error: unknown) => {
      forget();
      this.log.error(`agent: run ${jobId} ended with an error`, error);
    });
  }

  localLog(jobId: string) {
    return this.#logs.get(jobId);
  }

  listen(jobId: string, listener: () => void) {
    let listeners = this.#listeners.get(jobId);
    if (!listeners) this.#listeners.set(jobId, (listeners = new Set()));
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this.#listeners.get(jobId) === listeners) this.#listeners.delete(jobId);
    };
  }

  /** The job's run wrote events to its log (or ended): its readers here look at once. */
  notify(jobId: string) {
    for (const listener of this.#listeners.get(jobId) ?? []) listener();
  }

  follow(work: Promise<void>) {
    this.#followers.add(work);
    const forget = () => this.#followers.delete(work);
    work.then(forget, (error: unknown) => {
      forget();
      this.log.error('agent: following a run ended with an error', error);
    });
  }

  readonly #readers = new Map<string, number>();

  enterReader(userId: string) {
    const reading = this.#readers.get(userId) ?? 0;
    if (reading >= maxReadersPerUser) return false;
    this.#readers.set(userId, reading + 1);
    return true;
  }

  leaveReader(userId: string) {
    const reading = (this.#readers.get(userId) ?? 1) - 1;
    if (reading > 0) this.#readers.set(userId, reading);
    else this.#readers.delete(userId);
  }

  get size() {
    return this.#running.size;
  }

  /** Cancels the runs still going and waits for their refunds; ends the readers of jobs' events. */
  async stop() {
    this.#stopped.abort(new AppError('service_unavailable', 'the server is shutting down; the run was stopped and nothing was charged'));
    clearInterval(this.#timer);
    await Promise.allSettled([...this.#running.values(), ...this.#followers]);
  }
}

function checkInput(input: AgentStreamInput) {
  if (typeof input.message !== 'string') throw badRequest('message', 'is required');
  const problem = textProblem(input.message);
  if (problem) throw badRequest('message', problem);
  if (input.message.trim().length === 0) throw badRequest('message', 'must not be empty');
  if (!hasVisibleCharacter(input.message)) throw badRequest('message', 'must hold a question (it has only invisible characters)');
  if (characterCount(input.message) > agentLimits.maxMessageCharacters) {
    throw badRequest('message', `must be at most ${agentLimits.maxMessageCharacters} characters`);
  }
  if (!Array.isArray(input.workspaceIds) || input.workspaceIds.length === 0) throw badRequest('workspaceIds', 'must name at least one workspace');
  if (new Set(input.workspaceIds.map((id) => String(id).toLowerCase())).size > agentLimits.maxWorkspaces) {
    throw badRequest('workspaceIds', `must name at most ${agentLimits.maxWorkspaces} workspaces`);
  }
  input.workspaceIds.forEach((id, position) => {
    if (typeof id !== 'string' || !isUuid(id)) throw badRequest(`workspaceIds[${position}]`, 'must be a workspace id (a UUID)');
  });
  if (input.sessionId === '') throw badRequest('sessionId', 'must not be empty (leave it out to start a new session)');
  const mode = input.mode ?? 'fast';
  if (mode !== 'fast' && mode !== 'deep') throw badRequest('mode', 'must be fast or deep');
  const limits = input.limits ?? {};
  const bounded = (name: keyof DeepLimits, budget: { default: number; max: number }) => {
    const value = limits[name];
    if (value === undefined || value === null) return budget.default;
    if (!Number.isInteger(value) || value < 1 || value > budget.max) throw badRequest(`limits.${name}`, `must be an integer from 1 to ${budget.max}`);
    return value;
  };
  const budget = {
    hops: bounded('maxHops', agentLimits.deep.hops),
    searches: bounded('maxSearches', agentLimits.deep.searches),
    seconds: bounded('maxSeconds', agentLimits.deep.seconds),
  };
  return { message: input.message.trim(), workspaceIds: [...new Set(input.workspaceIds.map((id) => id.toLowerCase()))], mode, budget };
}

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

type RunSpec = ReturnType<typeof checkInput> & { jobId: string; userId: string; sessionId: string | null; history: Turn[]; resumable: boolean };

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
  return followAgentJob(dependencies, viewer, { jobId: position.jobId, after: position.seq, field: 'Last-Event-ID' }, signal);
}

/** A write of events that failed is tried again after this, then after twice as long, up to 2 s. */
const eventRetryMs = 100;

/** This process is stopping and other processes share the store: the resumable run is given to them, not ended. */
class RunHandedOver extends Error {
  override name = 'RunHandedOver';
  constructor() {
    super('the server is shutting down; another server takes the run over');
  }
}

/** Why a run stopped before its end without failing: its client left, or nobody came back for it. */
class RunCancelled extends Error {
  override name = 'RunCancelled';
  constructor(
    readonly kind: 'client' | 'abandoned',
    graceMs = 0,
  ) {
    super(
      kind === 'client'
        ? 'the client closed the stream; the run was cancelled and nothing was charged'
        : `nobody resumed the stream within ${graceMs / 1000} s; the run was cancelled and nothing was charged`,
    );
  }

  /** The job's `error`. */
  get jobError() {
    return this.kind === 'client' ? 'cancelled by the client' : 'nobody resumed the stream';
  }
}

/**
 * Who follows a resumable run: its first client while that stream is open, then readers of its
 * events on any server (they record themselves in agent_jobs: markFollowed). Once the first client
 * has left, a run nobody has followed for the grace period is cancelled and refunded, unless a
 * client has taken any of its answer (its first token, or anything after it) by then: an answer
 * read in any part, by stream or as JSON, is taken, and the run is then finished and charged
 * whether or not anyone reads the rest.
 */
class Following {
  #attached = true;
  /** The last event the first client had taken when it left. */
  #takenWhenLeft = 0;
  /** The number of the answer's first event (its first token), once the run has sent it. */
  #answerSeq: number | undefined;
  #watch: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(
    private readonly dependencies: AgentDependencies,
    private readonly jobId: string,
    private readonly cancel: AbortController,
  ) {}

  answerStartsAt(seq: number) {
    this.#answerSeq ??= seq;
  }

  /** The first client left: its stream ends, and the grace period starts now. */
  detach(channel: EventChannel<SequencedEvent>) {
    if (!this.#attached) return;
    this.#attached = false;
    // The request may be seen gone before its stream is: what the stream's writer reads after now
    // reaches nobody.
    this.#takenWhenLeft = channel.taken;
    channel.end();
    const { prisma, log, resumeGraceMs } = this.dependencies;
    void markFollowed(prisma, this.jobId)
      .catch((error: unknown) => log.error(`agent run ${this.jobId}: recording its client's departure failed`, error))
      .finally(() => {
        if (this.#stopped) return;
        this.#watch = setInterval(() => void this.#check(), Math.max(100, Math.min(resumeGraceMs / 4, 2_000)));
        this.#watch.unref();
      });
  }

  /** Whether a client has taken events up to `seq`: the first one when it left, or a reader that recorded `deliveredSeq`. */
  #taken(seq: number | undefined, deliveredSeq: number) {
    return seq !== undefined && (this.#takenWhenLeft >= seq || deliveredSeq >= seq);
  }

  async #check() {
    const { prisma, log, resumeGraceMs } = this.dependencies;
    try {
      const [job] = await prisma.$queryRaw<{ followed: boolean | null; delivered_seq: number }[]>`
        SELECT followed_at > clock_timestamp() - ${resumeGraceMs} * interval '1 millisecond' AS followed, delivered_seq
          FROM agent_jobs WHERE id = ${this.jobId}::uuid AND status = 'running'`;
      if (!job || job.followed || this.#taken(this.#answerSeq, job.delivered_seq)) return;
      this.cancel.abort(new RunCancelled('abandoned', resumeGraceMs));
    } catch (error) {
      if (!this.#stopped) log.error(`agent run ${this.jobId}: checking for its readers failed`, error);
    }
  }

  /**
   * Settles once the run may be charged: a client has taken the events up to `seq` (the first
   * client while its stream is open, or a reader on any server), or any part of the answer before
   * it left. Throws when the run is stopped meanwhile (nobody came back within the grace period).
   */
  async delivered(channel: EventChannel<SequencedEvent>, seq: number, signal: AbortSignal) {
    if (this.#attached) {
      await Promise.race([channel.drained(), aborted(signal)]);
      signal.throwIfAborted();
      // A turn of the event loop: a connection closed meanwhile is noticed.
      await nextTurn();
      if (this.#attached) return;
    }
    // Readers on other servers record what they took in the store; its answer is asked for at a
    // slowing pace (a run may wait the whole grace period), with one timer and no listener left behind.
    for (let pauseMs = 50; ; pauseMs = Math.min(pauseMs * 2, 1_000)) {
      if (this.#taken(seq, 0) || this.#taken(this.#answerSeq, 0)) return;
      const [job] = await this.dependencies.prisma.$queryRaw<{ delivered_seq: number }[]>`SELECT delivered_seq FROM agent_jobs WHERE id = ${this.jobId}::uuid`;
      const deliveredSeq = job?.delivered_seq ?? 0;
      if (this.#taken(seq, deliveredSeq) || this.#taken(this.#answerSeq, deliveredSeq)) return;
      await sleep(pauseMs, undefined, { signal }).catch(() => undefined);
      signal.throwIfAborted();
    }
  }

  stop() {
    this.#stopped = true;
    clearInterval(this.#watch);
  }
}

type Run = RunSpec & {
  channel: EventChannel<SequencedEvent>;
  log: RunEventLog;
  /** Set for a resumable run. */
  following: Following | undefined;
  /** Sends an event: numbered, to the stream and to the log. Returns its number. */
  emit(event: AgentEvent): number;
  /** Sends a token event (the first one is timed). */
  token(content: string): void;
};

async function executeRun(dependencies: AgentDependencies, run: Run, cancel: AbortController) {
  const { prisma, log } = dependencies;
  const timeout = setTimeout(() => cancel.abort(new AppError('service_unavailable', `the run did not finish within ${dependencies.timeoutMs / 1000} s`)), dependencies.timeoutMs);
  const signal = cancel.signal;
  try {
    const clock = new GenerationClock();
    const query = await dependencies.answerModel.rewrite(run.message, run.history, signal, clock);
    const { passages, answer, checked } =
      run.mode === 'deep' ? await deepResearch(dependencies, run, query, signal, clock) : await fastAnswer(dependencies, run, query, signal, clock);
    const sources = sourcesOf(checked, passages);
    // "Not found" makes no claim: there is nothing to support.
    const supportScore = answer.trim() === notFoundAnswer ? null : supportScoreOf(checked);
    signal.throwIfAborted();
    const sourcesSeq = run.emit({ type: 'sources', sources });
    // Sent once written: what the client has taken is counted from there.
    await run.log.flush();
    // The answer is charged only once the client has taken it: a client that has gone by then
    // is charged nothing (the check is repeated inside the transaction, before the charge). A
    // resumable run's client may be one that came back, on any server.
    if (run.following) await run.following.delivered(run.channel, sourcesSeq, signal);
    else await Promise.race([run.channel.drained(), aborted(signal)]);
    // A turn of the event loop: a connection closed meanwhile is noticed before the charge.
    await nextTurn();
    signal.throwIfAborted();
    // The log holds every event before `done` when `done` is written, with the charge.
    await run.log.flush();
    const doneSeq = run.log.terminalSeq();
    const stored = await prisma.$transaction(async (tx) => {
      if (run.sessionId && (await tx.chatSession.count({ where: { id: run.sessionId, userId: run.userId } })) === 0) {
        throw new AppError('not_found', 'the chat session was deleted during the run');
      }
      const sessionId =
        run.sessionId ??
        (await tx.chatSession.create({ data: { userId: run.userId, title: titleOf(run.message), workspaceIds: run.workspaceIds }, select: { id: true } })).id;
      const asked = await tx.chatMessage.create({
        data: { sessionId, role: 'user', content: run.message, rewrittenQuery: query },
        select: { createdAt: true },
      });
      // A millisecond after the question: the store's clock may give both the same stamp, and
      // the history must never show the answer first.
      const answered = await tx.chatMessage.create({
        data: { sessionId, role: 'assistant', content: answer, sources: restSources(sources), jobId: run.jobId, supportScore, createdAt: new Date(asked.createdAt.getTime() + 1) },
        select: { createdAt: true },
      });
      const updated = await tx.chatSession.updateMany({ where: { id: sessionId, userId: run.userId }, data: { updatedAt: answered.createdAt > asked.createdAt ? answered.createdAt : asked.createdAt } });
      if (updated.count === 0) throw new AppError('not_found', 'the chat session was deleted during the run');
      // The session names every workspace its answers drew on: a key restricted to workspaces sees
      // it only when all of them are its own (src/auth/policy.ts).
      if (run.sessionId) await tx.$executeRaw(namingWorkspaces(sessionId, run.workspaceIds));
      const creditsUsed = await chargeAgentRun(tx, run.jobId, { sessionId, supportScore });
      const done: AgentEvent = { type: 'done', jobId: run.jobId, sessionId, creditsUsed, supportScore, rewrittenQuery: query };
      // In the charge's transaction: `done` is in the log exactly when the answer is charged and stored.
      await tx.agentEvent.create({ data: { jobId: run.jobId, seq: doneSeq, data: loggedForm(done) } });
      // Last before the commit: a client gone by now is charged nothing, and nothing is stored.
      signal.throwIfAborted();
      return { sessionId, creditsUsed, done };
    });
    run.log.terminalWritten({ seq: doneSeq, data: loggedForm(stored.done) });
    dependencies.metrics?.creditsCharged.inc({ mode: run.mode }, stored.creditsUsed);
    dependencies.metrics?.agentRuns.inc({ mode: run.mode, outcome: 'done' });
    run.channel.push({ ...stored.done, jobId: run.jobId, seq: doneSeq });
  } catch (caught) {
    const reason = signal.aborted ? signal.reason : caught;
    if (reason instanceof RunHandedOver) {
      // Everything made so far is in the log; the lease goes at once, and the others are told.
      await run.log.flush().catch((error: unknown) => log.error(`agent run ${run.jobId}: writing its events failed`, error));
      await releaseRun(prisma, run.jobId).catch((error: unknown) => log.error(`agent run ${run.jobId}: giving its lease up failed; it is taken over when the lease passes`, error));
      dependencies.runs.released();
      dependencies.metrics?.agentRuns.inc({ mode: run.mode, outcome: 'handed_over' });
      return;
    }
    const cancelled = reason instanceof RunCancelled;
    const message = cancelled ? reason.message : publicMessage(reason);
    const expected = reason instanceof AppError || reason instanceof AnswerModelError || reason instanceof RunDiverged;
    if (!cancelled && !expected) log.error(`agent run ${run.jobId} failed`, reason);
    const code = cancelled ? 'cancelled' : reason instanceof AppError ? reason.code : expected ? 'service_unavailable' : 'internal_error';
    const event: AgentEvent = { type: 'error', code, message };
    // Every event before the error is in the log first; the error itself is written with the refund.
    await run.log.flush().catch((error: unknown) => log.error(`agent run ${run.jobId}: writing its events failed`, error));
    const seq = run.log.terminalSeq();
    /** What the client is sent last: this error as logged, or the end another process logged. */
    let terminal: SequencedEvent | undefined = { ...event, jobId: run.jobId, seq };
    try {
      // False: the job had been ended already (another process's sweep), which logged its own end.
      if (await refundAgentRun(prisma, run.jobId, cancelled ? 'cancelled' : 'failed', cancelled ? reason.jobError : message, { seq, data: loggedForm(event) })) {
        run.log.terminalWritten({ seq, data: loggedForm(event) });
      } else {
        const last = await prisma.agentEvent.findFirst({ where: { jobId: run.jobId }, orderBy: { seq: 'desc' }, select: { seq: true, data: true } });
        const ended = last && eventOfLogged(last.data);
        terminal = ended && isTerminal(ended) ? { ...ended, jobId: run.jobId, seq: last.seq } : undefined;
      }
    } catch (error) {
      // The store cannot be reached. What was not written is dropped (no client was sent it), so
      // the log ends at the last event written, where the lease sweep will end the run with its
      // own `error`: the client is told that event now, under that number.
      log.error(`agent run ${run.jobId}: the refund failed; the lease sweep will make it`, error);
      run.log.discard();
      terminal = { ...abandonedRunError, jobId: run.jobId, seq: run.log.lastWrittenSeq + 1 };
    }
    dependencies.runs.notify(run.jobId);
    dependencies.metrics?.agentRuns.inc({ mode: run.mode, outcome: cancelled ? 'cancelled' : 'failed' });
    if (!cancelled && terminal) run.channel.push(terminal);
  } finally {
    clearTimeout(timeout);
  }
}

/** Adds the workspaces a run searched to its session's `workspace_ids`, after those it names already. */
const namingWorkspaces = (sessionId: string, workspaceIds: readonly string[]) => Prisma.sql`
  UPDATE chat_sessions
     SET workspace_ids = workspace_ids || ARRAY(SELECT w FROM unnest(${[...workspaceIds]}::uuid[]) WITH ORDINALITY AS run(w, position)
                                                 WHERE w <> ALL(workspace_ids) ORDER BY position)
   WHERE id = ${sessionId}::uuid AND NOT (workspace_ids @> ${[...workspaceIds]}::uuid[])`;

const aborted = (signal: AbortSignal) => new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));

function publicMessage(error: unknown): string {
  if (error instanceof AppError) return error.message;
  if (error instanceof AnswerModelError) return `the answer model failed: ${error.message}`;
  if (error instanceof RunDiverged) return error.message;
  return 'the run failed on an internal error';
}

const titleOf = (message: string) => {
  const line = message.split('\n')[0]!.trim();
  return line.length > 80 ? `${line.slice(0, 79)}…` : line;
};

const numbered = (passages: Awaited<ReturnType<typeof searchPassages>>, first: number, hop: number): NumberedPassage[] =>
  passages.map((passage, index) => ({ ...passage, number: first + index, page: pageOf(passage.metadata), hop }));

/** Fast mode: one search, and the answer streamed as it is written. */
async function fastAnswer(dependencies: AgentDependencies, run: Run, query: string, signal: AbortSignal, clock: GenerationClock) {
  const found = await searchPassages(dependencies.retrieval, { query, workspaceIds: run.workspaceIds, topK: agentLimits.fastPassages }, signal);
  const passages = numbered(found, 1, 0);
  let answer = '';
  for await (const token of dependencies.answerModel.answer({ question: query, passages, mode: 'fast', signal, clock })) {
    signal.throwIfAborted();
    if (!token) continue;
    answer += token;
    run.token(token);
  }
  if (answer.trim().length === 0) throw new AnswerModelError('it returned an empty answer');
  return { passages, answer, checked: answer.trim() === notFoundAnswer ? [] : checkSentences(answer, passages) };
}

/**
 * Deep mode: the question is decomposed, searched, and refined from what was found (the next
 * query follows what the evidence names), until the evidence covers the question or the budget
 * ends. The answer is written whole, each sentence checked against the passage it cites, and
 * only the supported ones are streamed.
 */
async function deepResearch(dependencies: AgentDependencies, run: Run, query: string, signal: AbortSignal, clock: GenerationClock) {
  const { answerModel } = dependencies;
  const started = performance.now();
  const budget = run.budget;
  let stepIndex = 0;
  const step = (fields: Omit<ReasoningStep, 'index'>) => {
    stepIndex += 1;
    run.emit({ type: 'reasoning', steps: [{ index: stepIndex, ...fields }] });
  };
  const evidence: NumberedPassage[] = [];
  const seen = new Set<string>();
  const asked: string[] = [];
  let searches = 0;
  const outOfTime = () => performance.now() - started > budget.seconds * 1000;

  const search = async (queries: string[], hop: number) => {
    const found: NumberedPassage[] = [];
    for (const text of queries) {
      if (searches >= budget.searches || outOfTime()) break;
      searches += 1;
      asked.push(text);
      const hits = await searchPassages(dependencies.retrieval, { query: text, workspaceIds: run.workspaceIds, topK: agentLimits.deepPassagesPerSearch, exclude: seen }, signal);
      for (const hit of hits) {
        if (seen.has(hit.chunkId)) continue;
        seen.add(hit.chunkId);
        const passage = { ...hit, number: evidence.length + 1, page: pageOf(hit.metadata), hop };
        evidence.push(passage);
        found.push(passage);
      }
    }
    return found;
  };
  const described = (passages: readonly NumberedPassage[]) =>
    passages.map((passage) => ({ documentId: passage.documentId, filename: passage.filename, chunkIndex: passage.chunkIndex, page: passage.page, score: passage.score }));

  const subQuestions = (await answerModel.decompose(query, signal, clock)).slice(0, budget.searches);
  step({
    kind: 'decompose',
    queries: subQuestions,
    found: [],
    decision: 'continue',
    reason: subQuestions.length > 1 ? `the question compares or joins ${subQuestions.length - 1} things; each is searched` : 'the question is searched as it is',
  });
  let found = await search(subQuestions, 1);
  let lastQueries = subQuestions;
  for (let hop = 1; ; hop += 1) {
    const exhausted = hop >= budget.hops ? `the budget of ${budget.hops} hops is spent` : searches >= budget.searches ? `the budget of ${budget.searches} searches is spent` : outOfTime() ? `the budget of ${budget.seconds} s is spent` : null;
    const next =
      exhausted || evidence.length === 0 || (hop > 1 && found.length === 0)
        ? null
        : await answerModel.nextQueries({ question: query, evidence: found.length > 0 ? found : evidence, asked, signal, clock });
    const stop =
      exhausted ??
      (evidence.length === 0
        ? 'nothing was found to follow'
        : hop > 1 && found.length === 0
          ? 'the refined searches found nothing new'
          : next!.queries.length === 0
            ? next!.reason
            : null);
    step({
      kind: hop === 1 ? 'search' : 'refine',
      queries: lastQueries,
      found: described(found),
      decision: stop ? 'stop' : 'continue',
      reason: stop ?? next!.reason,
    });
    if (stop) break;
    lastQueries = next!.queries;
    found = await search(lastQueries, hop + 1);
  }

  let answer = '';
  for await (const token of answerModel.answer({ question: query, passages: evidence, mode: 'deep', signal, clock })) answer += token;
  if (answer.trim().length === 0) throw new AnswerModelError('it returned an empty answer');
  const checked = answer.trim() === notFoundAnswer ? [] : checkSentences(answer, evidence);
  const kept = checked.filter((sentence) => sentence.supported);
  const dropped = checked.length - kept.length;
  const verified = dropped === 0 ? answer : kept.length > 0 ? kept.map((sentence) => sentence.text).join(' ') : notFoundAnswer;
  step({
    kind: 'verify',
    queries: [],
    found: [],
    decision: 'stop',
    reason:
      checked.length === 0
        ? 'the answer makes no claim to check'
        : `${kept.length} of ${checked.length} sentences are supported by the passages they cite${dropped > 0 ? `; ${dropped} unsupported dropped: ${checked.filter((sentence) => !sentence.supported).map((sentence) => JSON.stringify(withoutMarkers(sentence.text))).join(', ')}` : ''}`,
  });
  for (const [token] of verified.matchAll(/\s*\S+/g)) run.token(token);
  const final: CheckedSentence[] = dropped === 0 ? checked : kept;
  return { passages: evidence, answer: verified, checked: final };
}
