import type { DocumentNode } from 'graphql';
import type { Route } from './route.js';
import { agentRoutes } from './routes/agent.js';
import { apiKeyRoutes } from './routes/api-keys.js';
import { chatRoutes } from './routes/chat.js';
import { documentTextRoutes } from './routes/document-text.js';
import { documentRoutes } from './routes/documents.js';
import { searchRoutes } from './routes/search.js';
import { userRoutes } from './routes/user.js';
import { workspaceRoutes } from './routes/workspaces.js';

export type { FileResult, RestRequest, Route, RouteTag } from './route.js';

/** Every documented endpoint, in the order of the OpenAPI description and /docs. */
export const routes: readonly Route[] = [
  ...userRoutes,
  ...apiKeyRoutes,
  ...workspaceRoutes,
  ...chatRoutes,
  ...documentRoutes,
  ...documentTextRoutes,
  ...searchRoutes,
  ...agentRoutes,
];

/**
 * The routes' operations by their codegen hash, for Yoga's persisted-operation lookup: a route
 * is the only place its operation is named, so no endpoint can run an unregistered document.
 * These documents keep the field order they were written in, so REST bodies list fields in the
 * documented order (codegen's JSON manifest normalises documents and sorts their fields, so it
 * is not written: codegen.ts).
 */
export function persistedOperations(): Map<string, DocumentNode> {
  const documents = new Map<string, DocumentNode>();
  for (const { method, path, operation } of routes) {
    const hash = (operation as { __meta__?: { hash?: string } }).__meta__?.hash;
    if (!hash) throw new Error(`the operation of ${method} ${path} has no persisted hash: run npm run codegen`);
    documents.set(hash, operation as DocumentNode);
  }
  return documents;
}

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
