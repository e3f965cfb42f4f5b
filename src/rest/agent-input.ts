import { z } from 'zod';
import { badRequest } from '../errors.js';
import { eventIdPattern, maxSeq, parseEventId } from '../modules/agent/event-log.js';

// What the agent's routes read from a request besides a body: the position a stream resumes
// after (docs/agent.md, "Resuming a stream").

const eventIdProblem = 'must be an event id of this API, <jobId>:<seq> (the `id:` of an event of the stream)';

/** `Last-Event-ID` as EventSource sends it back: `<jobId>:<seq>`. */
export const lastEventIdHeader = z
  .string()
  // The shape, for the OpenAPI description; parseEventId reads it with the same pattern.
  .regex(eventIdPattern, eventIdProblem)
  .refine((value) => parseEventId(value) !== null, eventIdProblem)
  .optional()
  .describe('The `id:` of the last event the client has (`<jobId>:<seq>`): the stream resumes after it. EventSource sends it when it reconnects.');

/** `after`: the `seq` of the last event the client has, for clients that cannot set a header. */
export const afterParameter = z
  .string()
  .regex(/^\d{1,10}$/, 'must be an event number from 0')
  .transform(Number)
  .pipe(z.number().max(maxSeq, `must be at most ${maxSeq}`))
  .optional()
  .describe('The `seq` of the last event the client has (0: none); `Last-Event-ID`, when sent, takes precedence.');

/**
 * Where a reading of job `jobId`'s events starts: after the event `Last-Event-ID` names, else
 * after `after`, else at the first. A `Last-Event-ID` of another job is a 400.
 */
export function resumePosition(jobId: string, lastEventId: string | undefined, after: number | undefined): number {
  if (lastEventId !== undefined) {
    const position = parseEventId(lastEventId)!;
    if (position.jobId !== jobId.toLowerCase()) throw badRequest('Last-Event-ID', `names an event of agent job ${position.jobId}, not of the job in the path`);
    return position.seq;
  }
  return after ?? 0;
}

/** `include=events` on GET /v1/agent/jobs/{id}. */
export const includeParameter = z.enum(['events'], { error: 'must be events' }).optional().describe('`events`: list the logged events too.');

/** How many events GET /v1/agent/jobs/{id}?include=events lists at most. */
export const eventLimitParameter = z
  .string()
  .regex(/^\d+$/, 'must be an integer from 1 to 10000')
  .transform(Number)
  .pipe(z.number().min(1, 'must be at least 1').max(10_000, 'must be at most 10000'))
  .default(1000)
  .describe('The most events to list (with `include=events`), from 1 to 10000; page on with `after`.');
