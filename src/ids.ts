import { notFound } from './errors.js';

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const isUuid = (value: string) => uuidPattern.test(value);

/** Ids are UUIDs; anything else cannot name a resource, so it is a 404 like an unknown id. */
export function requireUuid(id: string, what: string): string {
  if (!isUuid(id)) throw notFound(what);
  return id.toLowerCase();
}
