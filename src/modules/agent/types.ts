import { builder } from '../../graphql/builder.js';
import { viewerOf } from '../../graphql/viewer.js';
import type { CitedPassage, Source } from './citations.js';
import type { AgentEvent, ReasoningStep } from './events.js';
import { eventIdOf, type SequencedEvent } from './event-log.js';
import { agentInputRules, agentLimits } from './input.js';
import { resumeAgentStream, startAgentRun } from './service.js';

export const AgentMode = builder.enumType('AgentMode', {
  values: {
    fast: { description: 'One search, and the answer streamed as it is written (the default).' },
    deep: { description: 'Multi-hop research with refined searches, and an answer whose sentences are checked against their citations. Costs more.' },
  },
});

const AgentLimitsInput = builder.inputType('AgentLimitsInput', {
  description: "Deep research's budget; each left out takes its default (docs/agent.md).",
  fields: (t) => ({
    maxHops: t.int({ required: false, description: `Searching hops, 1 to ${agentLimits.deep.hops.max}; default ${agentLimits.deep.hops.default}.`, validate: agentInputRules.limits.maxHops }),
    maxSearches: t.int({
      required: false,
      description: `Searches in all, 1 to ${agentLimits.deep.searches.max}; default ${agentLimits.deep.searches.default}.`,
      validate: agentInputRules.limits.maxSearches,
    }),
    maxSeconds: t.int({
      required: false,
      description: `Seconds of research, 1 to ${agentLimits.deep.seconds.max}; default ${agentLimits.deep.seconds.default}.`,
      validate: agentInputRules.limits.maxSeconds,
    }),
  }),
});

const AgentStreamInput = builder.inputType('AgentStreamInput', {
  fields: (t) => ({
    message: t.string({
      description: `The question; at most ${agentLimits.maxMessageCharacters} characters.`,
      validate: agentInputRules.message,
    }),
    workspaceIds: t.idList({
      description: `Workspaces to search, all the caller's own; 1 to ${agentLimits.maxWorkspaces} different ones.`,
      validate: agentInputRules.workspaceIds,
    }),
    sessionId: t.id({
      required: false,
      description: 'Continues this chat session; a new one is created when left out.',
      validate: agentInputRules.sessionId,
    }),
    mode: t.field({ type: AgentMode, required: false }),
    limits: t.field({ type: AgentLimitsInput, required: false }),
    resumable: t.boolean({
      required: false,
      description:
        'When true, a client that goes away does not cancel the run: it goes on for the grace period (KB_AGENT_RESUME_GRACE_SECONDS) and the client resumes it by its last event id (Subscription.agentJobEvents, GET /v1/agent/jobs/{id}/events). Default false: going away cancels the run.',
    }),
  }),
});

const CitedPassageRef = builder.objectRef<CitedPassage>('CitedPassage').implement({
  description: 'A passage an answer cites: `quote` occurs verbatim in the chunk at [start, end).',
  fields: (t) => ({
    citation: t.exposeInt('citation', { description: 'The `[n]` marker of the answer that cites it.' }),
    chunkIndex: t.exposeInt('chunkIndex'),
    page: t.exposeInt('page', { nullable: true }),
    cells: t.exposeString('cells', {
      nullable: true,
      description: "For a spreadsheet: the row the quote is on, as Excel names its cells (`Revenue!A3:C3`); null for other formats.",
    }),
    quote: t.exposeString('quote'),
    start: t.exposeInt('start', { description: "Offset of the quote's first character in the chunk's content (UTF-16 code units)." }),
    end: t.exposeInt('end', { description: 'Offset just after its last character.' }),
  }),
});

const AgentSourceRef = builder.objectRef<Source>('AgentSource').implement({
  description: 'A document the answer cites.',
  fields: (t) => ({
    documentId: t.exposeID('documentId'),
    filename: t.exposeString('filename'),
    pages: t.exposeIntList('pages'),
    passages: t.field({ type: [CitedPassageRef], resolve: (source) => source.passages }),
  }),
});

type FoundPassage = ReasoningStep['found'][number];
const ReasoningFoundRef = builder.objectRef<FoundPassage>('ReasoningFound').implement({
  fields: (t) => ({
    documentId: t.exposeID('documentId'),
    filename: t.exposeString('filename'),
    chunkIndex: t.exposeInt('chunkIndex'),
    page: t.exposeInt('page', { nullable: true }),
    score: t.exposeFloat('score'),
  }),
});

const ReasoningStepRef = builder.objectRef<ReasoningStep>('ReasoningStep').implement({
  description: 'One step of deep research.',
  fields: (t) => ({
    index: t.exposeInt('index'),
    kind: t.exposeString('kind', { description: '`decompose`, `search`, `refine` or `verify`.' }),
    queries: t.exposeStringList('queries'),
    found: t.field({ type: [ReasoningFoundRef], resolve: (step) => step.found }),
    decision: t.exposeString('decision', { description: '`continue` or `stop`.' }),
    reason: t.exposeString('reason'),
  }),
});

