import type { ExecutionResult } from 'graphql';
import { Readable } from 'node:stream';
import { AppError, badRequest, isErrorCode } from '../errors.js';
import { isUuid } from '../ids.js';
import type { Yoga } from '../graphql/yoga.js';
import { graphqlEndpoint } from '../graphql/endpoints.js';
import { authenticate, type Viewer } from '../auth/authenticate.js';
import type { AppServices, RestResultHandOver } from '../graphql/context.js';
import { accessError } from '../graphql/operation-gate.js';
import { schema } from '../graphql/schema.js';
import { readJsonBody, refuseAfterDraining } from '../http/body.js';
import { encodeRfc5987, multipartBody } from '../http/multipart-body.js';
import type { FileResult, Route } from './route.js';
import { parsePrismaCursor } from '@pothos/plugin-prisma';
import { readUploadBody } from './upload-body.js';
import { eventIdAlias } from './routes/agent.js';
import { answerIdempotently, idempotencyKeyOf } from './idempotency.js';
import { documentSourceSlice, documentSourceStream } from '../modules/documents/service.js';
import { answerStreamIdempotently, type StreamVariables } from './stream-idempotency.js';
import { bodyInput, queryInput } from './request-input.js';

type GraphQLResponseBody = {
  data?: { result?: unknown } | null;
  errors?: { message: string; extensions?: { code?: unknown; retryAfterSeconds?: unknown } }[];
};

/**
 * Runs a REST request as its persisted GraphQL operation through Yoga, so authentication,
 * scopes, rate limits and error codes are the GraphQL ones, then writes the documented body.
 */
export async function handleRestRequest(
  request: Request,
  route: Route,
  rawParams: Record<string, string>,
  yoga: Yoga,
  app: AppServices,
): Promise<Response> {
  const url = new URL(request.url);
  const limits = app.config;
  // Who asks, and whether they may, is settled before a body is read: nobody without access
  // gets the server to take in (and hold) an upload of up to a gigabyte.
  let viewer: Viewer | null;
  try {
    viewer = await authenticate(request.headers.get('authorization'), app.auth);
  } catch (error) {
    if (error instanceof AppError) return errorResponse(error);
    throw error;
  }
  if (route.body) {
    const denied = accessError(schema, route.operation, viewer);
    if (denied) return errorResponse(denied);
  }
  // Refused with the body's problems (400 after 401, 403 and 429); the body is then read and dropped.
  const idempotencyKey = route.idempotent ? idempotencyKeyOf(request) : undefined;
  let variables: unknown = {};
  let restInputError: AppError | undefined;
  try {
    if (idempotencyKey instanceof AppError) await refuseAfterDraining(idempotencyKey, request.body?.getReader());
    const params = pathParams(route, rawParams);
    const query = route.query ? queryInput(url.searchParams, route.query) : {};
    const body =
      route.body?.kind === 'json'
        ? bodyInput(await readJsonBody(request, limits.maxJsonBytes), route.body.fields, route.body)
        : route.body?.kind === 'upload'
          ? await readUploadBody(request, limits.uploads, limits.server.uploadSpoolDir)
          : undefined;
    const headers = route.headers ? queryInput(namedHeaders(request.headers, route.headers), route.headers) : {};
    variables = route.variables?.({ params, query, body, headers }) ?? {};
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    restInputError = error;
    variables = {};
  }
  // A creating POST with an Idempotency-Key runs once; its retries get the first answer (docs/api.md, Idempotency).
  if (typeof idempotencyKey === 'string' && viewer && !restInputError) {
    // A stream (POST /agent/stream) keeps its run, not its answer: a retry resumes the run.
    const answer =
      'stream' in route.response
        ? await answerStreamIdempotently(app.idempotency, { request, viewer, key: idempotencyKey, variables: variables as StreamVariables, log: app.agent.log }, (given) =>
            execute(request.signal, given),
          )
        : await answerIdempotently(app.idempotency, { request, viewer, key: idempotencyKey, variables, jwtSecret: app.config.jwtSecret }, execute);
    return answer instanceof AppError ? errorResponse(answer) : answer;
  }
  return execute(request.signal);

  async function execute(signal: AbortSignal, given: unknown = variables): Promise<Response> {
    const hash = (route.operation as { __meta__?: { hash?: string } }).__meta__?.hash;
    const { body, contentType, contentLength } = graphqlRequestBody({ variables: given, extensions: { persistedQuery: { version: 1, sha256Hash: hash } } });
    const streaming = 'stream' in route.response;
    const headers = new Headers({ accept: streaming ? 'text/event-stream' : 'application/graphql-response+json' });
    headers.set('content-type', contentType);
    if (contentLength !== undefined) headers.set('content-length', String(contentLength));
    const authorization = request.headers.get('authorization');
    if (authorization !== null) headers.set('authorization', authorization);
    const handOver: RestResultHandOver = { wantsStream: streaming };
    const response = await yoga.fetch(
      new URL(graphqlEndpoint, url),
      // The client's signal: when it goes away, searches and agent runs stop.
      { method: 'POST', headers, body: body as BodyInit, signal },
      { restInputError, viewer: viewer ?? undefined, restResult: handOver },
    );
    if (handOver.stream) return await eventStreamResponse(handOver.stream, app.config.agent.heartbeatSeconds * 1000);
    // Yoga answers itself, with no result to hand over, only when it refuses the request before
    // running it (which the REST layer's requests are made not to provoke).
    const result = (handOver.result ?? (await response.json())) as GraphQLResponseBody;
    const failure = errorOf(result, route);
    if (failure) return errorResponse(failure);
    if ('file' in route.response) return fileResponse(result.data!.result as FileResult, app, viewer!, request.method === 'HEAD');
    return successResponse(route, result.data!.result, url);
  }
}

