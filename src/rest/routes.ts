import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import type {
  AgentStreamInput,
  CreateApiKeyInput,
  CreateChatSessionInput,
  SearchInput,
  SendChatMessageInput,
  UpdateMeInput,
  WorkspaceInput,
} from '../generated/graphql/graphql.js';
import * as operations from './operations.js';
import { formatPrismaCursor } from '@pothos/plugin-prisma';
import type { z } from 'zod';
import { booleanParameter, countParameter, listQuery, requiredParameter } from './request-input.js';
import type { UploadBody } from './upload-body.js';
import { afterParameter, eventLimitParameter, includeParameter, lastEventIdHeader, resumePosition } from './agent-input.js';

export type RestRequest<Query = Record<string, unknown>, Body = unknown, Headers = Record<string, unknown>> = {
  params: Record<string, string>;
  /** The query parameters as the route's `query` shape parsed them. */
  query: Query;
  /** The request headers the route's `headers` shape names, as it parsed them (by the names it gives). */
  headers: Headers;
  /** A JSON body as the route's `body` mapped it onto the GraphQL input, or the upload. */
  body: Body;
};

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** The groups of /docs and of the OpenAPI description. */
export type RouteTag = 'User' | 'API keys' | 'Workspaces' | 'Documents' | 'Chat' | 'Search' | 'Agent';

/**
 * A JSON body: its REST fields and the GraphQL input type they fill. A GraphQL name ending in
 * `[]` is a list. `ids` name the fields that hold ids (strings only). The OpenAPI description
 * of the body is generated from the same declaration and the input type's validators.
 */
export type JsonBody = {
  kind: 'json';
  input: string;
  fields: Record<string, string>;
  optional?: boolean;
  ids?: readonly string[];
};

/** A document upload: multipart `file` parts and `metadata`, or JSON `{filename, content, metadata}`. */
export type UploadBodySpec = { kind: 'upload' };

/**
 * One documented endpoint: the persisted GraphQL operation it runs, how the HTTP request becomes
 * that operation's variables, and how the operation's `result` becomes the response. Query
 * parameters and bodies are declared (not parsed inside `variables`) so that the OpenAPI
 * description is generated from what the handler validates with.
 * `variables` may throw a 400/413/415 AppError; it is then reported from inside the GraphQL
 * pipeline, after authentication, scope and rate limit, as the contract orders them.
 */
export type Route<Result = unknown, Variables = Record<string, unknown>, Query = Record<string, unknown>, Body = unknown> = {
  method: Method;
  path: string;
  operation: TypedDocumentNode<{ result: Result }, Variables>;
  /** One line for the OpenAPI description and /docs (a test fails when one is missing). */
  summary: string;
  description?: string;
  tag: RouteTag;
  /** A POST that creates something: it honours `Idempotency-Key`. */
  idempotent?: boolean;
  /** How the body's fields are named in messages: snake_case (the default) or as the specification spells them. */
  fieldNames?: 'snake_case' | 'camelCase';
  /** Path parameters that are more than any non-empty string. */
  params?: Record<string, { pattern: RegExp; problem: string; description: string }>;
  query?: z.ZodRawShape;
  /** Request headers the route reads (parsed as query parameters are; a problem is a 400 naming the header). */
  headers?: z.ZodRawShape;
  body?: JsonBody | UploadBodySpec;
  variables?: (request: RestRequest<Query, Body>) => Variables;
  /**
   * `list`: a connection answered as a bare array with a `Link: rel="next"` header;
   * `field`: the result's field of that name; `wrap`: the result as the only field of an object.
   */
  response:
    | { status: 200 | 201 | 202 }
    | { status: 204 }
    | { status: 200; list: true }
    | { status: 200; field: string }
    | { status: 200; wrap: string }
    /** A subscription: refusals answer as JSON errors, then each event is written as a `data:` line of an SSE stream. */
    | { status: 200; stream: true }
    /**
     * A file: the result names the document whose stored bytes are the body, streamed from the
     * store; `content_type` is its Content-Type, `size_bytes` its Content-Length and `filename`
     * its Content-Disposition (see FileResult); refusals answer as JSON errors.
     */
    | { status: 200; file: true };
};

/** What the operation of a `file` response selects. */
export type FileResult = { document_id: string; filename: string; content_type: string; size_bytes: number };

const route = <Result, Variables, Query = Record<string, unknown>, Body = unknown>(definition: Route<Result, Variables, Query, Body>) =>
  definition as unknown as Route;

