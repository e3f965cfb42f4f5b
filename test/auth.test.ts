import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, startTestServer, type TestServer, type TestUser } from './support/server.js';

const secret = 'test-secret-that-is-long-enough-for-hs256!';
let server: TestServer;
let user: TestUser;

beforeAll(async () => {
  server = await startTestServer({ KB_JWT_SECRET: secret });
  user = await server.createUser();
});
afterAll(() => server.close());

function jwt(claims: { sub?: string; scope?: string }, options: { expiresIn?: string | number; key?: string; alg?: string } = {}) {
  const token = new SignJWT(claims.scope === undefined ? {} : { scope: claims.scope }).setProtectedHeader({ alg: options.alg ?? 'HS256' }).setIssuedAt();
  if (claims.sub) token.setSubject(claims.sub);
  if (options.expiresIn !== undefined) token.setExpirationTime(options.expiresIn);
  return token.sign(new TextEncoder().encode(options.key ?? secret));
}

describe('bearer API keys', () => {
  it('answers 401 unauthorized for a missing, malformed, unknown or oddly-schemed credential', async () => {
    const attempts: (Record<string, string> | undefined)[] = [
      undefined,
      { authorization: 'Bearer' },
      { authorization: 'Bearer ' },
      { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` },
      { authorization: `Token ${user.key}` },
      { authorization: 'Bearer sk_short' },
      { authorization: `Bearer sk_${'A'.repeat(40)}` },
      { authorization: `Bearer ${user.key}x` },
      { authorization: `Bearer ${user.key} extra` },
    ];
    for (const headers of attempts) {
      const body = expectError(await server.request('GET', '/v1/user/me', { headers }), 401, 'unauthorized');
      expect(body.message.length).toBeGreaterThan(0);
    }
  });

  it('accepts the scheme in any case', async () => {
    expect((await server.request('GET', '/v1/user/me', { headers: { authorization: `bearer ${user.key}` } })).status).toBe(200);
  });

  it('answers 401 for an invalid credential even on GraphQL requests that need none', async () => {
    const response = await server.request('POST', '/graphql', {
      headers: { authorization: 'Bearer sk_nope' },
      json: { query: '{ __typename }' },
    });
    expect(response.status).toBe(401);
    expect(response.body.errors[0].extensions.code).toBe('unauthorized');
  });
});

describe('HS256 JWTs (KB_JWT_SECRET set)', () => {
  it('accepts a valid token with the scopes in its scope claim', async () => {
    const token = await jwt({ sub: user.id, scope: 'user:read kb:read' }, { expiresIn: '5m' });
    const me = await server.request('GET', '/v1/user/me', { key: token });
    expect(me.status).toBe(200);
    expect(me.body.id).toBe(user.id);
    const denied = expectError(await server.request('POST', '/v1/kb/workspaces', { key: token, json: { name: 'x' } }), 403, 'forbidden');
    expect(denied.message).toContain('kb:write');
  });

  it('ignores unknown scopes in the claim', async () => {
    const token = await jwt({ sub: user.id, scope: 'admin kb:read' }, { expiresIn: '5m' });
    expect((await server.request('GET', '/v1/kb/workspaces', { key: token })).status).toBe(200);
    expectError(await server.request('GET', '/v1/user/me', { key: token }), 403, 'forbidden');
  });

  it('refuses expired, unsigned-by-us, exp-less, sub-less and unknown-user tokens with 401', async () => {
    const tokens = [
      await jwt({ sub: user.id, scope: 'user:read' }, { expiresIn: Math.floor(Date.now() / 1000) - 10 }),
      await jwt({ sub: user.id, scope: 'user:read' }, { expiresIn: '5m', key: 'another-secret-that-is-also-long-enough' }),
      await jwt({ sub: user.id, scope: 'user:read' }),
      await jwt({ scope: 'user:read' }, { expiresIn: '5m' }),
      await jwt({ sub: '00000000-0000-4000-8000-000000000000', scope: 'user:read' }, { expiresIn: '5m' }),
      await jwt({ sub: 'not-a-uuid', scope: 'user:read' }, { expiresIn: '5m' }),
      await jwt({ sub: user.id, scope: 'user:read' }, { expiresIn: '5m', alg: 'HS512' }),
      'eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.',
    ];
    for (const token of tokens) expectError(await server.request('GET', '/v1/user/me', { key: token }), 401, 'unauthorized');
  });
});

describe('JWTs without KB_JWT_SECRET', () => {
  it('refuses every JWT with 401', async () => {
    const plain = await startTestServer({ KB_JWT_SECRET: '' });
    try {
      const someone = await plain.createUser();
      const token = await jwt({ sub: someone.id, scope: 'user:read' }, { expiresIn: '5m' });
      expectError(await plain.request('GET', '/v1/user/me', { key: token }), 401, 'unauthorized');
    } finally {
      await plain.close();
    }
  });
});
