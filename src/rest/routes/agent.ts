// The agent: POST /agent/stream, a run's state and its events resumed.
import type { AgentStreamInput } from '../../generated/graphql/graphql.js';
import { graphql } from '../../generated/graphql/gql.js';
import { afterParameter, eventLimitParameter, includeParameter, lastEventIdHeader, resumePosition } from '../agent-input.js';
import { jsonBody, route, type RestRequest, type Route } from '../route.js';
import * as respond from '../response-kinds.js';

// `event_id` (eventIdAlias, event-stream.ts) is each event's SSE `id:` line (the REST layer takes it out of the `data:` line).
export const RestAgentEvent = graphql(`
  fragment RestAgentEvent on AgentEvent {
    ... on AgentJobStarted { event_id: eventId type jobId }
    ... on AgentReasoning {
      event_id: eventId
      type
      steps {
        index
        kind
        queries
        found { document_id: documentId filename chunk_index: chunkIndex page score }
        decision
        reason
      }
    }
    ... on AgentToken { event_id: eventId type content }
    ... on AgentSources {
      event_id: eventId
      type
      sources {
        doc_id: documentId
        filename
        pages
        passages { citation chunk_index: chunkIndex page cells quote start end }
      }
    }
    ... on AgentDone { event_id: eventId type jobId sessionId creditsUsed support_score: supportScore rewritten_query: rewrittenQuery }
    ... on AgentError { event_id: eventId type code message }
  }
`);

export const RestAgentStream = graphql(`
  subscription RestAgentStream($input: AgentStreamInput!, $lastEventId: String) {
    result: agentStream(input: $input, lastEventId: $lastEventId) { ...RestAgentEvent }
  }
`);

// The same events, field for field, as POST /agent/stream sends them.
export const RestAgentJobEvents = graphql(`
  subscription RestAgentJobEvents($id: ID!, $after: Int) {
    result: agentJobEvents(id: $id, after: $after) { ...RestAgentEvent }
  }
`);

export const RestGetAgentJob = graphql(`
  query RestGetAgentJob($id: ID!, $withEvents: Boolean!, $after: Int, $first: Int) {
    result: agentJob(id: $id) {
      id
      status
      mode
      session_id: sessionId
      resumable
      credits_reserved: creditsReserved
      credits_used: creditsUsed
      error
      created_at: createdAt
      finished_at: finishedAt
      event_count: eventCount
      events(after: $after, first: $first) @include(if: $withEvents) { id seq created_at: createdAt data }
    }
  }
`);

export const agentRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/agent/stream',
    tag: 'Agent',
    summary: 'Asks the agent: searches the workspaces and streams a cited answer as Server-Sent Events.',
    description:
      'Each event is a line `id: <jobId>:<seq>` and a line `data: <JSON>` whose `type` is one of `job_started`, `reasoning` (deep mode), `token`, `sources`, `done`, `error` (the `AgentEvent` schema). Refusals (401, 402, 403, 404, 400) are JSON errors before the stream opens. A `: heartbeat` comment is written after a silence. With `resumable: true` a disconnect does not cancel the run; with `Last-Event-ID` the request resumes that run instead of starting one; an `Idempotency-Key` sent again replays the first run (docs/agent.md).',
    operation: RestAgentStream,
    raises: ['not_found', 'payment_required'],
    // The specification names this body's fields in camelCase (`workspaceIds`, `sessionId`).
    fieldNames: 'camelCase',
    idempotent: true,
    headers: { 'Last-Event-ID': lastEventIdHeader },
    body: jsonBody(
      'AgentStreamInput',
      { message: 'message', workspaceIds: 'workspaceIds[]', sessionId: 'sessionId', mode: 'mode', limits: 'limits', resumable: 'resumable' },
      { ids: ['workspaceIds', 'sessionId'] },
    ),
    variables: ({ body, headers }: RestRequest<Record<string, unknown>, unknown, { 'Last-Event-ID'?: string }>) => ({
      input: body as AgentStreamInput,
      lastEventId: headers['Last-Event-ID'] ?? null,
    }),
    response: respond.stream(),
  }),
  route({
    method: 'GET',
    path: '/v1/agent/jobs/:id',
    tag: 'Agent',
    summary: "An agent run's state and credits; with `include=events`, the events it sent.",
    description:
      '`events` (only with `include=events`) lists the logged events after `after`, at most `limit`, each `{id, seq, created_at, data}` where `data` is the event as the stream sent it.',
    operation: RestGetAgentJob,
    raises: ['not_found'],
    query: {
      include: includeParameter,
      after: afterParameter,
      limit: eventLimitParameter,
    },
    variables: ({ params, query }: RestRequest<{ include?: 'events'; after?: number; limit: number }>) => ({
      id: params.id!,
      withEvents: query.include === 'events',
      after: query.after ?? 0,
      first: query.limit,
    }),
    response: respond.json(200),
  }),
  route({
    method: 'GET',
    path: '/v1/agent/jobs/:id/events',
    tag: 'Agent',
    summary: "Resumes an agent run's stream: the events after `Last-Event-ID` (or `after`), then the rest as they come, as Server-Sent Events.",
    description:
      'The same events as POST /agent/stream sent, with the same `id:` lines, until `done` or `error`; on any server. Reading a resumable run keeps it going (docs/agent.md). When the run has ended and there is nothing after the event named, the answer is `204 No Content`, which stops EventSource from reconnecting.',
    operation: RestAgentJobEvents,
    raises: ['not_found'],
    headers: { 'Last-Event-ID': lastEventIdHeader },
    query: { after: afterParameter },
    variables: ({ params, query, headers }: RestRequest<{ after?: number }, unknown, { 'Last-Event-ID'?: string }>) => ({
      id: params.id!,
      after: resumePosition(params.id!, headers['Last-Event-ID'], query.after),
    }),
    response: respond.stream(),
  }),
];
