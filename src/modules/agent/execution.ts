import { setImmediate as nextTurn } from 'node:timers/promises';
import { AppError } from '../../errors.js';
import { RunDiverged, type RunEventLog, type SequencedEvent } from './event-log.js';
import { loggedForm } from './logged-form.js';
import { AnswerModelError, GenerationClock, notFoundAnswer, type Turn } from './answer-model.js';
import { sourcesOf, supportScoreOf } from './citations.js';
import type { AgentEvent, EventChannel } from './events.js';
import type { Following } from './following.js';
import type { RunRequest } from './input.js';
import type { AgentDependencies } from './service.js';
import { chargeAndStore, refundFailedRun } from './settlement.js';
import { deepResearch, fastAnswer } from './strategies.js';
import { releaseRun } from './takeover.js';

/** What a run is: its checked request, and who asked. */
export type RunSpec = RunRequest & { jobId: string; userId: string; sessionId: string | null; history: Turn[]; resumable: boolean };


/** This process is stopping and other processes share the store: the resumable run is given to them, not ended. */
export class RunHandedOver extends Error {
  override name = 'RunHandedOver';
  constructor() {
    super('the server is shutting down; another server takes the run over');
  }
}

/** Why a run stopped before its end without failing: its client left, or nobody came back for it. */
export class RunCancelled extends Error {
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

export type Run = RunSpec & {
  channel: EventChannel<SequencedEvent>;
  log: RunEventLog;
  /** Set for a resumable run. */
  following: Following | undefined;
  /** Sends an event: numbered, to the stream and to the log. Returns its number. */
  emit(event: AgentEvent): number;
  /** Sends a token event (the first one is timed). */
  token(content: string): void;
};

export async function executeRun(dependencies: AgentDependencies, run: Run, cancel: AbortController) {
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
    const stored = await chargeAndStore(dependencies, run, { query, answer, sources, supportScore, doneSeq }, signal);
    run.log.terminalWritten({ seq: doneSeq, data: loggedForm(stored.done) });
    dependencies.metrics?.creditsCharged.inc({ mode: run.mode }, stored.creditsUsed);
    dependencies.metrics?.agentRuns.inc({ mode: run.mode, outcome: 'done' });
    run.channel.push({ ...stored.done, jobId: run.jobId, seq: doneSeq });
  } catch (caught) {
    const reason = signal.aborted ? signal.reason : caught;
    if (reason instanceof RunHandedOver) {
      // Everything made so far is in the log; the lease goes at once, and the others are told.
      await run.log.flush().catch((error: unknown) => log.error(`agent run ${run.jobId}: writing its events failed`, error));
      await releaseRun(prisma, run.jobId, run.following?.takenByFirstClient(run.channel) ?? 0).catch((error: unknown) => log.error(`agent run ${run.jobId}: giving its lease up failed; it is taken over when the lease passes`, error));
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
    const terminal = await refundFailedRun(dependencies, run, event, seq, cancelled ? 'cancelled' : 'failed', cancelled ? reason.jobError : message);
    dependencies.runs.notify(run.jobId);
    dependencies.metrics?.agentRuns.inc({ mode: run.mode, outcome: cancelled ? 'cancelled' : 'failed' });
    if (!cancelled && terminal) run.channel.push(terminal);
  } finally {
    clearTimeout(timeout);
  }
}

export const aborted = (signal: AbortSignal) => new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));

function publicMessage(error: unknown): string {
  if (error instanceof AppError) return error.message;
  if (error instanceof AnswerModelError) return `the answer model failed: ${error.message}`;
  if (error instanceof RunDiverged) return error.message;
  return 'the run failed on an internal error';
}
