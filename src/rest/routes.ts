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
import { badRequest } from '../errors.js';
import * as operations from './operations.js';
import { z } from 'zod';
import { booleanParameter, bodyInput, countParameter, listInput, queryInput, requiredParameter } from './request-input.js';
import type { UploadBody } from './upload-body.js';

export type RestRequest = {
  params: Record<string, string>;
  query: URLSearchParams;
  body: unknown;
};

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/**
 * One documented endpoint: the persisted GraphQL operation it runs, how the HTTP request becomes
 * that operation's variables, and how the operation's `result` becomes the response.
 * `variables` may throw a 400/413/415 AppError; it is then reported from inside the GraphQL
 * pipeline, after authentication, scope and rate limit, as the contract orders them.
 */
export type Route<Result = unknown, Variables = Record<string, unknown>> = {
  method: Method;
  path: string;
  operation: TypedDocumentNode<{ result: Result }, Variables>;
  /** How the body's fields are named in messages: snake_case (the default) or as the specification spells them. */
  fieldNames?: 'snake_case' | 'camelCase';
  /** `json`: a JSON body; `upload`: a document upload (multipart, or JSON text). */
  readsBody?: 'json' | 'upload';
  variables?: (request: RestRequest) => Variables;
  /** `list`: a connection answered as a bare array with a `Link: rel="next"` header. */
  response:
    | { status: 200 | 201 | 202 }
    | { status: 204 }
    | { status: 200; list: true }
    | { status: 200; pick: (result: Result) => unknown }
    /** A subscription: refusals answer as JSON errors, then each event is written as a `data:` line of an SSE stream. */
    | { status: 200; stream: true };
};

const route = <Result, Variables>(definition: Route<Result, Variables>) => definition as unknown as Route;

const idParam = ({ params }: RestRequest) => ({ id: params.id! });

const documentInWorkspace = ({ params, query }: RestRequest) => ({
  id: params.id!,
  workspaceId: queryInput(query, { workspace_id: requiredParameter }).workspace_id,
});

const chunkIndexParam = z.string().regex(/^\d{1,9}$/, 'must be a non-negative integer').transform(Number);

