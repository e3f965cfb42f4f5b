import { builder } from '../../graphql/builder.js';
import { viewerOf } from '../../graphql/viewer.js';
import { badRequest } from '../../errors.js';
import { eventIdOf, maxSeq, type LoggedEvent } from './event-log.js';
import { countLoggedEvents, findRun, followRun, readLoggedEvents, type RunState } from './run-reading.js';
import { AgentEventRef, AgentMode } from './types.js';

// Runs (agent jobs, as the API names them) and their event logs (docs/agent.md, "Resuming a stream" and "Jobs"). Registered
// after types.ts, whose event types and mode these use.

/** The most events one read of `AgentJob.events` gives; page on with `after`. */
export const maxEventsPerRead = 10_000;

const AgentJobStatus = builder.enumType('AgentJobStatus', {
  values: {
    running: { description: 'Still going (credits reserved).' },
    done: { description: 'Answered: the answer is stored and charged.' },
    failed: { description: 'Ended by an error; nothing was charged.' },
    cancelled: { description: 'Stopped because its client left (or, resumable, did not come back in time); nothing was charged.' },
  },
});

const AgentJobEventRef = builder.objectRef<LoggedEvent>('AgentJobEvent').implement({
  description: "An event of a run, as the run's log keeps it.",
  fields: (t) => ({
    id: t.id({ description: '`<jobId>:<seq>`: the SSE `id` the event was sent with.', resolve: (event) => eventIdOf(event.jobId, event.seq) }),
    seq: t.exposeInt('seq', { description: '1, 2, ... in the order the events were sent.' }),
    type: t.string({ description: '`job_started`, `reasoning`, `token`, `sources`, `done` or `error`.', resolve: (event) => String(event.data.type) }),
    data: t.field({
      type: 'JSON',
      description: "The event as the REST stream's `data:` line gave it (snake_case inside `sources` and `steps`, as REST names them).",
      resolve: (event) => event.data,
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const AgentJobRef = builder.objectRef<RunState>('AgentJob').implement({
  description: 'An agent run: its state, its credits, and the log of the events it sent.',
  fields: (t) => ({
    id: t.exposeID('id'),
    status: t.field({ type: AgentJobStatus, resolve: (job) => job.status }),
    mode: t.field({ type: AgentMode, resolve: (job) => job.mode }),
    sessionId: t.exposeID('sessionId', { nullable: true, description: 'The chat session the answer was stored in: set once the run is done (or when it continued one).' }),
    resumable: t.exposeBoolean('resumable', { description: 'Whether a disconnect leaves the run going for the grace period.' }),
    creditsReserved: t.exposeInt('creditsReserved'),
    creditsUsed: t.exposeInt('creditsUsed', { description: 'What the run was charged: the reservation once done, else 0.' }),
    error: t.exposeString('error', { nullable: true, description: 'Why a failed or cancelled run ended.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    finishedAt: t.expose('finishedAt', { type: 'DateTime', nullable: true }),
    eventCount: t.int({ description: 'How many events the log holds.', resolve: (job, _args, context) => countLoggedEvents(context.prisma, job.id) }),
    events: t.field({
      type: [AgentJobEventRef],
      description: `The logged events after \`after\` (0: from the first), oldest first, at most \`first\` (1 to ${maxEventsPerRead}, default 1000).`,
      args: { after: t.arg.int({ required: false }), first: t.arg.int({ required: false }) },
      resolve: (job, { after, first }, context) => {
        const from = after ?? 0;
        const count = first ?? 1000;
        if (!Number.isInteger(from) || from < 0 || from > maxSeq) throw badRequest('after', 'must be an event number from 0');
        if (!Number.isInteger(count) || count < 1 || count > maxEventsPerRead) throw badRequest('first', `must be an integer from 1 to ${maxEventsPerRead}`);
        return readLoggedEvents(context.prisma, job, from, count);
      },
    }),
  }),
});

builder.queryField('agentJob', (t) =>
  t.field({
    type: AgentJobRef,
    description: "One of the viewer's agent runs (from job_started's jobId).",
    authScopes: { scope: 'chat:read' },
    args: { id: t.arg.id() },
    resolve: (_root, { id }, context) => findRun(context.prisma, viewerOf(context), String(id)),
  }),
);

builder.subscriptionField('agentJobEvents', (t) =>
  t.field({
    type: AgentEventRef,
    description:
      "A run's events after `after` (its last seen event's `seq`; 0 or left out: from the first), then the rest as the run sends them, until `done` or `error`: resuming a stream, on any server. Following a resumable run keeps it going; no run is started or charged.",
    authScopes: { scope: 'chat:read' },
    args: { id: t.arg.id(), after: t.arg.int({ required: false }) },
    subscribe: (_root, { id, after }, context) =>
      followRun(context.agent, viewerOf(context), { jobId: String(id), after: after ?? 0, field: 'after' }, context.signal),
    resolve: (event) => event,
  }),
);