const jsonBody = (input: string, fields: Record<string, string>, options: { optional?: boolean; ids?: readonly string[] } = {}): JsonBody => ({
  kind: 'json',
  input,
  fields,
  ...options,
});

const idParam = ({ params }: RestRequest) => ({ id: params.id! });

type Listed = { limit: number; cursor?: string };
// A REST cursor is the id of the previous page's last item (as Stripe's `starting_after`), so
// that any UUID is a well-formed one; GraphQL's cursors wrap the same id.
const listVariables = (query: Listed) => ({ first: query.limit, after: query.cursor ? formatPrismaCursor({ id: query.cursor.toLowerCase() }, 'id') : null });

const documentInWorkspace = ({ params, query }: RestRequest<{ workspace_id: string }>) => ({ id: params.id!, workspaceId: query.workspace_id });

const workspaceIdQuery = { workspace_id: requiredParameter.describe('The workspace that holds the document.') };

export const routes: Route[] = [
  route({
    method: 'GET',
    path: '/v1/user/me',
    tag: 'User',
    summary: "The caller's profile and credit balance.",
    operation: operations.RestGetMe,
    response: { status: 200 },
  }),
  route({
    method: 'PATCH',
    path: '/v1/user/me',
    tag: 'User',
    summary: "Changes the caller's phone number (null removes it).",
    operation: operations.RestUpdateMe,
    body: jsonBody('UpdateMeInput', { phone: 'phone' }),
    variables: ({ body }) => ({ input: body as UpdateMeInput }),
    response: { status: 200 },
  }),
  route({
    method: 'GET',
    path: '/v1/user/me/credits',
    tag: 'User',
    summary: 'The credit balance, subscription, totals and the most recent ledger entries.',
    operation: operations.RestGetCredits,
    response: { status: 200, field: 'credits' },
  }),
  route({
    method: 'GET',
    path: '/v1/user/me/api-keys',
    tag: 'API keys',
    summary: "The caller's active API keys, newest first; never the key values.",
    operation: operations.RestListApiKeys,
    query: listQuery,
    variables: ({ query }: RestRequest<Listed>) => listVariables(query),
    response: { status: 200, list: true },
  }),
  route({
    method: 'POST',
    path: '/v1/user/me/api-keys',
    tag: 'API keys',
    summary: 'Creates an API key with the given scopes; the raw key is in this response only.',
    operation: operations.RestCreateApiKey,
    idempotent: true,
    body: jsonBody('CreateApiKeyInput', { name: 'name', scopes: 'scopes[]', workspace_ids: 'workspaceIds[]' }, { ids: ['workspace_ids'] }),
    variables: ({ body }) => ({ input: body as CreateApiKeyInput }),
    response: { status: 201 },
  }),
  route({
    method: 'DELETE',
    path: '/v1/user/me/api-keys/:id',
    tag: 'API keys',
    summary: 'Revokes an API key at once.',
    operation: operations.RestRevokeApiKey,
    variables: idParam,
    response: { status: 204 },
  }),
  route({
    method: 'GET',
    path: '/v1/kb/workspaces',
    tag: 'Workspaces',
    summary: "The caller's workspaces, newest first.",
    operation: operations.RestListWorkspaces,
    query: listQuery,
    variables: ({ query }: RestRequest<Listed>) => listVariables(query),
    response: { status: 200, list: true },
  }),
  route({
    method: 'POST',
    path: '/v1/kb/workspaces',
    tag: 'Workspaces',
    summary: 'Creates a workspace; names are unique per user regardless of case (409).',
    operation: operations.RestCreateWorkspace,
    idempotent: true,
    body: jsonBody('WorkspaceInput', { name: 'name' }),
    variables: ({ body }) => ({ input: body as WorkspaceInput }),
    response: { status: 201 },
  }),
  route({
    method: 'GET',
    path: '/v1/kb/workspaces/:id',
    tag: 'Workspaces',
    summary: 'One workspace.',
    operation: operations.RestGetWorkspace,
    variables: idParam,
    response: { status: 200 },
  }),
  route({
    method: 'PATCH',
    path: '/v1/kb/workspaces/:id',
    tag: 'Workspaces',
    summary: 'Renames a workspace.',
    operation: operations.RestUpdateWorkspace,
    body: jsonBody('WorkspaceInput', { name: 'name' }),
    variables: ({ params, body }) => ({ id: params.id!, input: body as WorkspaceInput }),
    response: { status: 200 },
  }),
  route({
    method: 'DELETE',
    path: '/v1/kb/workspaces/:id',
    tag: 'Workspaces',
    summary: 'Deletes a workspace with its documents, chunks and index entries.',
    operation: operations.RestDeleteWorkspace,
    variables: idParam,
    response: { status: 204 },
  }),
  route({
    method: 'GET',
    path: '/v1/kb/workspaces/:id/stats',
    tag: 'Workspaces',
    summary: "A workspace's document, chunk and size counts and its processing status.",
    operation: operations.RestWorkspaceStats,
    variables: idParam,
    response: { status: 200, field: 'stats' },
  }),
  route({
    method: 'GET',
    path: '/v1/kb/workspaces/:id/scan',
    tag: 'Workspaces',
    summary: 'Checks a workspace: per document, its chunks, embeddings and index entries, and the embedding model in use.',
    operation: operations.RestWorkspaceScan,
    variables: idParam,
    response: { status: 200, field: 'scan' },
  }),
  route({
    method: 'GET',
    path: '/v1/chat/sessions',
    tag: 'Chat',
    summary: "The caller's chat sessions, most recently updated first.",
    operation: operations.RestListChatSessions,
    query: listQuery,
    variables: ({ query }: RestRequest<Listed>) => listVariables(query),
    response: { status: 200, list: true },
  }),
  route({
    method: 'POST',
    path: '/v1/chat/sessions',
    tag: 'Chat',
    summary: 'Creates a chat session, optionally titled and bound to workspaces.',
    operation: operations.RestCreateChatSession,
    idempotent: true,
    body: jsonBody('CreateChatSessionInput', { title: 'title', workspace_ids: 'workspaceIds[]' }, { optional: true, ids: ['workspace_ids'] }),
    variables: ({ body }) => ({ input: (body as CreateChatSessionInput | undefined) ?? null }),
    response: { status: 201 },
  }),
  route({
    method: 'GET',
    path: '/v1/chat/sessions/:id',
    tag: 'Chat',
    summary: 'A chat session with its messages, oldest first.',
    operation: operations.RestGetChatSession,
    variables: idParam,
    response: { status: 200 },
  }),
  route({
    method: 'DELETE',
    path: '/v1/chat/sessions/:id',
    tag: 'Chat',
    summary: 'Deletes a chat session and its messages.',
    operation: operations.RestDeleteChatSession,
    variables: idParam,
    response: { status: 204 },
  }),
  route({
    method: 'POST',
    path: '/v1/chat/sessions/:id/messages',
    tag: 'Chat',
    summary: 'Adds a message to a session (no answer is generated: the agent does that).',
    operation: operations.RestSendChatMessage,
    idempotent: true,
    body: jsonBody('SendChatMessageInput', { content: 'content', role: 'role' }),
    variables: ({ params, body }) => ({ sessionId: params.id!, input: body as SendChatMessageInput }),
    response: { status: 201 },
  }),
  route({
    method: 'POST',
    path: '/v1/kb/workspaces/:id/documents',
    tag: 'Documents',
    summary: 'Uploads documents: they are answered at once as queued, then parsed, chunked and embedded in the background.',
    description:
      'Either `multipart/form-data` with one or more `file` parts and an optional `metadata` part (a JSON object applied to every file), or JSON `{filename, content, metadata?}` for a text document.',
    operation: operations.RestUploadDocuments,
    idempotent: true,
    body: { kind: 'upload' },
    variables: ({ params, body }: RestRequest<Record<string, unknown>, UploadBody>) => ({
      workspaceId: params.id!,
      files: body.files,
      metadata: body.metadata ?? null,
    }),
    response: { status: 202 },
  }),
  route({
    method: 'GET',
    path: '/v1/kb/workspaces/:id/documents',
    tag: 'Documents',
    summary: "A workspace's documents, newest first, with their processing status.",
    operation: operations.RestListDocuments,
    query: listQuery,
    variables: ({ params, query }: RestRequest<Listed>) => ({ workspaceId: params.id!, ...listVariables(query) }),
    response: { status: 200, list: true },
  }),
  route({
    method: 'GET',
    path: '/v1/kb/documents/:id',
    tag: 'Documents',
    summary: "A document's metadata and processing status.",
    operation: operations.RestGetDocument,
    variables: idParam,
    response: { status: 200 },
  }),
  route({
    method: 'DELETE',
    path: '/v1/kb/documents/:id',
    tag: 'Documents',
    summary: 'Deletes a document with its chunks and index entries.',
    operation: operations.RestDeleteDocument,
    variables: idParam,
    response: { status: 204 },
  }),
  route({
    method: 'GET',
    path: '/v1/kb/documents/:id/file',
    tag: 'Documents',
    summary: 'The file a document was made from, byte for byte, with its type and name.',
    description:
      "The body is the uploaded bytes, streamed from the store as the client reads them; `Content-Type` is the document's `content_type` (text types with their charset), `Content-Length` its `size_bytes`. `Content-Disposition` gives the file name (`filename*` in UTF-8, an ASCII `filename` beside it): `inline` for text and JSON, `attachment` for PDF and DOCX, so that a browser does not open a PDF in its PDF viewer, which would run the PDF's scripts. It is served sandboxed (`Content-Security-Policy: sandbox; default-src 'none'`, `X-Content-Type-Options: nosniff`): an uploaded HTML page opened from here runs no script and loads nothing.",
    operation: operations.RestDocumentFile,
    query: workspaceIdQuery,
    variables: documentInWorkspace,
    response: { status: 200, file: true },
  }),
  route({
    method: 'POST',
    path: '/v1/kb/documents/:id/retry',
    tag: 'Documents',
    summary: 'Processes a failed document again from its uploaded bytes: answered at once as queued.',
    description:
      'Only a document whose `status` is `failed`: it goes back to `queued` with its `error` cleared, and is parsed, chunked and embedded again from the start. Any other status is a 409 `document_not_failed`; of retries sent at once, one queues the document and the others get that 409. `Idempotency-Key` is not taken: a retry sent again finds the document no longer failed and changes nothing.',
    operation: operations.RestRetryDocument,
    query: workspaceIdQuery,
    variables: documentInWorkspace,
    response: { status: 202 },
  }),
  route({
    method: 'GET',
    path: '/v1/kb/documents/:id/preview',
    tag: 'Documents',
    summary: "A document's text and its first chunks.",
    operation: operations.RestDocumentPreview,
    query: { ...workspaceIdQuery, chunks: countParameter(10, 1000).describe('How many chunks to include.') },
    variables: (request: RestRequest<{ workspace_id: string; chunks: number }>) => ({ ...documentInWorkspace(request), chunks: request.query.chunks }),
    response: { status: 200 },
  }),
  route({
    method: 'GET',
    path: '/v1/kb/documents/:id/chunks',
    tag: 'Documents',
    summary: "A document's chunks in order.",
    operation: operations.RestDocumentChunks,
    query: { ...workspaceIdQuery, ...listQuery },
    variables: (request: RestRequest<{ workspace_id: string } & Listed>) => ({ ...documentInWorkspace(request), ...listVariables(request.query) }),
    response: { status: 200, list: true },
  }),
  route({
    method: 'GET',
    path: '/v1/kb/documents/:id/chunks/:chunk_index/context',
    tag: 'Documents',
    summary: 'A chunk with the chunks before and after it.',
    operation: operations.RestChunkContext,
    params: { chunk_index: { pattern: /^\d{1,9}$/, problem: 'must be a non-negative integer', description: 'The chunk\'s position in its document, from 0.' } },
    query: {
      ...workspaceIdQuery,
      before: countParameter(2, 100).describe('Chunks before the target.'),
      after: countParameter(2, 100).describe('Chunks after the target.'),
    },
    variables: (request: RestRequest<{ workspace_id: string; before: number; after: number }>) => {
      const { id, workspaceId } = documentInWorkspace(request);
      const { before, after } = request.query;
      return { documentId: id, workspaceId, chunkIndex: Number(request.params.chunk_index), before, after };
    },
    response: { status: 200 },
  }),
  route({
    method: 'GET',
    path: '/v1/kb/documents/:id/grep',
    tag: 'Documents',
    summary: "Finds a pattern (RE2 syntax) in a document's chunks, with the matches highlighted.",
    operation: operations.RestGrepDocument,
    query: {
      ...workspaceIdQuery,
      pattern: requiredParameter.describe('A regular expression in RE2 syntax (linear time: no backreferences or lookaround).'),
      case_sensitive: booleanParameter(false),
    },
    variables: (request: RestRequest<{ workspace_id: string; pattern: string; case_sensitive: boolean }>) => {
      const { id, workspaceId } = documentInWorkspace(request);
      return { documentId: id, workspaceId, pattern: request.query.pattern, caseSensitive: request.query.case_sensitive };
    },
    response: { status: 200 },
  }),
];

