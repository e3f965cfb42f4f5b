import { errorCatalogue } from '../errors.js';
import type { Route } from './route.js';

/** What any endpoint may answer: no or a bad credential, a scope it lacks, a rate limit, a fault, a store or index away. */
const everyEndpoint = [401, 403, 429, 500, 503];

/**
 * The error statuses an endpoint answers with: those of every endpoint, those its shape brings
 * (400 for parameters or a body, which the REST layer checks; 413 and 415 for a body; 409 and 422
 * for an Idempotency-Key), and those of the errors its route declares its operation raises. The
 * OpenAPI description lists these, and an answer with any other is counted as a defect
 * (`undeclaredStatus`).
 */
export function declaredStatuses(route: Route): number[] {
  const statuses = new Set(everyEndpoint);
  if (route.body || route.query || route.params || route.headers || route.path.includes(':')) statuses.add(400);
  if (route.body) {
    statuses.add(413);
    statuses.add(415);
  }
  if (route.idempotent) {
    statuses.add(409);
    statuses.add(422);
  }
  for (const code of route.raises ?? []) statuses.add(errorCatalogue[code]);
  return [...statuses].sort();
}

/** The status of an error answer the route does not declare, or undefined. */
export function undeclaredStatus(route: Route, response: Response): number | undefined {
  if (response.status < 400 || declaredStatuses(route).includes(response.status)) return undefined;
  return response.status;
}