/**
 * A JSON GraphQL request, or, when the variables hold files, the GraphQL multipart request:
 * files replaced by null in `operations` and sent as parts that `map` points at them.
 */
function graphqlRequestBody(operation: { variables: unknown; extensions: unknown }): { body: string | Readable; contentType: string; contentLength?: number } {
  const files = filesIn(operation.variables);
  const operations = JSON.stringify(operation, (_key, value: unknown) => (value instanceof File ? null : value));
  if (files.length === 0) return { body: operations, contentType: 'application/json' };
  return multipartBody([
    { name: 'operations', value: operations },
    { name: 'map', value: JSON.stringify(Object.fromEntries(files.map(([path], index) => [String(index), [path]]))) },
    ...files.map(([, file], index) => ({ name: String(index), file })),
  ]);
}

/** The files among the variables with their paths (`variables.files.0`), found without recursion. */
function filesIn(variables: unknown): [path: string, file: File][] {
  const files: [string, File][] = [];
  const stack: [unknown, string][] = [[variables, 'variables']];
  while (stack.length > 0) {
    const [value, path] = stack.pop()!;
    if (value instanceof File) files.push([path, value]);
    else if (Array.isArray(value)) value.forEach((item, index) => stack.push([item, `${path}.${index}`]));
    else if (value && typeof value === 'object') for (const [key, item] of Object.entries(value)) stack.push([item, `${path}.${key}`]);
  }
  return files.reverse();
}

/** The request headers a route reads, as parameters to parse like a query (by the names the route gives). */
function namedHeaders(headers: Headers, shape: Record<string, unknown>): URLSearchParams {
  const named = new URLSearchParams();
  for (const name of Object.keys(shape)) {
    const value = headers.get(name);
    if (value !== null) named.set(name, value);
  }
  return named;
}

