import { randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  JSONRPCMessageSchema,
  type CallToolResult,
  type JSONRPCMessage,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { authenticate, type Viewer } from '../auth/authenticate.js';
import { allScopes } from '../auth/scopes.js';
import { AppError, authenticationRequired, errorCatalogue, isErrorCode } from '../errors.js';
import type { AppServices } from '../graphql/context.js';
import { accessError } from '../graphql/operation-gate.js';
import { schema } from '../graphql/schema.js';
import { readJsonBody } from '../http/body.js';
import { checkJson } from '../input-limits.js';
import { errorResponse } from '../rest/error-response.js';
import type { Logger } from '../logger.js';
import { requestContext } from '../observability/request-context.js';
import { serviceVersion } from '../version.js';
import type { McpCalls } from './cancellations.js';
import { listDocumentResources, readResource, ResourceNotFound, resourceTemplates } from './resources.js';
import { RestRefusal, restCalls, type RestCalls } from './rest-calls.js';
import type { Tool } from './tool-definition.js';
import { AgentRunFailed, ToolInputError, tools } from './tools.js';

export const mcpPath = '/mcp';
/** RFC 9728: where a client that was refused finds what the resource needs. */
export const protectedResourcePaths = ['/.well-known/oauth-protected-resource', `/.well-known/oauth-protected-resource${mcpPath}`];

/** Most JSON-RPC messages one POST may carry (a batch). */
export const maxBatchMessages = 10;

const instructions =
  "This server is a knowledge base of the user's documents, grouped in workspaces. Call list_workspaces for workspace ids. " +
  'search finds passages (free); ask has the research agent write a cited answer (costs credits; deep costs more). ' +
  'read_document, chunk_context and grep read a document further; add_document saves one.';

export type McpDependencies = {
  app: AppServices;
  log: Logger;
  calls: McpCalls;
  /** The server's own request handler: tools run the REST endpoints through it. */
  dispatch: (request: Request) => Promise<Response>;
};

/** The document describing /mcp as a protected resource (RFC 9728), for clients told 401. */
export function protectedResourceMetadata(request: Request): Response {
  const url = new URL(request.url);
  const origin = url.origin;
  // RFC 9728: the resource a document describes is the one whose well-known path was asked for.
  const resource = url.pathname === protectedResourcePaths[1] ? `${origin}${mcpPath}` : origin;
  return Response.json({
    resource,
    resource_name: 'Knowledge base (MCP)',
    bearer_methods_supported: ['header'],
    scopes_supported: allScopes,
    resource_documentation: `${origin}/docs`,
    // No OAuth authorization server: a key is created in the console or with `kb users create` (docs/mcp.md).
    authorization_servers: [],
  });
}

/**
 * Streamable HTTP at /mcp. Every POST is answered by a server made for it (no session state is
 * kept between requests, so any process can answer any request); the caller's credential is
 * checked on every request, and each tool runs REST endpoints with it.
 */
export async function handleMcpRequest(request: Request, dependencies: McpDependencies): Promise<Response> {
  const { app } = dependencies;
  let viewer: Viewer | null;
  try {
    viewer = await authenticate(request.headers.get('authorization'), app.auth);
  } catch (error) {
    if (error instanceof AppError) return unauthorized(request, error);
    throw error;
  }
  if (!viewer) return unauthorized(request, authenticationRequired());
  if (request.method === 'DELETE') return new Response(null, { status: 204 });
  if (request.method !== 'POST') {
    return jsonRpcError(405, -32000, `${request.method} ${mcpPath}: this server opens no stream of its own; send requests with POST`, { allow: 'POST, DELETE' });
  }
  let body: unknown;
  try {
    body = await readJsonBody(request, app.config.maxJsonBytes);
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    // Only JSON that does not parse is a parse error; a body too large or of another type is an invalid request.
    return jsonRpcError(error.status, error.code === 'bad_request' ? ErrorCode.ParseError : ErrorCode.InvalidRequest, error.message);
  }
  if (body === undefined) return jsonRpcError(400, ErrorCode.InvalidRequest, 'body: a JSON-RPC message or a batch of them is required');
  const messages = (Array.isArray(body) ? body : [body]) as JSONRPCMessage[];
  if (messages.length === 0 || messages.length > maxBatchMessages) {
    return jsonRpcError(400, ErrorCode.InvalidRequest, `a batch of ${messages.length} messages: from 1 to ${maxBatchMessages} per request`);
  }
  const invalid = messages.findIndex((message) => !JSONRPCMessageSchema.safeParse(message).success);
  if (invalid >= 0) {
    return jsonRpcError(400, ErrorCode.InvalidRequest, `${Array.isArray(body) ? `message ${invalid}` : 'body'}: is not a JSON-RPC 2.0 request, notification or response`);
  }
  const initializing = messages.some((message) => (message as { method?: unknown }).method === 'initialize');
  // The session is only a name for the client's calls, so that it can cancel them: nothing is kept for it.
  const given = request.headers.get('mcp-session-id');
  const session = initializing ? randomUUID() : given && given.length <= 100 ? given : undefined;
  // A client cancels one call at a time: the first cancellation of a POST is acted on.
  const cancellation = messages.find((message) => (message as { method?: unknown }).method === 'notifications/cancelled') as { params?: { requestId?: unknown } } | undefined;
  const cancelled = cancellation?.params?.requestId;
  if (session && (typeof cancelled === 'number' || (typeof cancelled === 'string' && cancelled.length <= 100))) {
    dependencies.calls.cancel({ session, request: cancelled, userId: viewer.userId });
  }

  const server = mcpServer(dependencies, request, viewer, session);
  const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: false });
  await server.connect(transport);
  const end = () => void server.close().catch(() => {});
  // The client going away ends the calls it made (an agent run stops, and is not charged).
  request.signal.addEventListener('abort', end, { once: true });
  const response = await transport.handleRequest(request, { parsedBody: body });
  const headers = new Headers(response.headers);
  if (initializing && session && response.status < 400) headers.set('mcp-session-id', session);
  if (!response.body) {
    end();
    return new Response(null, { status: response.status, headers });
  }
  // The server made for this request is closed once its answers are written (or the client leaves).
  return new Response(response.body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({ flush: end })), { status: response.status, headers });
}

