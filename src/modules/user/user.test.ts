import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, startTestServer, type TestServer, type TestUser } from '../../../test/support/server.js';
import { isoTimestamp } from '../../../test/support/fixtures.js';

let server: TestServer;
let owner: TestUser;

beforeAll(async () => {
  server = await startTestServer();
  owner = await server.createUser({ credits: 12 });
});
afterAll(() => server.close());


type Profile = { id: string; email: string; name: string; phone: string | null; creditsBalance: number; created_at: string };

const getMe = async (key: string) => {
  const response = await server.request('GET', '/v1/user/me', { key });
  expect(response.status, response.text).toBe(200);
  return response.body as Profile;
};

describe('profile over REST', () => {
  it('returns the caller’s profile with exactly the documented fields', async () => {
    const response = await server.request('GET', '/v1/user/me', { key: owner.key });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      id: owner.id,
      email: owner.email,
      name: 'Test User',
      phone: null,
      creditsBalance: 12,
      created_at: expect.stringMatching(isoTimestamp),
    });
  });

  it('shows each caller only their own profile', async () => {
    const other = await server.createUser();
    const profile = await getMe(other.key);
    expect(profile.id).toBe(other.id);
    expect(profile.email).toBe(other.email);
    expect(profile.creditsBalance).toBe(0);
  });

  it('sets the phone: 200 with the full profile, visible on the next GET', async () => {
    const user = await server.createUser({ credits: 3 });
    const before = await getMe(user.key);
    const response = await server.request('PATCH', '/v1/user/me', { key: user.key, json: { phone: '+14155550100' } });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ ...before, phone: '+14155550100' });
    expect(await getMe(user.key)).toEqual({ ...before, phone: '+14155550100' });
  });

  it('accepts 8 and 15 digits and clears the phone with null', async () => {
    const user = await server.createUser();
    for (const phone of ['+12345678', '+123456789012345', '+447911123456']) {
      const response = await server.request('PATCH', '/v1/user/me', { key: user.key, json: { phone } });
      expect(response.status, phone).toBe(200);
      expect(response.body.phone).toBe(phone);
    }
    const cleared = await server.request('PATCH', '/v1/user/me', { key: user.key, json: { phone: null } });
    expect(cleared.status).toBe(200);
    expect(cleared.body.phone).toBeNull();
    expect((await getMe(user.key)).phone).toBeNull();
  });

  it('rejects a phone that is not E.164 with 400 naming phone; nothing changes', async () => {
    const user = await server.createUser();
    await server.request('PATCH', '/v1/user/me', { key: user.key, json: { phone: '+4930123456' } });
    const invalid: unknown[] = [
      '14155550100',
      '+1234567',
      '+1234567890123456',
      '+1 415 555 0100',
      '+1-415-555-0100',
      '+',
      '',
      '+1415555010a',
      ' +14155550100',
      '+14155550100\n',
      14155550100,
      true,
      ['+14155550100'],
      { number: '+14155550100' },
    ];
    for (const phone of invalid) {
      const body = expectError(await server.request('PATCH', '/v1/user/me', { key: user.key, json: { phone } }), 400, 'bad_request');
      expect(body.message, JSON.stringify(phone)).toMatch(/^phone: /);
    }
    expect((await getMe(user.key)).phone).toBe('+4930123456');
  });

  it('rejects every other field with 400 naming it, even next to a valid phone; nothing changes', async () => {
    const user = await server.createUser();
    const before = await getMe(user.key);
    for (const field of ['name', 'email', 'creditsBalance', 'credits_balance', 'id', 'created_at']) {
      const body = expectError(
        await server.request('PATCH', '/v1/user/me', { key: user.key, json: { phone: '+14155550100', [field]: 'x' } }),
        400,
        'bad_request',
      );
      expect(body.message, field).toMatch(new RegExp(`^${field}: `));
    }
    expect(await getMe(user.key)).toEqual(before);
  });

  it('requires phone: an empty object is 400 naming phone', async () => {
    const body = expectError(await server.request('PATCH', '/v1/user/me', { key: owner.key, json: {} }), 400, 'bad_request');
    expect(body.message).toMatch(/^phone: /);
  });

  it('rejects a missing, non-object or malformed body with 400, and a non-JSON type with 415', async () => {
    const user = await server.createUser();
    await server.request('PATCH', '/v1/user/me', { key: user.key, json: { phone: '+4930123456' } });
    // No body at all: 400 naming the body (or the phone it lacks).
    const empty = expectError(await server.request('PATCH', '/v1/user/me', { key: user.key }), 400, 'bad_request');
    expect(empty.message).toMatch(/^(body|phone): /);
    for (const json of [null, [], '+14155550100', 5]) {
      const body = expectError(await server.request('PATCH', '/v1/user/me', { key: user.key, json }), 400, 'bad_request');
      expect(body.message, JSON.stringify(json)).toMatch(/^body: /);
    }
    const malformed = expectError(
      await server.request('PATCH', '/v1/user/me', { key: user.key, body: '{"phone":', headers: { 'content-type': 'application/json' } }),
      400,
      'bad_request',
    );
    expect(malformed.message).toMatch(/^body: /);
    expectError(
      await server.request('PATCH', '/v1/user/me', { key: user.key, body: 'phone=+14155550100', headers: { 'content-type': 'text/plain' } }),
      415,
      'unsupported_media_type',
    );
    expect((await getMe(user.key)).phone).toBe('+4930123456');
  });

  it('needs user:read to read and user:write to change, naming the scope', async () => {
    const user = await server.createUser();
    const readOnly = await server.createKey(user, ['user:read']);
    const writeOnly = await server.createKey(user, ['user:write']);
    const unrelated = await server.createKey(user, ['kb:read', 'kb:write', 'chat:read', 'chat:write']);

    expect((await getMe(readOnly)).id).toBe(user.id);
    for (const key of [writeOnly, unrelated]) {
      expect(expectError(await server.request('GET', '/v1/user/me', { key }), 403, 'forbidden').message).toContain('user:read');
    }
    for (const key of [readOnly, unrelated]) {
      const denied = expectError(await server.request('PATCH', '/v1/user/me', { key, json: { phone: '+14155550100' } }), 403, 'forbidden');
      expect(denied.message).toContain('user:write');
    }
    expect((await getMe(user.key)).phone).toBeNull();

    const written = await server.request('PATCH', '/v1/user/me', { key: writeOnly, json: { phone: '+14155550100' } });
    expect(written.status).toBe(200);
    expect(written.body.phone).toBe('+14155550100');
  });

  it('answers 401 without a credential or with an unknown one', async () => {
    for (const key of [null, 'sk_0000000000000000000000000000000000000000', 'not-a-key']) {
      expectError(await server.request('GET', '/v1/user/me', { key }), 401, 'unauthorized');
      expectError(await server.request('PATCH', '/v1/user/me', { key, json: { phone: '+14155550100' } }), 401, 'unauthorized');
    }
    const malformedHeader = await server.request('GET', '/v1/user/me', { headers: { authorization: `Basic ${owner.key}` } });
    expectError(malformedHeader, 401, 'unauthorized');
  });

  it('orders errors 401, then 403, then 400', async () => {
    const readOnly = await server.createKey(owner, ['user:read']);
    expectError(await server.request('PATCH', '/v1/user/me', { json: { phone: 'bad', name: 'x' } }), 401, 'unauthorized');
    expectError(await server.request('PATCH', '/v1/user/me', { key: readOnly, json: { phone: 'bad', name: 'x' } }), 403, 'forbidden');
    expectError(
      await server.request('PATCH', '/v1/user/me', { key: readOnly, body: '{', headers: { 'content-type': 'application/json' } }),
      403,
      'forbidden',
    );
    expectError(await server.request('PATCH', '/v1/user/me', { key: owner.key, json: { phone: 'bad' } }), 400, 'bad_request');
  });

  it('rejects a revoked key at once', async () => {
    const user = await server.createUser();
    const extra = await server.createKey(user, ['user:read']);
    expect((await getMe(extra)).id).toBe(user.id);
    const keys = await server.request('GET', '/v1/user/me/api-keys', { key: user.key });
    const extraId = keys.body.find((key: { scopes: string[] }) => key.scopes.length === 1).id;
    expect((await server.request('DELETE', `/v1/user/me/api-keys/${extraId}`, { key: user.key })).status).toBe(204);
    expectError(await server.request('GET', '/v1/user/me', { key: extra }), 401, 'unauthorized');
  });
});

