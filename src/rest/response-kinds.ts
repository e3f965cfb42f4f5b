import { parsePrismaCursor } from '@pothos/plugin-prisma';
import type { ExecutionResult } from 'graphql';
import { z } from 'zod';
import type { ZodOpenApiResponseObject } from 'zod-openapi';
import type { Viewer } from '../auth/authenticate.js';
import type { AppServices } from '../graphql/context.js';
import { eventStreamResponse } from './event-stream.js';
import { fileContent, fileHeaders, fileResponse } from './file-response.js';
import type { ResultShapes } from './openapi-output.js';
import type { FileResult } from './route.js';

/** What writing a success takes: the operation's `result` (or a subscription's events) and the request's circumstances. */
export type Outcome = { value?: unknown; events?: AsyncIterableIterator<ExecutionResult> };
export type WriteContext = { url: URL; app: AppServices; viewer: Viewer | null; head: boolean };

/** What describing a success takes: the route's summary and method, its success headers, and the shapes of its result. */
export type DescribeContext = {
  summary: string;
  method: string;
  /** `X-Request-Id`, and `Idempotent-Replayed` on a route that takes `Idempotency-Key`. */
  headers: NonNullable<ZodOpenApiResponseObject['headers']>;
  shapes: ResultShapes;
};

/**
 * How a route answers a success: one object both writes the response and describes it in the
 * OpenAPI description, so the two cannot disagree. `streams`: the operation is a subscription,
 * asked of Yoga as `text/event-stream`, whose events are written as they come.
 */
export type ResponseKind = {
  readonly status: number;
  readonly streams: boolean;
  write(outcome: Outcome, context: WriteContext): Response | Promise<Response>;
  describe(context: DescribeContext): Record<string, ZodOpenApiResponseObject>;
};

export const requestIdHeader = {
  'X-Request-Id': {
    description: "The request's id: the caller's own `X-Request-Id` when usable, otherwise a new one. Every log line of the request names it.",
    required: true,
    schema: { type: 'string' as const },
  },
};

const jsonResponse = (status: number, summary: string, headers: DescribeContext['headers'], schema: z.ZodType) => ({
  [String(status)]: { description: summary, headers, content: { 'application/json': { schema } } },
});

function withoutTypename(value: unknown) {
  if (value && typeof value === 'object' && '__typename' in value) {
    const { __typename: _typename, ...rest } = value as Record<string, unknown>;
    return rest;
  }
  return value;
}

/** The result as the body. */
export const json = (status: 200 | 201 | 202): ResponseKind => ({
  status,
  streams: false,
  write: ({ value }) => Response.json(withoutTypename(value), { status }),
  describe: ({ summary, headers, shapes }) => jsonResponse(status, summary, headers, shapes.result().schema),
});

/** No body. */
export const empty = (): ResponseKind => ({
  status: 204,
  streams: false,
  write: () => new Response(null, { status: 204 }),
  describe: () => ({ '204': { description: 'Done; no body.', headers: requestIdHeader } }),
});

/** A connection answered as a bare array of its nodes, with a `Link: rel="next"` header when there is a next page. */
export const list = (): ResponseKind => ({
  status: 200,
  streams: false,
  write({ value }, { url }) {
    const connection = value as { pageInfo: { hasNextPage: boolean; endCursor: string | null }; edges: { node: unknown }[] };
    const headers = new Headers();
    if (connection.pageInfo.hasNextPage && connection.pageInfo.endCursor) {
      const next = new URL(url);
      next.searchParams.set('cursor', String(parsePrismaCursor(connection.pageInfo.endCursor)));
      headers.set('link', `<${next.pathname}${next.search}>; rel="next"`);
    }
    return Response.json(
      connection.edges.map((edge) => edge.node),
      { status: 200, headers },
    );
  },
  describe: ({ summary, shapes }) =>
    jsonResponse(
      200,
      summary,
      { ...requestIdHeader, Link: { description: '`<url>; rel="next"` when there is a next page.', required: false, schema: { type: 'string' } } },
      shapes.listItems(),
    ),
});

/** One field of the result as the body. */
export const field = (name: string): ResponseKind => ({
  status: 200,
  streams: false,
  write: ({ value }) => Response.json((value as Record<string, unknown>)[name], { status: 200 }),
  describe: ({ summary, headers, shapes }) => jsonResponse(200, summary, headers, shapes.field(name)),
});

/** The result as the only field of an object. */
export const wrap = (name: string): ResponseKind => ({
  status: 200,
  streams: false,
  write: ({ value }) => Response.json({ [name]: value }, { status: 200 }),
  describe: ({ summary, headers, shapes }) => jsonResponse(200, summary, headers, z.object({ [name]: shapes.result().required })),
});

/**
 * A subscription's events as Server-Sent Events (event-stream.ts); refusals answer as JSON errors
 * before the stream opens. A GET that resumes a run with nothing left to send is a 204.
 */
export const stream = (): ResponseKind => ({
  status: 200,
  streams: true,
  write: ({ events }, { app }) => eventStreamResponse(events!, app.config.agent.heartbeatSeconds * 1000),
  describe: ({ method, headers }) => ({
    '200': {
      description:
        'The run, as Server-Sent Events: per event a line `id: <jobId>:<seq>` (send it back as `Last-Event-ID` to resume) and a line `data: <AgentEvent as JSON>`, ending with exactly one `done` or `error`.',
      headers,
      content: {
        'text/event-stream': {
          schema: z.string().describe('Events separated by blank lines, each an `id: <jobId>:<seq>` line and a `data: <JSON>` line whose JSON is an `AgentEvent` (see components); `: heartbeat` comment lines during silences.'),
        },
      },
    },
    // Resuming a run that has ended, with nothing after the event named.
    ...(method === 'GET' && { '204': { description: 'The run has ended and every event was sent already; EventSource stops reconnecting.', headers: requestIdHeader } }),
  }),
});

/**
 * A file: the result names the document whose stored bytes are the body, streamed from the
 * store (file-response.ts); refusals answer as JSON errors.
 */
export const file = (): ResponseKind => ({
  status: 200,
  streams: false,
  write: ({ value }, { app, viewer, head }) => fileResponse(value as FileResult, app, viewer!, head),
  describe: ({ summary }) => ({ '200': { description: summary, headers: { ...requestIdHeader, ...fileHeaders }, content: fileContent() } }),
});