/** Path parameters checked against the route's patterns; a mismatch is a 400 naming the parameter. */
function pathParams(route: Route, params: Record<string, string>): Record<string, string> {
  for (const [name, rule] of Object.entries(route.params ?? {})) {
    if (!rule.pattern.test(params[name] ?? '')) throw badRequest(name, rule.problem);
  }
  // Ids are UUIDs in any case; one spelling, so that a retry naming one in upper case is the same request.
  return Object.fromEntries(Object.entries(params).map(([name, value]) => [name, isUuid(value) ? value.toLowerCase() : value]));
}

function errorOf(result: GraphQLResponseBody, route?: Route): AppError | undefined {
  const [error] = result.errors ?? [];
  if (error) {
    const code = error.extensions?.code;
    const retryAfterSeconds = typeof error.extensions?.retryAfterSeconds === 'number' ? error.extensions.retryAfterSeconds : undefined;
    if (isErrorCode(code)) {
      const message = code === 'bad_request' ? restMessageOf(error.message, route?.fieldNames, restFieldNames(route)) : error.message;
      return new AppError(code, message, { retryAfterSeconds });
    }
    return new AppError('internal_error', 'internal error');
  }
  const value = result.data?.result as { __typename?: string; code?: unknown; message?: string } | null | undefined;
  if (value?.__typename === 'AppError' && isErrorCode(value.code)) return new AppError(value.code, value.message ?? value.code);
  if (value === undefined || value === null) return new AppError('internal_error', 'internal error');
  return undefined;
}

/**
 * GraphQL reports a REST body that does not fit the input type in its own words
 * (`Variable "$input" got invalid value ...`); say it in terms of the REST body's fields.
 */
export function restMessageOf(message: string, fieldNames: 'snake_case' | 'camelCase' = 'snake_case', restNames: ReadonlyMap<string, string> = new Map()): string {
  const snakeCase = fieldNames === 'camelCase' ? (path: string) => path : toSnakeCase;
  // Where in the body: `at "input.limits"` names the object holding the field GraphQL reports.
  const within = /at "\w+\.([\w.[\]]+)"; Field "/.exec(message)?.[1];
  const inside = (field: string) => snakeCase(within ? `${within}.${field}` : field);
  const missing = /Field "(\w+)" of required type "[^"]+" was not provided/.exec(message);
  if (missing) return `${inside(missing[1]!)}: is required`;
  const unknown = /Field "(\w+)" is not defined by type/.exec(message);
  if (unknown) return `${inside(unknown[1]!)}: is not a known field`;
  const invalid = /got invalid value .* at "\w+\.([\w.[\]]+)"; (.*)$/s.exec(message);
  if (invalid) return `${snakeCase(invalid[1]!)}: ${describeCoercion(invalid[2]!)}`;
  const wrongShape = /Variable "\$(\w+)" got invalid value .*; (.*)$/s.exec(message);
  if (wrongShape) return `${wrongShape[1] === 'input' ? 'body' : snakeCase(wrongShape[1]!)}: ${describeCoercion(wrongShape[2]!)}`;
  // A validator's `topK: must be ...` names the GraphQL field; REST callers sent `top_k`.
  const validated = /^([A-Za-z]\w*)([.[]|: )/.exec(message);
  const restName = validated && restNames.get(validated[1]!);
  if (restName) return `${restName}${message.slice(validated[1]!.length)}`;
  return message;
}

/** The body's GraphQL field names and the REST names the caller sent for them, where they differ. */
function restFieldNames(route: Route | undefined): Map<string, string> {
  const names = new Map<string, string>();
  if (route?.body?.kind !== 'json') return names;
  for (const [restName, target] of Object.entries(route.body.fields)) {
    const graphqlName = target.replace(/\[\]$/, '');
    if (graphqlName !== restName) names.set(graphqlName, restName);
  }
  return names;
}