/** `POST /v1/kb/query` and its legacy alias `POST /query`: one definition, so they cannot drift apart. */
const searchRoute = (path: string) =>
  route({
    method: 'POST',
    path,
    tag: 'Search',
    summary:
      path === '/query'
        ? 'The legacy alias of POST /v1/kb/query; it behaves identically.'
        : "Vector (or keyword, or hybrid) search of a workspace's chunks. No answer is generated.",
    operation: operations.RestSearch,
    body: jsonBody(
      'SearchInput',
      { query: 'query', workspace_id: 'workspaceId', workspace_ids: 'workspaceIds[]', top_k: 'topK', mode: 'mode', filter: 'filter' },
      { ids: ['workspace_id', 'workspace_ids'] },
    ),
    variables: ({ body }) => ({ input: body as SearchInput }),
    response: { status: 200, wrap: 'results' },
  });

routes.push(searchRoute('/v1/kb/query'), searchRoute('/query'));

routes.push(
  route({
    method: 'POST',
    path: '/agent/stream',
    tag: 'Agent',
    summary: 'Asks the agent: searches the workspaces and streams a cited answer as Server-Sent Events.',
    description:
      'Each event is a line `id: <jobId>:<seq>` and a line `data: <JSON>` whose `type` is one of `job_started`, `reasoning` (deep mode), `token`, `sources`, `done`, `error` (the `AgentEvent` schema). Refusals (401, 402, 403, 404, 400) are JSON errors before the stream opens. A `: heartbeat` comment is written after a silence. With `resumable: true` a disconnect does not cancel the run; with `Last-Event-ID` the request resumes that run instead of starting one; an `Idempotency-Key` sent again replays the first run (docs/agent.md).',
    operation: operations.RestAgentStream,
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
    response: { status: 200, stream: true },
  }),
  route({
    method: 'GET',
    path: '/v1/agent/jobs/:id',
    tag: 'Agent',
    summary: "An agent run's state and credits; with `include=events`, the events it sent.",
    description:
      '`events` (only with `include=events`) lists the logged events after `after`, at most `limit`, each `{id, seq, created_at, data}` where `data` is the event as the stream sent it.',
    operation: operations.RestGetAgentJob,
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
    response: { status: 200 },
  }),
  route({
    method: 'GET',
    path: '/v1/agent/jobs/:id/events',
    tag: 'Agent',
    summary: "Resumes an agent run's stream: the events after `Last-Event-ID` (or `after`), then the rest as they come, as Server-Sent Events.",
    description:
      'The same events as POST /agent/stream sent, with the same `id:` lines, until `done` or `error`; on any server. Reading a resumable run keeps it going (docs/agent.md). When the run has ended and there is nothing after the event named, the answer is `204 No Content`, which stops EventSource from reconnecting.',
    operation: operations.RestAgentJobEvents,
    headers: { 'Last-Event-ID': lastEventIdHeader },
    query: { after: afterParameter },
    variables: ({ params, query, headers }: RestRequest<{ after?: number }, unknown, { 'Last-Event-ID'?: string }>) => ({
      id: params.id!,
      after: resumePosition(params.id!, headers['Last-Event-ID'], query.after),
    }),
    response: { status: 200, stream: true },
  }),
);