function mcpServer({ app, log, calls, dispatch }: McpDependencies, request: Request, viewer: Viewer, session: string | undefined) {
  const server = new Server({ name: 'kb', title: 'Knowledge base', version: serviceVersion }, { capabilities: { tools: {}, resources: {} }, instructions });
  const origin = new URL(request.url).origin;
  const caller = { authorization: request.headers.get('authorization')!, requestId: requestContext.getStore()?.requestId };
  const allowed = (tool: Tool) => tool.operations.every((operation) => accessError(schema, operation, viewer) === null);

  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: tools.filter(allowed).map((tool) => ({
      name: tool.name,
      title: tool.title,
      description: tool.description,
      inputSchema: jsonSchemaOf(tool.input, 'input'),
      outputSchema: jsonSchemaOf(tool.output, 'output'),
      annotations: tool.annotations,
    })),
  }));

  server.setRequestHandler(CallToolRequestSchema, async (call, extra): Promise<CallToolResult> => {
    const tool = tools.find((candidate) => candidate.name === call.params.name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `unknown tool ${JSON.stringify(call.params.name)}: tools/list names the tools this credential may use`);
    // The refusal REST gives for the operation, naming the scope (the tool is not listed for this credential).
    for (const operation of tool.operations) {
      const denied = accessError(schema, operation, viewer);
      if (denied) return failure(denied.status, denied.code, denied.message);
    }
    const raw = call.params.arguments ?? {};
    // The checks REST makes of caller JSON, before the parse: a parsed copy would drop a "__proto__" key unseen.
    try {
      checkJson('arguments', raw, { maxDepth: maxArgumentDepth });
    } catch (error) {
      if (error instanceof AppError) return failure(error.status, error.code, error.message);
      throw error;
    }
    const parsed = tool.input.safeParse(raw);
    if (!parsed.success) return failure(400, 'bad_request', `arguments: ${z.prettifyError(parsed.error).replaceAll('\n', '; ')}`);
    const cancelled = new AbortController();
    const untrack = session ? calls.track(session, extra.requestId, viewer.userId, cancelled) : () => {};
    const signal = AbortSignal.any([extra.signal, cancelled.signal]);
    const progressToken = call.params._meta?.progressToken;
    let progress = 0;
    try {
      const structured = await tool.run(parsed.data as never, {
        rest: restCalls(dispatch, origin, caller, signal),
        progress: async (message) => {
          if (progressToken === undefined || signal.aborted) return;
          progress += 1;
          await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress, message } }).catch(() => {});
        },
      });
      return { content: [{ type: 'text', text: JSON.stringify(structured) }], structuredContent: structured };
    } catch (error) {
      if (signal.aborted) return failure(null, 'cancelled', `the call was cancelled${tool.name === 'ask' ? '; its agent run was stopped and not charged' : ''}`);
      if (error instanceof RestRefusal) return failure(error.status, error.code, error.message, error.retryAfterSeconds);
      // An error event of the agent's stream: its code is the catalogue's when it is one (a 503), else the stream's own (`cancelled`, ...).
      if (error instanceof AgentRunFailed) return failure(isErrorCode(error.code) ? errorCatalogue[error.code] : null, error.code, error.message);
      if (error instanceof ToolInputError) return failure(400, 'bad_request', error.message);
      log.error(`MCP tool ${tool.name} failed`, error);
      return failure(500, 'internal_error', 'internal error');
    } finally {
      untrack();
    }
  });

  const resourceCalls = (): RestCalls => restCalls(dispatch, origin, caller, request.signal);
  const resourceRefusal = (error: unknown): never => {
    if (error instanceof ResourceNotFound) throw new McpError(-32002, error.message);
    if (error instanceof RestRefusal) {
      throw new McpError(error.status === 404 ? -32002 : ErrorCode.InvalidRequest, `${error.status} ${error.code}: ${error.message}`, { status: error.status, error: error.code });
    }
    log.error('MCP resource request failed', error);
    throw new McpError(ErrorCode.InternalError, 'internal error');
  };
  server.setRequestHandler(ListResourcesRequestSchema, (list) => listDocumentResources(resourceCalls(), list.params?.cursor).catch(resourceRefusal));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({ resourceTemplates }));
  server.setRequestHandler(ReadResourceRequestSchema, (read) => readResource(resourceCalls(), read.params.uri).catch(resourceRefusal));
  return server;
}

