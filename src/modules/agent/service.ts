import { AppError, badRequest } from '../../errors.js';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import { isUuid } from '../../ids.js';
import type { Viewer } from '../../auth/authenticate.js';
import { readSessions, requireSessionId, requireWorkspaces, sessionNotFound } from '../../auth/policy.js';
import type { Logger } from '../../logger.js';
import type { Metrics } from '../../observability/metrics.js';
import { textProblem } from '../../input-limits.js';
import { chargeAgentRun, refundAbandonedRuns, refundAgentRun, renewAgentLeases, reserveAgentRun } from '../credits/service.js';
import { searchPassages, type RetrievalDependencies } from '../retrieval/service.js';
import { AnswerModelError, notFoundAnswer, pageOf, type AgentMode, type AnswerModel, type NumberedPassage, type Turn } from './answer-model.js';
import { checkSentences, sourcesOf, supportScoreOf, withoutMarkers, type CheckedSentence } from './citations.js';
import { EventChannel, type AgentEvent, type ReasoningStep } from './events.js';

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
    hops: { default: 3, max: 6 },
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
  metrics?: Pick<Metrics, 'agentTimeToFirstToken' | 'agentRuns' | 'creditsCharged'>;
};

/**
 * The runs of this process: their leases are renewed while they run, and runs of processes that
 * stopped are refunded (at start, then whenever their lease has passed).
 */
export class AgentRuns {
  readonly #running = new Map<string, Promise<void>>();
  #timer: NodeJS.Timeout | undefined;
  readonly #stopped = new AbortController();
  /** Aborts when the process stops: its runs end and are refunded. */
  readonly signal = this.#stopped.signal;

  constructor(
    private readonly prisma: PrismaClient,
    readonly leaseMs: number,
    private readonly log: Logger,
  ) {}

  /** `exclusive`: no other process uses the store (the embedded one), so every running job at start is abandoned. */
  async start(options: { exclusive: boolean }) {
    const refunded = await refundAbandonedRuns(this.prisma, { all: options.exclusive });
    if (refunded > 0) this.log.info(`agent: refunded ${refunded} runs left unfinished by a process that stopped`);
    this.#timer = setInterval(() => void this.#tick(), Math.max(50, this.leaseMs / 3));
    this.#timer.unref();
  }