function describeCoercion(detail: string) {
  if (/^String cannot represent/.test(detail)) return 'must be a string';
  if (/^ID cannot represent/.test(detail)) return 'must be a string';
  // GraphQL's Int is 32 bits: a larger whole number is an integer still, out of that range.
  if (/^Int cannot represent non 32-bit signed integer value/.test(detail)) return 'must be an integer from -2147483648 to 2147483647';
  if (/^Int cannot represent/.test(detail)) return 'must be an integer';
  if (/^Boolean cannot represent/.test(detail)) return 'must be a boolean';
  if (/^Expected type "\w+" to be an object/.test(detail)) return 'must be a JSON object';
  if (/^Expected value of non-null type/.test(detail)) return 'must not be null';
  if (/^Expected non-nullable type "[^"]+" not to be null/.test(detail)) return 'must not be null';
  if (/^Enum "\w+" cannot represent non-string value/.test(detail)) return 'must be a string';
  const notInEnum = /^Value "(.*)" does not exist in "\w+" enum\.(?: Did you mean the enum value "(.*)"\?)?/s.exec(detail);
  if (notInEnum) return `is not an accepted value: "${notInEnum[1]}"${notInEnum[2] ? `; did you mean "${notInEnum[2]}"?` : ''}`;
  return detail;
}

const toSnakeCase = (path: string) => path.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);

function successResponse(route: Route, value: unknown, url: URL): Response {
  const { response } = route;
  if (response.status === 204) return new Response(null, { status: 204 });
  if ('list' in response) {
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
  }
  const body =
    'field' in response
      ? (value as Record<string, unknown>)[response.field]
      : 'wrap' in response
        ? { [response.wrap]: value }
        : withoutTypename(value);
  return Response.json(body, { status: response.status });
}

/**
 * An uploaded file as it was received, read from the store one slice at a time as the client
 * takes it (HEAD reads none of it: the length is the document's). It is the caller's content,
 * not the service's: sandboxed, so that an HTML file opened from this URL is a page of a unique
 * origin that runs no script and loads nothing (CSP `sandbox`), and never sniffed as another
 * type. Only text and JSON, which the browser shows itself under that policy, are `inline`; any
 * other type is an `attachment`: a browser hands an inline PDF to its PDF viewer, which runs the
 * document's own scripts whatever the policy says.
 */
async function fileResponse(file: FileResult, app: AppServices, viewer: Viewer, head: boolean): Promise<Response> {
  const store = { prisma: app.db.prisma, fileReads: app.fileReads };
  const contentType = file.content_type.startsWith('text/')
    ? textContentType(file.content_type, await documentSourceSlice(store, file.document_id, 0, 2))
    : file.content_type;
  const disposition = file.content_type.startsWith('text/') || file.content_type === 'application/json' ? 'inline' : 'attachment';
  return new Response(head ? null : documentSourceStream(store, viewer, file.document_id, file.size_bytes), {
    status: 200,
    headers: {
      'content-type': contentType,
      'content-length': String(file.size_bytes),
      'content-disposition': `${disposition}; filename="${asciiFilename(file.filename)}"; filename*=UTF-8''${encodeRfc5987(file.filename)}`,
      'x-content-type-options': 'nosniff',
      'content-security-policy': "sandbox; default-src 'none'",
      // A file cut short (its document deleted while it is sent) must not leave the client
      // waiting for the rest on a connection kept open.
      connection: 'close',
    },
  });
}

/**
 * A text type with the charset its bytes are in (uploads take text as UTF-8, or UTF-16 with a
 * byte-order mark, which `start` holds when there is one), so that a browser does not guess one.
 */
function textContentType(type: string, start: Uint8Array): string {
  if (start[0] === 0xff && start[1] === 0xfe) return `${type}; charset=utf-16le`;
  if (start[0] === 0xfe && start[1] === 0xff) return `${type}; charset=utf-16be`;
  return `${type}; charset=utf-8`;
}

