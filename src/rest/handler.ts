import { Readable } from 'node:stream';
import { authenticate, type Viewer } from '../auth/authenticate.js';
import { AppError, badRequest } from '../errors.js';
import type { AppServices, RestResultHandOver } from '../graphql/context.js';
import { graphqlEndpoint } from '../graphql/endpoints.js';
import { accessError } from '../graphql/operation-gate.js';
import { schema } from '../graphql/schema.js';
import type { Yoga } from '../graphql/yoga.js';
import { readJsonBody, refuseAfterDraining } from '../http/body.js';
import { multipartBody } from '../http/multipart-body.js';
import { isUuid } from '../ids.js';
import { errorOf, errorResponse, type GraphQLResponseBody } from './error-response.js';
import { answerIdempotently, idempotencyKeyOf } from './idempotency.js';
import { bodyInput, queryInput } from './request-input.js';
import type { Route } from './route.js';
import { answerStreamIdempotently, type StreamVariables } from './stream-idempotency.js';
import { readUploadBody } from './upload-body.js';

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
      route.response.streams
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
    const streaming = route.response.streams;
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
    const context = { url, app, viewer, head: request.method === 'HEAD' };
    if (handOver.stream) return await route.response.write({ events: handOver.stream }, context);
    // Yoga answers itself, with no result to hand over, only when it refuses the request before
    // running it (which the REST layer's requests are made not to provoke).
    const result = (handOver.result ?? (await response.json())) as GraphQLResponseBody;
    const failure = errorOf(result, route);
    if (failure) return errorResponse(failure);
    return await route.response.write({ value: result.data!.result }, context);
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







