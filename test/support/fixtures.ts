import { createClient, unwrap, type KbClient } from '../../clients/typescript/src/index.js';
import type { operations } from '../../clients/typescript/src/schema.js';
import type { TestServer, TestUser } from './server.js';

/**
 * Factories for what tests need before the behaviour they test: made through the typed client
 * (clients/typescript), so a fixture breaks where a user's code would. Tests of an endpoint's own
 * contract call it with `server.request` and check the raw response instead.
 */

/** The shapes the API writes: timestamps to the millisecond in UTC, lower-case UUIDs. */
export const isoTimestamp = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
export const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** A well-formed id that names nothing. */
export const missingId = '00000000-0000-4000-8000-000000000000';

export type Workspace = operations['createWorkspace']['responses'][201]['content']['application/json'];

/** The typed client, as `user` (or another key). */
export function clientOf(server: Pick<TestServer, 'url'>, user: TestUser | string): KbClient {
  return createClient({ baseUrl: server.url, apiKey: typeof user === 'string' ? user : user.key });
}

/** A new workspace of `user`'s, named `name` (a unique name when left out). */
export async function createWorkspace(server: Pick<TestServer, 'url'>, user: TestUser | string, name = `workspace ${crypto.randomUUID().slice(0, 8)}`): Promise<Workspace> {
  return unwrap(await clientOf(server, user).POST('/v1/kb/workspaces', { body: { name } }));
}