type EventOf<Type extends AgentEvent['type']> = Extract<AgentEvent, { type: Type }> & Pick<SequencedEvent, 'jobId' | 'seq'>;

const eventType = <Type extends AgentEvent['type']>(name: string, type: Type, description: string) =>
  builder.objectRef<EventOf<Type>>(name).implement({
    description,
    isTypeOf: (value) => (value as AgentEvent).type === type,
    fields: (t) => ({
      // `constant`: the OpenAPI description gives this field as the one value it always has.
      type: t.string({ resolve: () => type, extensions: { constant: type } }),
      seq: t.int({ description: "The event's number in its run: 1, 2, ... in the order they were sent.", resolve: (event) => event.seq }),
      eventId: t.id({
        description: '`<jobId>:<seq>`, the SSE `id` of the event over REST: a stream is resumed after it (Last-Event-ID).',
        resolve: (event) => eventIdOf(event.jobId, event.seq),
      }),
    }),
  });

const AgentJobStarted = eventType('AgentJobStarted', 'job_started', 'First: the run has begun.');
builder.objectField(AgentJobStarted, 'jobId', (t) => t.exposeID('jobId'));
const AgentReasoning = eventType('AgentReasoning', 'reasoning', 'Deep mode: a research step, before the answer.');
builder.objectField(AgentReasoning, 'steps', (t) => t.field({ type: [ReasoningStepRef], resolve: (event) => event.steps }));
const AgentToken = eventType('AgentToken', 'token', 'A piece of the answer; their contents in order make the answer.');
builder.objectField(AgentToken, 'content', (t) => t.exposeString('content'));
const AgentSources = eventType('AgentSources', 'sources', 'The documents the answer cites.');
builder.objectField(AgentSources, 'sources', (t) => t.field({ type: [AgentSourceRef], resolve: (event) => event.sources }));
const AgentDone = eventType('AgentDone', 'done', 'Last, on success: the answer is stored and charged.');
builder.objectFields(AgentDone, (t) => ({
  jobId: t.exposeID('jobId'),
  sessionId: t.exposeID('sessionId'),
  creditsUsed: t.exposeInt('creditsUsed'),
  supportScore: t.exposeFloat('supportScore', { nullable: true, description: "Share of the answer's sentences supported by the passages they cite; null for a \"not found\" answer." }),
  rewrittenQuery: t.exposeString('rewrittenQuery', { description: 'The question as it was searched for (a follow-up made to stand alone).' }),
}));
const AgentError = eventType('AgentError', 'error', 'Last, on failure: nothing was charged or stored.');
builder.objectFields(AgentError, (t) => ({ code: t.exposeString('code'), message: t.exposeString('message') }));

export const AgentEventRef = builder.unionType('AgentEvent', {
  types: [AgentJobStarted, AgentReasoning, AgentToken, AgentSources, AgentDone, AgentError],
  resolveType: (event) => ({ job_started: 'AgentJobStarted', reasoning: 'AgentReasoning', token: 'AgentToken', sources: 'AgentSources', done: 'AgentDone', error: 'AgentError' })[event.type],
});

builder.subscriptionField('agentStream', (t) =>
  t.field({
    type: AgentEventRef,
    description:
      'Searches the workspaces and streams a cited answer. Refusals (bad input, unknown workspace or session, too few credits) come before the first event.',
    authScopes: { scope: 'chat:write' },
    args: {
      input: t.arg({ type: AgentStreamInput, required: true }),
      lastEventId: t.arg.string({
        required: false,
        description:
          "Resumes a run instead of starting one: the events after this one (`<jobId>:<seq>`, an event's `eventId`; `<jobId>:0` for all of them), then the rest as they come. Nothing is reserved or charged. The REST stream takes it from the `Last-Event-ID` header.",
      }),
    },
    subscribe: (_root, { input, lastEventId }, context) => {
      const request = {
        message: input.message,
        workspaceIds: input.workspaceIds.map(String),
        sessionId: input.sessionId === undefined || input.sessionId === null ? null : String(input.sessionId),
        mode: input.mode ?? null,
        limits: input.limits ?? null,
        resumable: input.resumable ?? null,
      };
      return lastEventId === undefined || lastEventId === null
        ? startAgentRun(context.agent, viewerOf(context), request, context.signal)
        : resumeAgentStream(context.agent, viewerOf(context), request, lastEventId, context.signal);
    },
    resolve: (event) => event,
  }),
);

builder.prismaObjectField('ChatMessage', 'rewrittenQuery', (t) =>
  t.exposeString('rewrittenQuery', { nullable: true, description: 'A user question as the agent searched for it (follow-ups rewritten to stand alone).' }),
);
builder.prismaObjectField('ChatMessage', 'jobId', (t) => t.exposeID('jobId', { nullable: true, description: 'The agent job that wrote an assistant answer.' }));
builder.prismaObjectField('ChatMessage', 'supportScore', (t) =>
  t.exposeFloat('supportScore', { nullable: true, description: "Share of an assistant answer's sentences supported by the passages they cite." }),
);