/** The `filename=` fallback of RFC 6266 for clients without `filename*`: printable ASCII, with `_` for anything else and for `"`, `\` and `%`. */
const asciiFilename = (name: string) => name.replace(/[^\x20-\x7e]|["\\%]/gu, '_');

function withoutTypename(value: unknown) {
  if (value && typeof value === 'object' && '__typename' in value) {
    const { __typename: _typename, ...rest } = value as Record<string, unknown>;
    return rest;
  }
  return value;
}

/**
 * A subscription's events as Server-Sent Events: each event's `result` as a `data: <json>` line,
 * preceded by an `id: <event_id>` line when the event has an `event_id` (which the `data:` line
 * then leaves out: the agent's events, docs/agent.md), and a comment line whenever the stream has
 * been silent for `heartbeatMs`, so that proxies and clients do not take a long search for a dead
 * connection. A client that goes away cancels the subscription (and with it the agent's run).
 * A subscription that ends without any event (a reconnection after a run's last event) is
 * answered `204 No Content`, which tells EventSource to stop reconnecting.
 */
async function eventStreamResponse(events: AsyncIterableIterator<ExecutionResult>, heartbeatMs: number): Promise<Response> {
  // The first event decides between 204 and a stream (a new run's job_started is there at once;
  // a reconnection finds out from the store); a stream whose first event takes longer than this
  // starts without it.
  const first = events.next();
  let wait: ReturnType<typeof setTimeout> | undefined;
  const early = await Promise.race([first, new Promise<undefined>((resolve) => (wait = setTimeout(() => resolve(undefined), 250)))]);
  clearTimeout(wait);
  if (early?.done) return new Response(null, { status: 204, headers: { 'cache-control': 'no-cache, no-transform' } });
  const encoder = new TextEncoder();
  let heartbeat: NodeJS.Timeout | undefined;
  let closed = false;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      const write = (text: string) => {
        if (closed) return;
        controller.enqueue(encoder.encode(text));
        heartbeat?.refresh();
      };
      /** Writes an event; false when the stream cannot go on. */
      const send = (value: ExecutionResult): boolean => {
        const failure = errorOf(value as GraphQLResponseBody);
        if (failure) {
          // An event the schema could not give: the run cannot be followed any further.
          write(`data: ${JSON.stringify({ type: 'error', code: failure.code, message: failure.message })}\n\n`);
          return false;
        }
        const { [eventIdAlias]: eventId, ...data } = (value.data as { result: Record<string, unknown> }).result;
        write(`${typeof eventId === 'string' ? `id: ${eventId}\n` : ''}data: ${JSON.stringify(data)}\n\n`);
        return true;
      };
      heartbeat = setInterval(() => write(': heartbeat\n\n'), heartbeatMs);
      // Written at once: a first event already there goes out with the headers.
      let going = early ? send(early.value) : true;
      void (async () => {
        try {
          if (!going) {
            await events.return?.();
            return;
          }
          for (let next = early ? events.next() : first; ; next = events.next()) {
            const { value, done } = await next;
            if (done || closed) break;
            going = send(value);
            if (!going) {
              await events.return?.();
              break;
            }
          }
        } finally {
          clearInterval(heartbeat);
          if (!closed) {
            closed = true;
            controller.close();
          }
        }
      })();
    },
    cancel() {
      closed = true;
      clearInterval(heartbeat);
      void events.return?.();
    },
  });
  return new Response(body, {
    status: 200,
    headers: {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      // nginx and others buffer responses unless told not to.
      'x-accel-buffering': 'no',
    },
  });
}

/** 405 for a method the path does not take, with the `Allow` header listing those it does. */
export function methodNotAllowed(method: string, pathname: string, allowed: string[]): Response {
  const response = errorResponse(new AppError('method_not_allowed', `${method} is not allowed on ${pathname}`));
  response.headers.set('allow', allowed.join(', '));
  return response;
}

export function errorResponse(error: AppError): Response {
  const headers = new Headers();
  if (error.details.retryAfterSeconds !== undefined) headers.set('retry-after', String(error.details.retryAfterSeconds));
  // The rest of an oversized body was never read, so this connection cannot carry another request.
  if (error.code === 'payload_too_large') headers.set('connection', 'close');
  return Response.json(error.toBody(), { status: error.status, headers });
}
