import { modelMismatch } from '../modules/retrieval/service.js';
import { STATUS_CODES } from 'node:http';
import { AppError, noEndpoint } from '../errors.js';
import type { AppServices } from '../graphql/context.js';
import { handleGraphQLHttpRequest } from '../graphql/http.js';
import { graphqlEndpoint, graphqlStreamEndpoint } from '../graphql/endpoints.js';
import type { Yoga } from '../graphql/yoga.js';
import type { Logger } from '../logger.js';
import { requestContext, requestIdOf, ServerTimings } from '../observability/request-context.js';
import { errorResponse, methodNotAllowed } from '../rest/error-response.js';
import { handleRestRequest } from '../rest/handler.js';
import { undeclaredStatus } from '../rest/route-errors.js';
import { matchRoute, type RouteMatch } from '../rest/routes.js';
import { storeUnavailable } from '../db/store-errors.js';
import { apiReference } from './api-reference.js';
import type { ServerContext } from './connections.js';
import { consoleSite } from './console.js';
import { graphiqlAssetsPath, graphiqlSite } from './graphiql.js';
import type { McpCalls } from '../mcp/cancellations.js';
import { handleMcpRequest, mcpPath, protectedResourceMetadata, protectedResourcePaths, type McpDependencies } from '../mcp/server.js';

/**
 * The request handler of the whole service, as a fetch-style function. Every response carries
 * `X-Request-Id` (the caller's, when it sent a usable one), and `Server-Timing` when its work
 * recorded parts (authentication, a search's parts: see recordTiming), every request is timed into
 * `kb_http_request_duration_seconds` by its route pattern and written as one JSON access line.
 * A request the server refused for its Host header or its target (see createHttpServer) is
 * answered 400 here, and logged and counted by the path of its request line. Every request runs
 * as foreground work of the store (see BackgroundWork) until its response starts.
 */
export function createRequestHandler(app: AppServices, yoga: Yoga, log: Logger, mcpCalls: McpCalls) {
  // MCP tools run the REST endpoints through this same handler.
  const handle = routeRequest(app, yoga, log, { app, log, calls: mcpCalls, dispatch: (request) => handler(request) });
  const handler = (request: Request, { refusal }: ServerContext = {}): Promise<Response> => {
    const requestId = requestIdOf(request);
    const timings = new ServerTimings();
    return requestContext.run({ requestId, timings }, async () => {
      const started = performance.now();
      const pathname = refusal?.target ?? new URL(request.url).pathname;
      const match = matchRoute(request.method, pathname);
      // The service's own work on the store (graph merges, statistics) waits for requests in
      // progress, their statements before and after a search included; a streamed body is not
      // waited for (BackgroundWork.turn).
      const handled = refusal ? errorResponse(new AppError('bad_request', refusal.message)) : await app.db.backgroundWork.foreground(() => handle(request, match));
      // A process that is leaving asks its clients to come back on a new connection (to another process).
      const answer = app.drain.draining ? withHeader(handled, 'connection', 'close') : handled;
      const ms = performance.now() - started;
      const timing = timings.header(ms);
      const identified = withHeader(withReasonPhrase(answer), 'x-request-id', requestId);
      const response = timing ? withHeader(identified, 'server-timing', timing) : identified;
      const seconds = ms / 1000;
      const route = routeLabel(pathname, match);
      app.metrics?.httpRequestDuration.observe({ method: request.method, route, status: String(response.status) }, seconds);
      log.access({ request_id: requestId, method: request.method, route, path: pathname, status: response.status, duration_ms: Math.round(seconds * 10_000) / 10 });
      return response;
    });
  };
  return handler;
}

/** The route pattern (`/v1/kb/workspaces/:id`), never the path itself: ids would make a series each. */
function routeLabel(pathname: string, match: RouteMatch): string {
  if (['/healthz', '/readyz', '/metrics', '/openapi.json', '/docs', graphqlEndpoint, graphqlStreamEndpoint, mcpPath, ...protectedResourcePaths].includes(pathname)) return pathname;
  if (pathname.startsWith('/docs/')) return '/docs/:asset';
  if (pathname === '/' || pathname === '/index.html') return '/';
  if (pathname.startsWith('/assets/')) return '/assets/:asset';
  if (pathname.startsWith(graphiqlAssetsPath)) return '/graphiql/:asset';
  return match && 'route' in match ? match.route.path : match ? 'method not allowed' : 'unknown';
}

function withHeader(response: Response, name: string, value: string): Response {
  try {
    response.headers.set(name, value);
    return response;
  } catch {
    // Headers of some responses are immutable: the same response, made again.
    const headers = new Headers(response.headers);
    headers.set(name, value);
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
  }
}

/**
 * Node's own Response leaves `statusText` empty unless told, and the status line then ends
 * without its reason phrase ("HTTP/1.1 429 "). Clients must not depend on it, but people read it.
 */
function withReasonPhrase(response: Response): Response {
  const reason = STATUS_CODES[response.status];
  if (response.statusText || !reason) return response;
  return new Response(response.body, { status: response.status, statusText: reason, headers: response.headers });
}