describe('profile over GraphQL', () => {
  const updateMe = `mutation($input: UpdateMeInput!) {
    updateMe(input: $input) {
      __typename
      ... on User { id phone creditsBalance }
      ... on AppError { code message field }
    }
  }`;

  it('reads me and updates the phone', async () => {
    const user = await server.createUser({ credits: 7 });
    const me = await server.graphql<{ me: Record<string, unknown> }>(user.key, `{ me { id email name phone creditsBalance createdAt } }`);
    expect(me.errors).toBeUndefined();
    expect(me.data?.me).toEqual({
      id: user.id,
      email: user.email,
      name: 'Test User',
      phone: null,
      creditsBalance: 7,
      createdAt: expect.stringMatching(isoTimestamp),
    });
    const updated = await server.graphql<{ updateMe: Record<string, unknown> }>(user.key, updateMe, { input: { phone: '+4930123456' } });
    expect(updated.data?.updateMe).toEqual({ __typename: 'User', id: user.id, phone: '+4930123456', creditsBalance: 7 });
    expect((await getMe(user.key)).phone).toBe('+4930123456');

    const cleared = await server.graphql<{ updateMe: Record<string, unknown> }>(user.key, updateMe, { input: { phone: null } });
    expect(cleared.data?.updateMe).toMatchObject({ __typename: 'User', phone: null });
  });

  it('reports an invalid or missing phone as bad_request naming phone; nothing changes', async () => {
    const user = await server.createUser();
    await server.request('PATCH', '/v1/user/me', { key: user.key, json: { phone: '+4930123456' } });
    for (const input of [{ phone: '12345' }, { phone: '+1234567890123456' }, {}]) {
      const result = await server.graphql<{ updateMe: { __typename: string; code?: string; message?: string } | null }>(user.key, updateMe, {
        input,
      });
      const payload = result.data?.updateMe;
      const error = payload?.__typename === 'AppError' ? { code: payload.code, message: payload.message } : undefined;
      const code = error?.code ?? result.errors?.[0]?.extensions?.code;
      const message = error?.message ?? result.errors?.[0]?.message;
      expect(code, JSON.stringify(result)).toBe('bad_request');
      expect(message, JSON.stringify(result)).toMatch(/^phone: /);
    }
    const unknownField = await server.graphql(user.key, updateMe, { input: { phone: '+14155550100', name: 'x' } });
    expect(unknownField.errors?.[0]?.extensions?.code).toBe('bad_request');
    expect(unknownField.errors?.[0]?.message).toContain('name');
    expect((await getMe(user.key)).phone).toBe('+4930123456');
  });

  it('applies the same scopes and authentication', async () => {
    const user = await server.createUser();
    const readOnly = await server.createKey(user, ['user:read']);
    const writeOnly = await server.createKey(user, ['user:write']);
    const read = await server.graphql(writeOnly, `{ me { id } }`);
    expect(read.errors?.[0]?.extensions?.code).toBe('forbidden');
    expect(read.errors?.[0]?.message).toContain('user:read');
    const write = await server.graphql(readOnly, updateMe, { input: { phone: '+14155550100' } });
    expect(write.errors?.[0]?.extensions?.code).toBe('forbidden');
    expect(write.errors?.[0]?.message).toContain('user:write');
    expect((await server.graphql(null, `{ me { id } }`)).errors?.[0]?.extensions?.code).toBe('unauthorized');
    expect((await server.graphql(null, updateMe, { input: { phone: '+14155550100' } })).errors?.[0]?.extensions?.code).toBe('unauthorized');
    expect((await getMe(user.key)).phone).toBeNull();
  });
});