export type RouteMatch = { route: Route; params: Record<string, string> } | { allowed: string[] } | null;

/**
 * Finds the route for a method and path; `allowed` when the path exists under other methods.
 * HEAD is answered by the GET route (the server drops the body), so it is allowed wherever GET is.
 */
export function matchRoute(method: string, pathname: string): RouteMatch {
  const segments = pathname.replace(/\/+$/, '').split('/');
  const allowed: string[] = [];
  for (const candidate of routes) {
    const params = matchPath(candidate.path.split('/'), segments);
    if (!params) continue;
    if (candidate.method === method || (method === 'HEAD' && candidate.method === 'GET')) return { route: candidate, params };
    allowed.push(...(candidate.method === 'GET' ? ['GET', 'HEAD'] : [candidate.method]));
  }
  return allowed.length > 0 ? { allowed } : null;
}

function matchPath(pattern: string[], segments: string[]): Record<string, string> | null {
  if (pattern.length !== segments.length) return null;
  const params: Record<string, string> = {};
  for (const [index, part] of pattern.entries()) {
    const segment = segments[index]!;
    if (part.startsWith(':')) {
      if (!segment) return null;
      params[part.slice(1)] = decodeSegment(segment);
    } else if (part !== segment) {
      return null;
    }
  }
  return params;
}

function decodeSegment(segment: string) {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
