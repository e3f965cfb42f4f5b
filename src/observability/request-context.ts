import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';

/** What every log line written while serving a request carries. */
export type RequestContext = { requestId: string };

/** Holds the request being served along its asynchronous work, so log lines can name it. */
export const requestContext = new AsyncLocalStorage<RequestContext>();

/** A caller's X-Request-Id is kept when it is a plain token of at most 128 characters; else one is made. */
export function requestIdOf(request: Request): string {
  const given = request.headers.get('x-request-id');
  return given && /^[A-Za-z0-9._:-]{1,128}$/.test(given) ? given : randomUUID();
}
