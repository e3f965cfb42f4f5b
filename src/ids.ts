import { badRequest, notFound } from './errors.js';

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const isUuid = (value: string) => uuidPattern.test(value);

/** A UUID as the store writes it: lower-case. Files the service writes name ids this way. */
export const isStoredUuid = (value: string) => uuidPattern.test(value) && value === value.toLowerCase();

/** Ids are UUIDs; anything else cannot name a resource, so it is a 404 like an unknown id. */
export function requireUuid(id: string, kind: string, named = id): string {
  if (!isUuid(id)) throw notFound(kind, named);
  return id.toLowerCase();
}

/**
 * Connection cursors are opaque but decodable, so a well-formed one can still carry any id;
 * one whose id is not a UUID was not issued by this API.
 */
export function checkCursor<Query extends { cursor?: { id?: unknown } }>(query: Query): Query {
  const id = query.cursor?.id;
  if (id !== undefined && !(typeof id === 'string' && isUuid(id))) throw invalidCursor();
  return query;
}

export const invalidCursor = () => badRequest('cursor', 'is not a cursor from this API');
