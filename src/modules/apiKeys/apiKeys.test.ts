import { describe, expect, it } from 'vitest';
import { expectError, serverBed, type TestServer, type TestUser } from '../../../test/support/server.js';

let server: TestServer;
let owner: TestUser;

serverBed((started) => ({ server, user: owner } = started));

const allScopes = ['user:read', 'user:write', 'kb:read', 'kb:write', 'chat:read', 'chat:write'];

describe('API keys over REST', () => {
  it('creates a key: 201 with the raw key once, masked display key and scopes', async () => {
    const response = await server.request('POST', '/v1/user/me/api-keys', {
      key: owner.key,
      json: { name: 'ci', scopes: ['kb:read', 'chat:write'] },
    });
    expect(response.status).toBe(201);
    const { raw_key: rawKey, display_key: displayKey } = response.body;
    expect(Object.keys(response.body).sort()).toEqual(['display_key', 'id', 'name', 'raw_key', 'scopes', 'workspace_ids']);
    expect(response.body.workspace_ids).toBeNull();
    expect(rawKey).toMatch(/^sk_[0-9A-Za-z]{32,}$/);
    expect(displayKey).toBe(`${rawKey.slice(0, 7)}...${rawKey.slice(-4)}`);
    expect(response.body.scopes).toEqual(['kb:read', 'chat:write']);
    expect(response.body.name).toBe('ci');

    const me = await server.request('GET', '/v1/kb/workspaces', { key: rawKey });
    expect(me.status).toBe(200);
  });

  it('stores only a hash of the key', async () => {
    const response = await server.request('POST', '/v1/user/me/api-keys', { key: owner.key, json: { name: 'hash', scopes: ['kb:read'] } });
    const row = await server.app.db.prisma.apiKey.findUniqueOrThrow({ where: { id: response.body.id } });
    expect(JSON.stringify(row)).not.toContain(response.body.raw_key);
    expect(JSON.stringify(row)).not.toContain(response.body.raw_key.slice(3));
    expect(row.keyHash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('lists keys newest first without key values, with last_used_at once used', async () => {
    const user = await server.createUser();
    const created = await server.request('POST', '/v1/user/me/api-keys', { key: user.key, json: { name: 'second', scopes: ['kb:read'] } });
    const listed = await server.request('GET', '/v1/user/me/api-keys', { key: user.key });
    expect(listed.status).toBe(200);
    expect(listed.body.map((key: { name: string }) => key.name)).toEqual(['second', 'default']);
    for (const key of listed.body) {
      expect(Object.keys(key).sort()).toEqual(['created_at', 'display_key', 'id', 'last_used_at', 'name', 'scopes', 'workspace_ids']);
    }
    expect(listed.text).not.toContain(created.body.raw_key);
    expect(listed.text).not.toContain(user.key);
    const unused = listed.body.find((key: { name: string }) => key.name === 'second');
    expect(unused.last_used_at).toBeNull();
    const used = listed.body.find((key: { name: string }) => key.name === 'default');
    expect(used.last_used_at).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    expect(used.scopes).toEqual(allScopes);

    await server.request('GET', '/v1/kb/workspaces', { key: created.body.raw_key });
    const after = await server.request('GET', '/v1/user/me/api-keys', { key: user.key });
    expect(after.body.find((key: { name: string }) => key.name === 'second').last_used_at).not.toBeNull();
  });

  it('revokes a key: 204, then 401 at once for that key, gone from the list, 404 again', async () => {
    const user = await server.createUser();
    const created = await server.request('POST', '/v1/user/me/api-keys', { key: user.key, json: { name: 'doomed', scopes: ['kb:read'] } });
    const doomed = created.body.raw_key as string;
    expect((await server.request('GET', '/v1/kb/workspaces', { key: doomed })).status).toBe(200);
    const revoked = await server.request('DELETE', `/v1/user/me/api-keys/${created.body.id}`, { key: user.key });
    expect(revoked.status).toBe(204);
    expect(revoked.text).toBe('');
    expectError(await server.request('GET', '/v1/kb/workspaces', { key: doomed }), 401, 'unauthorized');
    const listed = await server.request('GET', '/v1/user/me/api-keys', { key: user.key });
    expect(listed.body.map((key: { id: string }) => key.id)).not.toContain(created.body.id);
    expectError(await server.request('DELETE', `/v1/user/me/api-keys/${created.body.id}`, { key: user.key }), 404, 'not_found');
  });

  it('refuses a revoked key at once even while requests with it are in flight', async () => {
    const user = await server.createUser();
    const created = await server.request('POST', '/v1/user/me/api-keys', { key: user.key, json: { name: 'busy', scopes: ['kb:read'] } });
    const busy = created.body.raw_key as string;
    // Known and valid before the revocation (on the embedded store: held in the cache of valid keys).
    expect((await server.request('GET', '/v1/kb/workspaces', { key: busy })).status).toBe(200);
    const inFlight = Array.from({ length: 30 }, () => server.request('GET', '/v1/kb/workspaces', { key: busy }));
    const revoked = await server.request('DELETE', `/v1/user/me/api-keys/${created.body.id}`, { key: user.key });
    expect(revoked.status).toBe(204);
    for (const response of await Promise.all(inFlight)) expect([200, 401]).toContain(response.status);
    for (let attempt = 0; attempt < 10; attempt += 1) {
      expectError(await server.request('GET', '/v1/kb/workspaces', { key: busy }), 401, 'unauthorized');
    }
    // The other keys of the user still work.
    expect((await server.request('GET', '/v1/kb/workspaces', { key: user.key })).status).toBe(200);
  });

  it('lets a key revoke itself, after which it is refused', async () => {
    const user = await server.createUser();
    const listed = await server.request('GET', '/v1/user/me/api-keys', { key: user.key });
    const own = listed.body[0];
    expect((await server.request('DELETE', `/v1/user/me/api-keys/${own.id}`, { key: user.key })).status).toBe(204);
    expectError(await server.request('GET', '/v1/user/me', { key: user.key }), 401, 'unauthorized');
  });

  it('does not let one user see or revoke another user’s key', async () => {
    const a = await server.createUser();
    const b = await server.createUser();
    const aKeys = await server.request('GET', '/v1/user/me/api-keys', { key: a.key });
    expectError(await server.request('DELETE', `/v1/user/me/api-keys/${aKeys.body[0].id}`, { key: b.key }), 404, 'not_found');
    expect((await server.request('GET', '/v1/user/me', { key: a.key })).status).toBe(200);
    const bKeys = await server.request('GET', '/v1/user/me/api-keys', { key: b.key });
    expect(bKeys.body.map((key: { id: string }) => key.id)).not.toContain(aKeys.body[0].id);
  });

  it('validates name and scopes with 400 naming the field', async () => {
    const cases: [unknown, string][] = [
      [{ scopes: ['kb:read'] }, 'name'],
      [{ name: '', scopes: ['kb:read'] }, 'name'],
      [{ name: 'x'.repeat(201), scopes: ['kb:read'] }, 'name'],
      [{ name: 'x' }, 'scopes'],
      [{ name: 'x', scopes: [] }, 'scopes'],
      [{ name: 'x', scopes: ['admin'] }, 'scopes'],
      [{ name: 'x', scopes: 'kb:read' }, 'scopes'],
      [{ name: 'x', scopes: ['kb:read'], expires: 1 }, 'expires'],
      [[], 'body'],
      ['key', 'body'],
    ];
    for (const [json, field] of cases) {
      const body = expectError(await server.request('POST', '/v1/user/me/api-keys', { key: owner.key, json }), 400, 'bad_request');
      expect(body.message, JSON.stringify(json)).toMatch(new RegExp(`^${field}`));
    }
  });

  it('needs user:read to list and user:write to create or revoke, naming the scope', async () => {
    const readOnly = await server.createKey(owner, ['user:read']);
    const kbOnly = await server.createKey(owner, ['kb:read']);
    expect((await server.request('GET', '/v1/user/me/api-keys', { key: readOnly })).status).toBe(200);
    expect(
      expectError(await server.request('POST', '/v1/user/me/api-keys', { key: readOnly, json: { name: 'x', scopes: ['kb:read'] } }), 403, 'forbidden')
        .message,
    ).toContain('user:write');
    expect(expectError(await server.request('GET', '/v1/user/me/api-keys', { key: kbOnly }), 403, 'forbidden').message).toContain('user:read');
    expectError(await server.request('DELETE', '/v1/user/me/api-keys/00000000-0000-4000-8000-000000000000', { key: readOnly }), 403, 'forbidden');
  });
});

describe('API-key rate limit', () => {
  it('answers the 101st request in a minute with 429, rate_limited and Retry-After, across the three endpoints', async () => {
    const user = await server.createUser();
    const calls = [
      () => server.request('GET', '/v1/user/me/api-keys', { key: user.key }),
      () => server.request('POST', '/v1/user/me/api-keys', { key: user.key, json: { name: 'burst', scopes: ['kb:read'] } }),
      () => server.request('DELETE', '/v1/user/me/api-keys/00000000-0000-4000-8000-000000000000', { key: user.key }),
    ];
    const statuses: number[] = [];
    for (let i = 0; i < 100; i += 1) statuses.push((await calls[i % 3]!()).status);
    expect(statuses.filter((status) => status === 429)).toEqual([]);
    const limited = await server.request('GET', '/v1/user/me/api-keys', { key: user.key });
    expectError(limited, 429, 'rate_limited');
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expectError(await server.request('POST', '/v1/user/me/api-keys', { key: user.key, json: { name: 'x', scopes: ['kb:read'] } }), 429, 'rate_limited');

    // Other endpoints and other users are not limited by it.
    expect((await server.request('GET', '/v1/user/me', { key: user.key })).status).toBe(200);
    const other = await server.createUser();
    expect((await server.request('GET', '/v1/user/me/api-keys', { key: other.key })).status).toBe(200);

    // GraphQL shares the same budget.
    const viaGraphQL = await server.graphql(user.key, '{ apiKeys { edges { node { id } } } }');
    expect(viaGraphQL.errors?.[0]?.extensions?.code).toBe('rate_limited');
  });
});

describe('API keys over GraphQL', () => {
  it('creates, lists and revokes with the same rules', async () => {
    const user = await server.createUser();
    const created = await server.graphql<{ createApiKey: { __typename: string; id: string; rawKey: string } }>(
      user.key,
      `mutation { createApiKey(input: { name: "gql", scopes: ["kb:read"] }) { __typename ... on NewApiKey { id rawKey scopes } } }`,
    );
    expect(created.data?.createApiKey.__typename).toBe('NewApiKey');
    const invalid = await server.graphql(user.key, `mutation { createApiKey(input: { name: "gql", scopes: ["root"] }) { __typename } }`);
    expect(invalid.errors?.[0]?.extensions?.code).toBe('bad_request');
    expect(invalid.errors?.[0]?.message).toMatch(/^scopes/);
    const revoked = await server.graphql<{ revokeApiKey: { __typename: string } }>(
      user.key,
      `mutation($id: ID!) { revokeApiKey(id: $id) { __typename ... on AppError { code } } }`,
      { id: created.data!.createApiKey.id },
    );
    expect(revoked.data?.revokeApiKey.__typename).toBe('Deleted');
    const again = await server.graphql<{ revokeApiKey: { __typename: string; code: string } }>(
      user.key,
      `mutation($id: ID!) { revokeApiKey(id: $id) { __typename ... on AppError { code } } }`,
      { id: created.data!.createApiKey.id },
    );
    expect(again.data?.revokeApiKey).toEqual({ __typename: 'AppError', code: 'not_found' });
    expect((await server.request('GET', '/v1/kb/workspaces', { key: created.data!.createApiKey.rawKey })).status).toBe(401);
  });
});