export const routes: Route[] = [
  route({ method: 'GET', path: '/v1/user/me', operation: operations.RestGetMe, response: { status: 200 } }),
  route({
    method: 'PATCH',
    path: '/v1/user/me',
    operation: operations.RestUpdateMe,
    readsBody: 'json',
    variables: ({ body }) => ({ input: bodyInput<UpdateMeInput>(body, { phone: 'phone' }) }),
    response: { status: 200 },
  }),
  route({
    method: 'GET',
    path: '/v1/user/me/credits',
    operation: operations.RestGetCredits,
    response: { status: 200, pick: (me) => me.credits },
  }),
  route({
    method: 'GET',
    path: '/v1/user/me/api-keys',
    operation: operations.RestListApiKeys,
    variables: ({ query }) => listInput(query),
    response: { status: 200, list: true },
  }),
  route({
    method: 'POST',
    path: '/v1/user/me/api-keys',
    operation: operations.RestCreateApiKey,
    readsBody: 'json',
    variables: ({ body }) => ({ input: bodyInput<CreateApiKeyInput>(body, { name: 'name', scopes: 'scopes[]' }) }),
    response: { status: 201 },
  }),
  route({
    method: 'DELETE',
    path: '/v1/user/me/api-keys/:id',
    operation: operations.RestRevokeApiKey,
    variables: idParam,
    response: { status: 204 },
  }),
  route({
    method: 'GET',
    path: '/v1/kb/workspaces',
    operation: operations.RestListWorkspaces,
    variables: ({ query }) => listInput(query),
    response: { status: 200, list: true },
  }),
  route({
    method: 'POST',
    path: '/v1/kb/workspaces',
    operation: operations.RestCreateWorkspace,
    readsBody: 'json',
    variables: ({ body }) => ({ input: bodyInput<WorkspaceInput>(body, { name: 'name' }) }),
    response: { status: 201 },
  }),
  route({ method: 'GET', path: '/v1/kb/workspaces/:id', operation: operations.RestGetWorkspace, variables: idParam, response: { status: 200 } }),
  route({
    method: 'PATCH',
    path: '/v1/kb/workspaces/:id',
    operation: operations.RestUpdateWorkspace,
    readsBody: 'json',
    variables: ({ params, body }) => ({ id: params.id!, input: bodyInput<WorkspaceInput>(body, { name: 'name' }) }),
    response: { status: 200 },
  }),
  route({
    method: 'DELETE',
    path: '/v1/kb/workspaces/:id',
    operation: operations.RestDeleteWorkspace,
    variables: idParam,
    response: { status: 204 },
  }),
  route({
    method: 'GET',
    path: '/v1/kb/workspaces/:id/stats',
    operation: operations.RestWorkspaceStats,
    variables: idParam,
    response: { status: 200, pick: (workspace) => workspace.stats },
  }),
  route({
    method: 'GET',
    path: '/v1/kb/workspaces/:id/scan',
    operation: operations.RestWorkspaceScan,
    variables: idParam,
    response: { status: 200, pick: (workspace) => workspace.scan },
  }),
  route({
    method: 'GET',
    path: '/v1/chat/sessions',
    operation: operations.RestListChatSessions,
    variables: ({ query }) => listInput(query),
    response: { status: 200, list: true },
  }),
  route({
    method: 'POST',
    path: '/v1/chat/sessions',
    operation: operations.RestCreateChatSession,
    readsBody: 'json',
    variables: ({ body }) => ({
      input: bodyInput<CreateChatSessionInput | null>(body, { title: 'title', workspace_ids: 'workspaceIds[]' }, { optional: true, ids: ['workspace_ids'] }) ?? null,
    }),
    response: { status: 201 },
  }),
  route({ method: 'GET', path: '/v1/chat/sessions/:id', operation: operations.RestGetChatSession, variables: idParam, response: { status: 200 } }),
  route({
    method: 'DELETE',
    path: '/v1/chat/sessions/:id',
    operation: operations.RestDeleteChatSession,
    variables: idParam,
    response: { status: 204 },
  }),
  route({
    method: 'POST',
    path: '/v1/chat/sessions/:id/messages',
    operation: operations.RestSendChatMessage,
    readsBody: 'json',
    variables: ({ params, body }) => ({ sessionId: params.id!, input: bodyInput<SendChatMessageInput>(body, { content: 'content', role: 'role' }) }),
    response: { status: 201 },
  }),
  route({
    method: 'POST',
    path: '/v1/kb/workspaces/:id/documents',
    operation: operations.RestUploadDocuments,
    readsBody: 'upload',
    variables: ({ params, body }) => {
      const upload = body as UploadBody;
      return { workspaceId: params.id!, files: upload.files, metadata: upload.metadata ?? null };
    },
    response: { status: 202 },
  }),
  route({
    method: 'GET',
    path: '/v1/kb/workspaces/:id/documents',
    operation: operations.RestListDocuments,
    variables: ({ params, query }) => ({ workspaceId: params.id!, ...listInput(query) }),
    response: { status: 200, list: true },
  }),
  route({ method: 'GET', path: '/v1/kb/documents/:id', operation: operations.RestGetDocument, variables: idParam, response: { status: 200 } }),
  route({ method: 'DELETE', path: '/v1/kb/documents/:id', operation: operations.RestDeleteDocument, variables: idParam, response: { status: 204 } }),
  route({
    method: 'GET',
    path: '/v1/kb/documents/:id/preview',
    operation: operations.RestDocumentPreview,
    variables: (request) => ({
      ...documentInWorkspace(request),
      chunks: queryInput(request.query, { chunks: countParameter(10, 1000) }).chunks,
    }),
    response: { status: 200 },
  }),
  route({
    method: 'GET',
    path: '/v1/kb/documents/:id/chunks',
    operation: operations.RestDocumentChunks,
    variables: (request) => ({ ...documentInWorkspace(request), ...listInput(request.query) }),
    response: { status: 200, list: true },
  }),
  route({
    method: 'GET',
    path: '/v1/kb/documents/:id/chunks/:chunk_index/context',
    operation: operations.RestChunkContext,
    variables: (request) => {
      const { id, workspaceId } = documentInWorkspace(request);
      const chunkIndex = chunkIndexParam.safeParse(request.params.chunk_index);
      if (!chunkIndex.success) throw badRequest('chunk_index', 'must be a non-negative integer');
      const { before, after } = queryInput(request.query, { before: countParameter(2, 100), after: countParameter(2, 100) });
      return { documentId: id, workspaceId, chunkIndex: chunkIndex.data, before, after };
    },
    response: { status: 200 },
  }),
  route({
    method: 'GET',
    path: '/v1/kb/documents/:id/grep',
    operation: operations.RestGrepDocument,
    variables: (request) => {
      const { id, workspaceId } = documentInWorkspace(request);
      const { pattern, case_sensitive: caseSensitive } = queryInput(request.query, {
        pattern: requiredParameter,
        case_sensitive: booleanParameter(false),
      });
      return { documentId: id, workspaceId, pattern, caseSensitive };
    },
    response: { status: 200 },
  }),
];

/** `POST /v1/kb/query` and its legacy alias `POST /query`: one definition, so they cannot drift apart. */
const searchRoute = (path: string) =>
  route({
    method: 'POST',
    path,
    operation: operations.RestSearch,
    readsBody: 'json',
    variables: ({ body }) => ({
      input: bodyInput<SearchInput>(body, { query: 'query', workspace_id: 'workspaceId', top_k: 'topK', mode: 'mode', filter: 'filter' }, { ids: ['workspace_id'] }),
    }),
    response: { status: 200, pick: (results) => ({ results }) },
  });

routes.push(searchRoute('/v1/kb/query'), searchRoute('/query'));

routes.push(
  route({
    method: 'POST',
    path: '/agent/stream',
    operation: operations.RestAgentStream,
    // The specification names this body's fields in camelCase (`workspaceIds`, `sessionId`).
    fieldNames: 'camelCase',
    readsBody: 'json',
    variables: ({ body }) => ({
      input: bodyInput<AgentStreamInput>(
        body,
        { message: 'message', workspaceIds: 'workspaceIds[]', sessionId: 'sessionId', mode: 'mode', limits: 'limits' },
        { ids: ['workspaceIds', 'sessionId'] },
      ),
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
