import type { Prisma } from '../../generated/prisma/client.js';
import type { Source } from './citations.js';
import type { AgentEvent, ReasoningStep } from './events.js';

const restSteps = (steps: ReasoningStep[]) =>
  steps.map((step) => ({
    index: step.index,
    kind: step.kind,
    queries: step.queries,
    found: step.found.map((found) => ({ document_id: found.documentId, filename: found.filename, chunk_index: found.chunkIndex, page: found.page, score: found.score })),
    decision: step.decision,
    reason: step.reason,
  }));

/** Sources in their REST names: as the stream sends them, the log keeps them, and the stored answer holds them. */
export const restSources = (sources: Source[]) =>
  sources.map((source) => ({
    doc_id: source.documentId,
    filename: source.filename,
    pages: source.pages,
    passages: source.passages.map((passage) => ({
      citation: passage.citation,
      chunk_index: passage.chunkIndex,
      page: passage.page,
      cells: passage.cells,
      quote: passage.quote,
      start: passage.start,
      end: passage.end,
    })),
  }));

/**
 * An event as the REST stream's `data:` line shows it (the selection of `RestAgentStream` in
 * src/rest/routes/agent.ts, field for field and in its order); `eventOfLogged` is its inverse.
 */
export function loggedForm(event: AgentEvent): Prisma.InputJsonObject {
  switch (event.type) {
    case 'job_started':
      return { type: event.type, jobId: event.jobId };
    case 'reasoning':
      return { type: event.type, steps: restSteps(event.steps) };
    case 'token':
      return { type: event.type, content: event.content };
    case 'sources':
      return { type: event.type, sources: restSources(event.sources) };
    case 'done':
      return {
        type: event.type,
        jobId: event.jobId,
        sessionId: event.sessionId,
        creditsUsed: event.creditsUsed,
        support_score: event.supportScore,
        rewritten_query: event.rewrittenQuery,
      };
    case 'error':
      return { type: event.type, code: event.code, message: event.message };
  }
}

type Logged = Record<string, any>;

/** The event a logged `data` holds (see loggedForm). */
export function eventOfLogged(data: unknown): AgentEvent {
  const logged = data as Logged;
  switch (logged.type) {
    case 'job_started':
      return { type: 'job_started', jobId: logged.jobId };
    case 'reasoning':
      return {
        type: 'reasoning',
        steps: (logged.steps as Logged[]).map((step) => ({
          index: step.index,
          kind: step.kind,
          queries: step.queries,
          found: (step.found as Logged[]).map((found) => ({
            documentId: found.document_id,
            filename: found.filename,
            chunkIndex: found.chunk_index,
            page: found.page,
            score: found.score,
          })),
          decision: step.decision,
          reason: step.reason,
        })),
      };
    case 'token':
      return { type: 'token', content: logged.content };
    case 'sources':
      return {
        type: 'sources',
        sources: (logged.sources as Logged[]).map((source) => ({
          documentId: source.doc_id,
          filename: source.filename,
          pages: source.pages,
          passages: (source.passages as Logged[]).map((passage) => ({
            citation: passage.citation,
            chunkIndex: passage.chunk_index,
            page: passage.page,
            cells: passage.cells ?? null,
            quote: passage.quote,
            start: passage.start,
            end: passage.end,
          })),
        })),
      };
    case 'done':
      return {
        type: 'done',
        jobId: logged.jobId,
        sessionId: logged.sessionId,
        creditsUsed: logged.creditsUsed,
        supportScore: logged.support_score,
        rewrittenQuery: logged.rewritten_query,
      };
    case 'error':
      return { type: 'error', code: logged.code, message: logged.message };
    default:
      throw new Error(`agent_events holds an event of unknown type ${JSON.stringify(logged.type)}`);
  }
}