function routeRequest(app: AppServices, yoga: Yoga, log: Logger, mcp: McpDependencies) {
  const reference = apiReference(app.config);
  const site = consoleSite();
  const graphiql = graphiqlSite();
  return async (request: Request, match: RouteMatch): Promise<Response> => {
    const url = new URL(request.url);
    try {
      if (app.config.role === 'worker' && !['/healthz', '/readyz', '/metrics'].includes(url.pathname)) {
        return errorResponse(new AppError('not_found', 'this process is an ingestion worker (KB_ROLE=worker): it serves /healthz, /readyz and /metrics only'));
      }
      const staticResponse = reference.handle(request, url.pathname) ?? site.handle(request, url.pathname) ?? graphiql.handle(request, url.pathname);
      if (staticResponse) {
        const response = await staticResponse;
        return request.method === 'HEAD' ? withoutBody(response) : response;
      }
      if (url.pathname === '/healthz' || url.pathname === '/readyz') {
        if (request.method !== 'GET' && request.method !== 'HEAD') return methodNotAllowed(request.method, url.pathname, ['GET', 'HEAD']);
        const response = url.pathname === '/healthz' ? Response.json({ status: 'ok' }) : await readiness(app);
        return request.method === 'HEAD' ? withoutBody(response) : response;
      }
      if (url.pathname === '/metrics') {
        if (request.method !== 'GET' && request.method !== 'HEAD') return methodNotAllowed(request.method, url.pathname, ['GET', 'HEAD']);
        const response = await metricsResponse(app, request);
        return request.method === 'HEAD' ? withoutBody(response) : response;
      }
      if (url.pathname === graphqlEndpoint || url.pathname === graphqlStreamEndpoint) {
        return await handleGraphQLHttpRequest(request, app, yoga);
      }
      if (url.pathname === mcpPath) return await handleMcpRequest(request, mcp);
      if (protectedResourcePaths.includes(url.pathname)) {
        if (request.method !== 'GET' && request.method !== 'HEAD') return methodNotAllowed(request.method, url.pathname, ['GET', 'HEAD']);
        const response = protectedResourceMetadata(request);
        return request.method === 'HEAD' ? withoutBody(response) : response;
      }
      if (match && 'route' in match) {
        const response = await handleRestRequest(request, match.route, match.params, yoga, app);
        const undeclared = undeclaredStatus(match.route, response);
        if (undeclared !== undefined) {
          log.error(`${match.route.method} ${match.route.path} answered ${undeclared}, a status its route does not declare: its OpenAPI description misses it (src/rest/routes)`);
          app.metrics?.undeclaredStatuses.inc({ method: match.route.method, route: match.route.path, status: String(undeclared) });
        }
        return request.method === 'HEAD' ? withoutBody(response) : response;
      }
      if (match) return methodNotAllowed(request.method, url.pathname, match.allowed);
      return errorResponse(noEndpoint(request.method, url.pathname));
    } catch (error) {
      // The client went away while sending its body: nobody reads the answer, and it is no fault of ours.
      if (request.signal.aborted || (error as { code?: string }).code === 'ECONNRESET' || (error as Error).message === 'aborted') {
        log.info(`${request.method} ${url.pathname}: the client closed the connection before its request was complete`);
        return errorResponse(new AppError('bad_request', 'body: the request ended before it was complete', { field: 'body' }));
      }
      const unavailable = storeUnavailable(error);
      if (unavailable) {
        log.info(`${request.method} ${url.pathname}: ${unavailable.message} (${(error as Error).message.replace(/\s+/g, ' ').trim()})`);
        return errorResponse(unavailable);
      }
      log.error(`unhandled error on ${request.method} ${url.pathname}`, error);
      return errorResponse(new AppError('internal_error', 'internal error'));
    }
  };
}

/**
 * HEAD answers as GET does, with the same status and headers and no body. The body is read
 * to give its length, as GET's would be.
 */
async function withoutBody(response: Response): Promise<Response> {
  // An event stream (an agent run's events) has no length to give until its run ends: its status
  // and headers are the answer, and it is not followed.
  if (response.headers.get('content-type')?.startsWith('text/event-stream')) {
    await response.body?.cancel();
    return new Response(null, { status: response.status, headers: response.headers });
  }
  // A file answers HEAD itself, with the length of the bytes it did not read (rest/handler.ts).
  if (response.body === null && response.headers.has('content-length')) return response;
  const length = (await response.arrayBuffer()).byteLength;
  const headers = new Headers(response.headers);
  headers.set('content-length', String(length));
  return new Response(null, { status: response.status, headers });
}

/**
 * Prometheus's text format. Open unless KB_METRICS_TOKEN is set; then it needs
 * `Authorization: Bearer <that token>` (a scraper's credential, not a user's key).
 */
async function metricsResponse(app: AppServices, request: Request): Promise<Response> {
  const token = app.config.metricsToken;
  if (token && request.headers.get('authorization') !== `Bearer ${token}`) {
    return errorResponse(new AppError('unauthorized', 'metrics need Authorization: Bearer <KB_METRICS_TOKEN>'));
  }
  if (!app.metrics) return errorResponse(new AppError('not_found', 'metrics are not collected by this server'));
  return new Response(await app.metrics.registry.metrics(), { headers: { 'content-type': app.metrics.registry.contentType } });
}

/** 200 only when the store and the index answer and the index was built with the configured model. */
async function readiness(app: AppServices) {
  const { index, embedder } = app.retrieval;
  const unavailable = (message: string) => Response.json({ error: 'service_unavailable', message }, { status: 503 });
  if (app.drain.draining) return unavailable('the server is shutting down: it finishes the requests in flight and takes no new ones');
  try {
    await app.db.ping();
  } catch {
    return unavailable('the store does not answer');
  }
  try {
    await index.ping();
  } catch (error) {
    return unavailable(`the ${index.kind} index does not answer: ${(error as Error).message}`);
  }
  const mismatch = modelMismatch(app.retrieval);
  if (mismatch) return unavailable(mismatch);
  return Response.json({ status: 'ready', store: app.db.kind, index: index.kind, model: embedder.modelId, dimensions: embedder.dimensions });
}