/** How deep a tool's arguments may nest; REST sets its own, lower bounds on filters and metadata. */
const maxArgumentDepth = 64;

/**
 * A tool's schema as MCP gives it: JSON Schema with no `$schema`, which MCP reads as 2020-12; these
 * schemas use nothing that draft-07 validators (the SDK's Ajv among them) read differently.
 */
function jsonSchemaOf(type: z.ZodType, io: 'input' | 'output') {
  const { $schema: _dialect, ...jsonSchema } = z.toJSONSchema(type, { io });
  return jsonSchema as { type: 'object' };
}

/** A tool's refusal: the REST status (when it has one), code and message, as text for the model and in `_meta` for programs. */
function failure(status: number | null, code: string, message: string, retryAfterSeconds?: number): CallToolResult {
  return {
    isError: true,
    content: [{ type: 'text', text: `${status === null ? '' : `${status} `}${code}: ${message}${retryAfterSeconds ? ` (retry after ${retryAfterSeconds} s)` : ''}` }],
    _meta: { ...(status !== null && { status }), error: code, message, ...(retryAfterSeconds && { retry_after_seconds: retryAfterSeconds }) },
  };
}

function unauthorized(request: Request, error: AppError): Response {
  const response = errorResponse(new AppError(error.code, `${error.message} (an API key is created in the console or with kb users create)`));
  response.headers.set('www-authenticate', `Bearer resource_metadata="${new URL(request.url).origin}${protectedResourcePaths[1]}"`);
  return response;
}

function jsonRpcError(status: number, code: number, message: string, headers: Record<string, string> = {}): Response {
  return Response.json({ jsonrpc: '2.0', error: { code, message }, id: null }, { status, headers });
}
