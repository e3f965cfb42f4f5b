import { AppError } from '../../errors.js';
import { Prisma } from '../../generated/prisma/client.js';
import { abandonedRunError, chargeAgentRun, refundAgentRun } from '../credits/service.js';
import { isTerminal, type SequencedEvent } from './event-log.js';
import { eventOfLogged, loggedForm, restSources } from './logged-form.js';
import type { Source } from './citations.js';
import type { AgentEvent } from './events.js';
import type { Run } from './execution.js';
import type { AgentDependencies } from './service.js';

/**
 * A run's answer settled: in one transaction, the turn stored in its chat session (made for a
 * new conversation), the reservation charged, and `done` logged under `doneSeq`. Nothing is kept
 * when `signal` is aborted before the commit: a client gone by then is charged nothing.
 */
export async function chargeAndStore(
  dependencies: AgentDependencies,
  run: Run,
  answered: { query: string; answer: string; sources: Source[]; supportScore: number | null; doneSeq: number },
  signal: AbortSignal,
) {
  const { prisma } = dependencies;
  const { query, answer, sources, supportScore, doneSeq } = answered;
  return prisma.$transaction(async (tx) => {
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
}

/**
 * A run that failed or was cancelled: refunded, with its `error` logged under `seq`. Returns what
 * its client is sent last: that error, or the end another process logged already, or (when the
 * store cannot be reached) the lease sweep's error under the number the sweep will use.
 */
export async function refundFailedRun(dependencies: AgentDependencies, run: Run, event: AgentEvent, seq: number, outcome: 'cancelled' | 'failed', jobError: string): Promise<SequencedEvent | undefined> {
  const { prisma, log } = dependencies;
  /** What the client is sent last: this error as logged, or the end another process logged. */
  let terminal: SequencedEvent | undefined = { ...event, jobId: run.jobId, seq };
  try {
    // False: the job had been ended already (another process's sweep), which logged its own end.
    if (await refundAgentRun(prisma, run.jobId, outcome, jobError, { seq, data: loggedForm(event) })) {
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
  return terminal;
}

/** Adds the workspaces a run searched to its session's `workspace_ids`, after those it names already. */
const namingWorkspaces = (sessionId: string, workspaceIds: readonly string[]) => Prisma.sql`
  UPDATE chat_sessions
     SET workspace_ids = workspace_ids || ARRAY(SELECT w FROM unnest(${[...workspaceIds]}::uuid[]) WITH ORDINALITY AS run(w, position)
                                                 WHERE w <> ALL(workspace_ids) ORDER BY position)
   WHERE id = ${sessionId}::uuid AND NOT (workspace_ids @> ${[...workspaceIds]}::uuid[])`;

const titleOf = (message: string) => {
  const line = message.split('\n')[0]!.trim();
  return line.length > 80 ? `${line.slice(0, 79)}…` : line;
};