import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import type {
  CreateApiKeyInput,
  CreateChatSessionInput,
  SendChatMessageInput,
  UpdateMeInput,
  WorkspaceInput,
} from '../generated/graphql/graphql.js';
import * as operations from './operations.js';
import { bodyInput, listInput } from './request-input.js';

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
  readsBody?: boolean;
  variables?: (request: RestRequest) => Variables;
  /** `list`: a connection answered as a bare array with a `Link: rel="next"` header. */
  response: { status: 200 | 201 } | { status: 204 } | { status: 200; list: true } | { status: 200; pick: (result: Result) => unknown };
};

const route = <Result, Variables>(definition: Route<Result, Variables>) => definition as unknown as Route;

const idParam = ({ params }: RestRequest) => ({ id: params.id! });

export const routes: Route[] = [
  route({ method: 'GET', path: '/v1/user/me', operation: operations.RestGetMe, response: { status: 200 } }),
  route({
    method: 'PATCH',
    path: '/v1/user/me',
    operation: operations.RestUpdateMe,
    readsBody: true,
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
    readsBody: true,
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
    readsBody: true,
    variables: ({ body }) => ({ input: bodyInput<WorkspaceInput>(body, { name: 'name' }) }),
    response: { status: 201 },
  }),
  route({ method: 'GET', path: '/v1/kb/workspaces/:id', operation: operations.RestGetWorkspace, variables: idParam, response: { status: 200 } }),
  route({
    method: 'PATCH',
    path: '/v1/kb/workspaces/:id',
    operation: operations.RestUpdateWorkspace,
    readsBody: true,
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
    readsBody: true,
    variables: ({ body }) => ({
      input: bodyInput<CreateChatSessionInput | null>(body, { title: 'title', workspace_ids: 'workspaceIds[]' }, { optional: true }) ?? null,
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
    readsBody: true,
    variables: ({ params, body }) => ({ sessionId: params.id!, input: bodyInput<SendChatMessageInput>(body, { content: 'content', role: 'role' }) }),
    response: { status: 201 },
  }),
];

export type RouteMatch = { route: Route; params: Record<string, string> } | { allowed: Method[] } | null;

/** Finds the route for a method and path; `allowed` when the path exists under other methods. */
export function matchRoute(method: string, pathname: string): RouteMatch {
  const segments = pathname.replace(/\/+$/, '').split('/');
  const allowed: Method[] = [];
  for (const candidate of routes) {
    const params = matchPath(candidate.path.split('/'), segments);
    if (!params) continue;
    if (candidate.method === method) return { route: candidate, params };
    allowed.push(candidate.method);
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
