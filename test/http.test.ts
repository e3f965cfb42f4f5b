import { describe, expect, it } from 'vitest';
import { expectError, serverBed, type TestServer, type TestUser } from './support/server.js';

let server: TestServer;
let user: TestUser;

serverBed((started) => ({ server, user } = started));

describe('health', () => {
  it('answers /healthz without authentication', async () => {
    const response = await server.request('GET', '/healthz');
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ status: 'ok' });
  });

  it('answers /readyz once the store and the index answer, naming them and the model', async () => {
    const response = await server.request('GET', '/readyz');
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      status: 'ready',
      store: server.app.db.kind,
      index: server.config.elasticsearch ? 'elasticsearch' : 'pgvector',
      model: 'bge-small-en-v1.5-q',
      dimensions: 384,
    });
  });
});

describe('requests the service cannot take', () => {
  it('answers an unknown path with a JSON 404 (/ is the console)', async () => {
    for (const path of ['/v1', '/v1/nothing', '/v2/user/me', '/v1/user/me/extra', '/assets/nothing.js', '/console']) {
      expectError(await server.request('GET', path, { key: user.key }), 404, 'not_found');
    }
    const root = await server.request('GET', '/');
    expect(root.status).toBe(200);
    expect(root.headers.get('content-type')).toBe('text/html; charset=utf-8');
  });

  it('answers a known path with the wrong method with 405 and Allow', async () => {
    const response = await server.request('PUT', '/v1/kb/workspaces', { key: user.key, json: { name: 'x' } });
    expectError(response, 405, 'method_not_allowed');
    expect(response.headers.get('allow')).toBe('GET, HEAD, POST');
  });

  it('names the status in the status line', async () => {
    const cases: [string, string, number, string][] = [
      ['GET', '/healthz', 200, 'OK'],
      ['PUT', '/v1/kb/workspaces', 405, 'Method Not Allowed'],
      ['GET', '/v1/nothing', 404, 'Not Found'],
      ['GET', '/v1/user/me', 401, 'Unauthorized'],
      ['POST', '/graphql', 401, 'Unauthorized'],
    ];
    for (const [method, path, status, reason] of cases) {
      const response = await fetch(`${server.app.url}${path}`, { method, headers: { authorization: 'Bearer sk_not_a_key', 'content-type': 'application/json' }, body: method === 'GET' ? undefined : '{}' });
      await response.arrayBuffer();
      expect([method, path, response.status, response.statusText]).toEqual([method, path, status, reason]);
    }
  });

  it('answers invalid JSON with 400 and stores nothing', async () => {
    const before = await server.request('GET', '/v1/kb/workspaces', { key: user.key });
    for (const body of ['{', '{"name": "x",}', 'name=x', '']) {
      const response = await server.request('POST', '/v1/kb/workspaces', {
        key: user.key,
        body,
        headers: { 'content-type': 'application/json' },
      });
      expectError(response, 400, 'bad_request');
      expect(response.body.message).toMatch(/^body: /);
    }
    const after = await server.request('GET', '/v1/kb/workspaces', { key: user.key });
    expect(after.body).toEqual(before.body);
  });

  it('answers a body that is not application/json with 415', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'nonsense', 'application/json; charset=latin1', 'application/json; charset=utf-16']) {
      const response = await server.request('POST', '/v1/kb/workspaces', {
        key: user.key,
        body: '{"name":"typed"}',
        headers: { 'content-type': type },
      });
      expectError(response, 415, 'unsupported_media_type');
    }
    const withCharset = await server.request('POST', '/v1/kb/workspaces', {
      key: user.key,
      body: '{"name":"charset"}',
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    expect(withCharset.status).toBe(201);
    const latin1 = await server.request('POST', '/v1/kb/workspaces', { key: user.key, body: '{"name":"x"}', headers: { 'content-type': 'application/json; charset=ISO-8859-1' } });
    expect(latin1.body.message).toBe('Content-Type\'s charset must be utf-8, as JSON is (got "ISO-8859-1")');
    const names = (await server.request('GET', '/v1/kb/workspaces', { key: user.key })).body.map((workspace: { name: string }) => workspace.name);
    expect(names).not.toContain('typed');
    expect(names).not.toContain('x');
    expect(names).toContain('charset');
  });

  it('answers a JSON body over 1 MiB with 413, whether or not its length is declared', async () => {
    const big = JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10) });
    expectError(
      await server.request('POST', '/v1/kb/workspaces', { key: user.key, body: big, headers: { 'content-type': 'application/json' } }),
      413,
      'payload_too_large',
    );
    const chunks = new ReadableStream({
      start(controller) {
        for (let i = 0; i < 20; i += 1) controller.enqueue(new TextEncoder().encode('x'.repeat(64 * 1024)));
        controller.close();
      },
    });
    const response = await fetch(new URL('/v1/kb/workspaces', server.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${user.key}`, 'content-type': 'application/json' },
      body: chunks,
      duplex: 'half',
    } as RequestInit);
    expect(response.status).toBe(413);
    expect(await response.json()).toMatchObject({ error: 'payload_too_large' });
    expect((await server.request('GET', '/healthz')).status).toBe(200);
  });

  it('answers 401 before looking at the body', async () => {
    expectError(
      await server.request('POST', '/v1/kb/workspaces', { body: 'not json', headers: { 'content-type': 'text/plain' } }),
      401,
      'unauthorized',
    );
  });
});

describe('GraphQL endpoint', () => {
  it('serves GraphiQL to a browser from this server alone, under a policy that allows nothing from elsewhere', async () => {
    const response = await server.request('GET', '/graphql', { headers: { accept: 'text/html' } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(response.text.toLowerCase()).toContain('graphiql');
    const policy = response.headers.get('content-security-policy') ?? '';
    expect(policy).toContain("default-src 'self'");
    expect(policy).toContain("script-src 'self';");
    expect(policy).toContain("connect-src 'self'");
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    // Offline: no address elsewhere in the page or its start script, no script written inline,
    // and every file they name is served here.
    expect(response.text).not.toMatch(/https?:\/\//);
    expect(response.text).not.toMatch(/<script>/);
    const start = await server.request('GET', '/graphiql/start.js');
    expect(start.status).toBe(200);
    expect(start.text).not.toMatch(/https?:\/\//);
    const named = [
      ...[...response.text.matchAll(/(?:src|href)="(\/[^"]+)"/g)].map((match) => match[1]!),
      ...[...start.text.matchAll(/'([\w.]+\.worker\.js)'/g)].map((match) => `/graphiql/${match[1]}`),
    ];
    expect(named).toEqual(expect.arrayContaining(['/graphiql/graphiql.css', '/graphiql/yoga-graphiql.umd.js', '/graphiql/start.js', '/graphiql/editor.worker.js']));
    for (const path of named) {
      const asset = await fetch(new URL(path, server.url));
      expect(asset.status, path).toBe(200);
      expect(asset.headers.get('content-type'), path).toMatch(/^text\/(css|javascript); charset=utf-8$/);
      await asset.body?.cancel();
    }
    expect((await server.request('GET', '/graphiql/../package.json')).status).toBe(404);
    expect((await server.request('GET', '/graphiql/unknown.js')).status).toBe(404);
    expect((await server.request('POST', '/graphiql/start.js')).status).toBe(405);
  });

  it('answers queries over GET and POST with the bearer credential', async () => {
    const viaPost = await server.graphql<{ me: { id: string } }>(user.key, '{ me { id email } }');
    expect(viaPost.data?.me.id).toBe(user.id);
    const viaGet = await fetch(new URL(`/graphql?query=${encodeURIComponent('{ me { id } }')}`, server.url), {
      headers: { authorization: `Bearer ${user.key}`, accept: 'application/json' },
    });
    expect((await viaGet.json()).data.me.id).toBe(user.id);
  });

  it('answers a GraphQL request over 1 MiB with 413 and payload_too_large', async () => {
    const response = await server.request('POST', '/graphql', {
      key: user.key,
      json: { query: '{ me { id } }', variables: { padding: 'x'.repeat(1024 * 1024) } },
    });
    expect(response.status).toBe(413);
    expect(response.body.errors[0].extensions.code).toBe('payload_too_large');
  });

  it('reports syntax errors as bad_request', async () => {
    const result = await server.graphql(user.key, '{ me { ');
    expect(result.errors?.[0]?.extensions?.code).toBe('bad_request');
  });

  it('answers over the graphql-sse single-connection protocol at /graphql/stream', async () => {
    const response = await fetch(new URL('/graphql/stream', server.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${user.key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: '{ me { id } }' }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const text = await response.text();
    expect(text).toContain('event: next');
    expect(text).toContain(user.id);
    expect(text).toContain('event: complete');
  });

  it('answers over Yoga’s SSE transport at /graphql', async () => {
    const response = await fetch(new URL('/graphql', server.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${user.key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: '{ me { id } }' }),
    });
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    expect(await response.text()).toContain(user.id);
  });
});