  async #tick() {
    try {
      const running = [...this.#running.keys()];
      await renewAgentLeases(this.prisma, running, this.leaseMs);
      const refunded = await refundAbandonedRuns(this.prisma, { running });
      if (refunded > 0) this.log.info(`agent: refunded ${refunded} runs whose process stopped`);
    } catch (error) {
      if (!this.#stopped.signal.aborted) this.log.error('agent: renewing leases failed', error);
    }
  }

  track(jobId: string, run: Promise<void>) {
    this.#running.set(jobId, run);
    void run.finally(() => this.#running.delete(jobId));
  }

  get size() {
    return this.#running.size;
  }

  /** Cancels the runs still going and waits for their refunds. */
  async stop() {
    this.#stopped.abort(new AppError('service_unavailable', 'the server is shutting down; the run was stopped and nothing was charged'));
    clearInterval(this.#timer);
    await Promise.allSettled([...this.#running.values()]);
  }
}

function checkInput(input: AgentStreamInput) {
  if (typeof input.message !== 'string') throw badRequest('message', 'is required');
  const problem = textProblem(input.message);
  if (problem) throw badRequest('message', problem);
  if (input.message.trim().length === 0) throw badRequest('message', 'must not be empty');
  if (!/[\p{L}\p{N}\p{S}]/u.test(input.message)) throw badRequest('message', 'must hold a question (it has no letters, digits or symbols)');
  if (input.message.length > agentLimits.maxMessageCharacters) {
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
): Promise<AsyncIterableIterator<AgentEvent>> {
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
  const { jobId } = await reserveAgentRun(prisma, { userId, mode: request.mode, cost, leaseMs: dependencies.runs.leaseMs });

  const cancel = new AbortController();
  const channel = new EventChannel<AgentEvent>(() => cancel.abort(new RunCancelled()));
  // The client going away cancels the run; the server stopping fails it (the client is told).
  const onRequestAbort = () => cancel.abort(new RunCancelled());
  const onShutdown = () => cancel.abort(dependencies.runs.signal.reason);
  signal.addEventListener('abort', onRequestAbort, { once: true });
  dependencies.runs.signal.addEventListener('abort', onShutdown, { once: true });
  if (signal.aborted) onRequestAbort();
  if (dependencies.runs.signal.aborted) onShutdown();
  channel.push({ type: 'job_started', jobId });
  const started = performance.now();
  let tokens = 0;
  const run = {
    ...request,
    jobId,
    userId,
    sessionId,
    history,
    channel,
    token(content: string) {
      if (tokens++ === 0) dependencies.metrics?.agentTimeToFirstToken.observe({ mode: request.mode }, (performance.now() - started) / 1000);
      channel.push({ type: 'token', content });
    },
  };
  const execution = executeRun(dependencies, run, cancel).finally(() => {
    signal.removeEventListener('abort', onRequestAbort);
    dependencies.runs.signal.removeEventListener('abort', onShutdown);
    channel.end();
  });
  dependencies.runs.track(jobId, execution);
  return channel;
}

class RunCancelled extends Error {
  override name = 'RunCancelled';
  constructor() {
    super('the client closed the stream');
  }
}

type Run = ReturnType<typeof checkInput> & {
  jobId: string;
  userId: string;
  sessionId: string | null;
  history: Turn[];
  channel: EventChannel<AgentEvent>;
  /** Pushes a token event (the first one is timed). */
  token(content: string): void;
};

async function executeRun(dependencies: AgentDependencies, run: Run, cancel: AbortController) {
  const { prisma, log } = dependencies;
  const timeout = setTimeout(() => cancel.abort(new AppError('service_unavailable', `the run did not finish within ${dependencies.timeoutMs / 1000} s`)), dependencies.timeoutMs);
  const signal = cancel.signal;
  try {
    const query = await dependencies.answerModel.rewrite(run.message, run.history, signal);
    const { passages, answer, checked } =
      run.mode === 'deep' ? await deepResearch(dependencies, run, query, signal) : await fastAnswer(dependencies, run, query, signal);
    const sources = sourcesOf(checked, passages);
    // "Not found" makes no claim: there is nothing to support.
    const supportScore = answer.trim() === notFoundAnswer ? null : supportScoreOf(checked);
    signal.throwIfAborted();
    run.channel.push({ type: 'sources', sources });
    // The answer is charged only once the client has taken it: a client that has gone by then
    // is charged nothing (the check is repeated inside the transaction, before the charge).
    await Promise.race([run.channel.drained(), aborted(signal)]);
    // A turn of the event loop: a connection closed meanwhile is noticed before the charge.
    await new Promise((resolve) => setImmediate(resolve));
    signal.throwIfAborted();
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
        data: { sessionId, role: 'assistant', content: answer, sources: sourcesForStorage(sources), jobId: run.jobId, supportScore, createdAt: new Date(asked.createdAt.getTime() + 1) },
        select: { createdAt: true },
      });
      const updated = await tx.chatSession.updateMany({ where: { id: sessionId, userId: run.userId }, data: { updatedAt: answered.createdAt > asked.createdAt ? answered.createdAt : asked.createdAt } });
      if (updated.count === 0) throw new AppError('not_found', 'the chat session was deleted during the run');
      // The session names every workspace its answers drew on: a key restricted to workspaces sees
      // it only when all of them are its own (src/auth/policy.ts).
      if (run.sessionId) await tx.$executeRaw(namingWorkspaces(sessionId, run.workspaceIds));
      const creditsUsed = await chargeAgentRun(tx, run.jobId, { sessionId, supportScore });
      // Last before the commit: a client gone by now is charged nothing, and nothing is stored.
      signal.throwIfAborted();
      return { sessionId, creditsUsed };
    });
    dependencies.metrics?.creditsCharged.inc({ mode: run.mode }, stored.creditsUsed);
    dependencies.metrics?.agentRuns.inc({ mode: run.mode, outcome: 'done' });
    run.channel.push({ type: 'done', jobId: run.jobId, sessionId: stored.sessionId, creditsUsed: stored.creditsUsed, supportScore, rewrittenQuery: query });
  } catch (caught) {
    const reason = signal.aborted ? signal.reason : caught;
    const cancelled = reason instanceof RunCancelled;
    const message = publicMessage(reason);
    if (!cancelled && !(reason instanceof AppError) && !(reason instanceof AnswerModelError)) log.error(`agent run ${run.jobId} failed`, reason);
    try {
      await refundAgentRun(prisma, run.jobId, cancelled ? 'cancelled' : 'failed', cancelled ? 'cancelled by the client' : message);
    } catch (error) {
      log.error(`agent run ${run.jobId}: the refund failed; the lease sweep will make it`, error);
    }
    dependencies.metrics?.agentRuns.inc({ mode: run.mode, outcome: cancelled ? 'cancelled' : 'failed' });
    const code = reason instanceof AppError ? reason.code : reason instanceof AnswerModelError ? 'service_unavailable' : 'internal_error';
    if (!cancelled) run.channel.push({ type: 'error', code, message });
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
  return 'the run failed on an internal error';
}

const titleOf = (message: string) => {
  const line = message.split('\n')[0]!.trim();
  return line.length > 80 ? `${line.slice(0, 79)}…` : line;
};

/** Sources as stored with the answer: the REST names, as GET /v1/chat/sessions/{id} shows them. */
function sourcesForStorage(sources: ReturnType<typeof sourcesOf>) {
  return sources.map((source) => ({
    doc_id: source.documentId,
    filename: source.filename,
    pages: source.pages,
    passages: source.passages.map((passage) => ({
      citation: passage.citation,
      chunk_index: passage.chunkIndex,
      page: passage.page,
      quote: passage.quote,
      start: passage.start,
      end: passage.end,
    })),
  }));
}

const numbered = (passages: Awaited<ReturnType<typeof searchPassages>>, first: number, hop: number): NumberedPassage[] =>
  passages.map((passage, index) => ({ ...passage, number: first + index, page: pageOf(passage.metadata), hop }));

/** Fast mode: one search, and the answer streamed as it is written. */
async function fastAnswer(dependencies: AgentDependencies, run: Run, query: string, signal: AbortSignal) {
  const found = await searchPassages(dependencies.retrieval, { query, workspaceIds: run.workspaceIds, topK: agentLimits.fastPassages }, signal);
  const passages = numbered(found, 1, 0);
  let answer = '';
  for await (const token of dependencies.answerModel.answer({ question: query, passages, mode: 'fast', signal })) {
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
async function deepResearch(dependencies: AgentDependencies, run: Run, query: string, signal: AbortSignal) {
  const { answerModel } = dependencies;
  const started = performance.now();
  const budget = run.budget;
  let stepIndex = 0;
  const step = (fields: Omit<ReasoningStep, 'index'>) => {
    stepIndex += 1;
    run.channel.push({ type: 'reasoning', steps: [{ index: stepIndex, ...fields }] });
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

  const subQuestions = (await answerModel.decompose(query, signal)).slice(0, budget.searches);
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
        : await answerModel.nextQueries({ question: query, evidence: found.length > 0 ? found : evidence, asked, signal });
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
  for await (const token of answerModel.answer({ question: query, passages: evidence, mode: 'deep', signal })) answer += token;
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
