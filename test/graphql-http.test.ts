import { describe, expect, it } from 'vitest';
import { serverBed, startTestServer, type TestServer, type TestUser } from './support/server.js';

let server: TestServer;
let user: TestUser;

serverBed((started) => ({ server, user } = started));

type Answer = { status: number; headers: Headers; text: string; body: any };

async function send(path: string, init: RequestInit): Promise<Answer> {
  const response = await fetch(new URL(path, server.url), init);
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: response.status, headers: response.headers, text, body };
}

const postJson = (path: string, payload: unknown, headers: Record<string, string> = {}) =>
  send(path, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json', ...headers }, body: JSON.stringify(payload) });

const getQuery = (path: string, query: string, headers: Record<string, string> = {}) =>
  send(`${path}?query=${encodeURIComponent(query)}`, { method: 'GET', headers: { accept: 'application/json', ...headers } });

/** An HTTP-level refusal: REST's `error`/`message` and GraphQL's `errors[]`, with the same code. */
function expectHttpRefusal(answer: Answer, status: number, code: string) {
  expect(answer.status, answer.text).toBe(status);
  expect(answer.body).toEqual({
    error: code,
    message: expect.any(String),
    errors: [{ message: answer.body.message, extensions: { code } }],
  });
}

/** A GraphQL error answer that says nothing of the server's insides. */
function expectCleanErrors(answer: Answer, status: number, code: string) {
  expect(answer.status, answer.text).toBe(status);
  expect(answer.body.errors.length).toBeGreaterThan(0);
  for (const error of answer.body.errors) {
    expect(error.extensions.code, answer.text).toBe(code);
    expect(Object.keys(error.extensions).every((key) => ['code', 'field', 'retryAfterSeconds'].includes(key)), answer.text).toBe(true);
    expect(Object.keys(error).every((key) => ['message', 'locations', 'path', 'extensions'].includes(key)), answer.text).toBe(true);
  }
  expect(answer.text).not.toMatch(/originalError|stack|SyntaxError|node_modules|\.ts:|\.js:|internal error|prisma/i);
}

describe('GraphQL over HTTP: credentials first', () => {
  const probes = [
    { name: 'a query that needs no scope', query: '{ __typename }' },
    { name: 'introspection', query: '{ __schema { queryType { name } types { name fields { name } } } }' },
    { name: 'a misspelt field (suggestions)', query: '{ mee { id } workspacez { edges { node { id } } } }' },
    { name: 'a syntax error', query: '{ me { ' },
    { name: 'a scoped field', query: '{ me { id } }' },
  ];

  it('answers 401 to a missing, malformed, unknown or revoked credential on POST and GET, before reading the query', async () => {
    const revoked = await server.createKey(user, ['kb:read']);
    const revokedId = (await server.request('GET', '/v1/user/me/api-keys', { key: user.key })).body.find(
      (key: { display_key: string }) => key.display_key.endsWith(revoked.slice(-4)),
    ).id;
    expect((await server.request('DELETE', `/v1/user/me/api-keys/${revokedId}`, { key: user.key })).status).toBe(204);
    const credentials: Record<string, string>[] = [
      {},
      { authorization: '' },
      { authorization: 'Bearer' },
      { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` },
      { authorization: `Bearer sk_${'A'.repeat(40)}` },
      { authorization: `Bearer ${revoked}` },
    ];
    for (const headers of credentials) {
      for (const { name, query } of probes) {
        const viaPost = await postJson('/graphql', { query }, headers);
        expectHttpRefusal(viaPost, 401, 'unauthorized');
        expect(viaPost.text, name).not.toMatch(/Did you mean|__schema|Query|Syntax/);
        expectHttpRefusal(await getQuery('/graphql', query, headers), 401, 'unauthorized');
        expectHttpRefusal(await postJson('/graphql/stream', { query }, { ...headers, accept: 'text/event-stream' }), 401, 'unauthorized');
      }
      // graphql-sse's reservation and Yoga's SSE over GET need the credential as well, and a
      // browser's Accept gets the GraphiQL page at /graphql only.
      expectHttpRefusal(await send('/graphql/stream', { method: 'PUT', headers }), 401, 'unauthorized');
      expectHttpRefusal(await getQuery('/graphql/stream', '{ __typename }', { ...headers, accept: 'text/html' }), 401, 'unauthorized');
      expectHttpRefusal(await getQuery('/graphql', '{ __typename }', { ...headers, accept: 'text/event-stream' }), 401, 'unauthorized');
    }
  });

  it('still serves the GraphiQL page to a browser without a credential, and answers a CORS preflight', async () => {
    const page = await send('/graphql', { method: 'GET', headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.text.toLowerCase()).toContain('graphiql');
    const preflight = await send('/graphql', {
      method: 'OPTIONS',
      headers: { origin: 'https://example.com', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
    });
    expect(preflight.status).toBeLessThan(300);
  });

  it('answers introspection and suggestions to a valid credential', async () => {
    const introspection = await postJson('/graphql', { query: '{ __schema { queryType { name } } }' }, { authorization: `Bearer ${user.key}` });
    expect(introspection.status).toBe(200);
    expect(introspection.body.data.__schema.queryType.name).toBe('Query');
    const suggestion = await postJson('/graphql', { query: '{ mee { id } }' }, { authorization: `Bearer ${user.key}` });
    expect(suggestion.status).toBe(400);
    expect(suggestion.body.errors[0].message).toContain('Did you mean "me"?');
  });
});

describe('GraphQL over HTTP: media types and sizes', () => {
  const auth = () => ({ authorization: `Bearer ${user.key}` });

  it('answers 415 with the error body to anything but JSON or a multipart upload', async () => {
    const body = JSON.stringify({ query: '{ me { id } }' });
    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/graphql',
      'application/graphql+json',
      'application/xml',
      'nonsense',
      undefined,
    ]) {
      const headers: Record<string, string> = { ...auth(), accept: 'application/json' };
      if (type) headers['content-type'] = type;
      const requestBody = type === 'application/x-www-form-urlencoded' ? `query=${encodeURIComponent('{ me { id } }')}` : type === 'application/graphql' ? '{ me { id } }' : body;
      const answer = await send('/graphql', { method: 'POST', headers, body: type === undefined ? new Blob([body]) : requestBody });
      expectHttpRefusal(answer, 415, 'unsupported_media_type');
      expect(answer.body.message).toContain('application/json');
    }
    expectHttpRefusal(
      await send('/graphql/stream', { method: 'POST', headers: { ...auth(), 'content-type': 'text/plain', accept: 'text/event-stream' }, body }),
      415,
      'unsupported_media_type',
    );
    // JSON is UTF-8: a body declared in another charset is refused, as on REST.
    for (const path of ['/graphql', '/graphql/stream']) {
      const answer = await send(path, { method: 'POST', headers: { ...auth(), 'content-type': 'application/json; charset=latin1', accept: 'application/json' }, body });
      expectHttpRefusal(answer, 415, 'unsupported_media_type');
      expect(answer.body.message).toBe('Content-Type\'s charset must be utf-8, as JSON is (got "latin1")');
    }
  });

  it('takes JSON with parameters and in any case, and GraphQL multipart uploads', async () => {
    for (const type of ['application/json; charset=utf-8', 'Application/JSON', 'application/json;charset=UTF-8']) {
      const answer = await send('/graphql', { method: 'POST', headers: { ...auth(), 'content-type': type }, body: JSON.stringify({ query: '{ me { id } }' }) });
      expect(answer.status, `${type}: ${answer.text}`).toBe(200);
      expect(answer.body.data.me.id).toBe(user.id);
    }
    const workspace = await server.request('POST', '/v1/kb/workspaces', { key: user.key, json: { name: 'multipart' } });
    const form = new FormData();
    form.set(
      'operations',
      JSON.stringify({
        query: 'mutation($w: ID!, $f: File!) { uploadDocument(workspaceId: $w, file: $f) { filename status } }',
        variables: { w: workspace.body.id, f: null },
      }),
    );
    form.set('map', JSON.stringify({ 0: ['variables.f'] }));
    form.set('0', new File(['# Upload\n\nover GraphQL'], 'upload.md'));
    const uploaded = await send('/graphql', { method: 'POST', headers: auth(), body: form });
    expect(uploaded.status, uploaded.text).toBe(200);
    expect(uploaded.body.data.uploadDocument).toEqual({ filename: 'upload.md', status: 'queued' });
  });

  it('answers 413 with the error body to a JSON body over 1 MiB, declared or streamed', async () => {
    const big = JSON.stringify({ query: '{ me { id } }', variables: { padding: 'x'.repeat(1024 * 1024) } });
    const declared = await send('/graphql', { method: 'POST', headers: { ...auth(), 'content-type': 'application/json' }, body: big });
    expectHttpRefusal(declared, 413, 'payload_too_large');
    const streamed = await send('/graphql', {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: new ReadableStream({
        start(controller) {
          for (let i = 0; i < 20; i += 1) controller.enqueue(new TextEncoder().encode('x'.repeat(64 * 1024)));
          controller.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expectHttpRefusal(streamed, 413, 'payload_too_large');
  });

  it('answers 413 to a multipart upload over the upload limits, declared or streamed', async () => {
    const small = await startTestServer({ KB_MAX_UPLOAD_FILES: '1', KB_MAX_UPLOAD_BYTES: '1000' });
    try {
      const owner = await small.createUser();
      const workspace = await small.request('POST', '/v1/kb/workspaces', { key: owner.key, json: { name: 'small' } });
      const form = new FormData();
      form.set('operations', JSON.stringify({ query: 'mutation($w: ID!, $f: File!) { uploadDocument(workspaceId: $w, file: $f) { id } }', variables: { w: workspace.body.id, f: null } }));
      form.set('map', JSON.stringify({ 0: ['variables.f'] }));
      form.set('0', new File(['x'.repeat(2 * 1024 * 1024)], 'big.txt'));
      const encoded = new Request('http://localhost/', { method: 'POST', body: form });
      const type = encoded.headers.get('content-type')!;
      const bytes = new Uint8Array(await encoded.arrayBuffer());
      for (const body of [bytes, new ReadableStream({ start: (controller) => (controller.enqueue(bytes), controller.close()) })]) {
        const response = await fetch(new URL('/graphql', small.url), {
          method: 'POST',
          headers: { authorization: `Bearer ${owner.key}`, 'content-type': type },
          body,
          duplex: 'half',
        } as RequestInit);
        const text = await response.text();
        expectHttpRefusal({ status: response.status, headers: response.headers, text, body: JSON.parse(text) }, 413, 'payload_too_large');
      }
      expect(await small.app.db.prisma.document.count({ where: { workspaceId: workspace.body.id } })).toBe(0);
    } finally {
      await small.close();
    }
  });
});

describe('GraphQL over HTTP: errors without internals', () => {
  const auth = () => ({ authorization: `Bearer ${user.key}` });

  it('answers a broken request with 400 bad_request and nothing but code, field and message', async () => {
    const post = (body: string) => send('/graphql', { method: 'POST', headers: { ...auth(), 'content-type': 'application/json', accept: 'application/json' }, body });
    const cases: [string, Promise<Answer>][] = [
      ['invalid JSON', post('{"query": ')],
      ['a body that is not UTF-8', send('/graphql', { method: 'POST', headers: { ...auth(), 'content-type': 'application/json' }, body: Buffer.from([0x7b, 0x22, 0x71, 0xff, 0x22, 0x7d]) })],
      ['JSON that is not an object', post('"{ me { id } }"')],
      ['a batch', post(JSON.stringify([{ query: '{ me { id } }' }, { query: '{ me { id } }' }]))],
      ['a query that is not a string', post(JSON.stringify({ query: 5 }))],
      ['no query', post(JSON.stringify({ variables: {} }))],
      ['an unknown parameter', post(JSON.stringify({ query: '{ me { id } }', debug: true }))],
      ['variables that are not an object', post(JSON.stringify({ query: '{ me { id } }', variables: 'x' }))],
      ['a syntax error', post(JSON.stringify({ query: '{ me { ' }))],
      ['an unknown field', post(JSON.stringify({ query: '{ me { password } }' }))],
      ['a variable of the wrong type', post(JSON.stringify({ query: 'query($n: Int) { workspaces(first: $n) { edges { node { id } } } }', variables: { n: 'many' } }))],
      ['a missing variable', post(JSON.stringify({ query: 'query($id: ID!) { workspace(id: $id) { id } }' }))],
      ['an unknown operation name', post(JSON.stringify({ query: 'query A { me { id } }', operationName: 'B' }))],
      ['an unknown persisted operation', post(JSON.stringify({ extensions: { persistedQuery: { version: 1, sha256Hash: 'f'.repeat(64) } } }))],
      ['invalid variables JSON in GET', send(`/graphql?query=${encodeURIComponent('{ me { id } }')}&variables=%7B`, { headers: { ...auth(), accept: 'application/json' } })],
      ['invalid extensions JSON in GET', send(`/graphql?query=${encodeURIComponent('{ me { id } }')}&extensions=nope`, { headers: { ...auth(), accept: 'application/json' } })],
    ];
    for (const [name, pending] of cases) {
      const answer = await pending;
      try {
        expectCleanErrors(answer, 400, 'bad_request');
      } catch (error) {
        throw new Error(`${name}: ${(error as Error).message}`);
      }
    }
    const getVariables = await send(`/graphql?query=${encodeURIComponent('{ me { id } }')}&variables=%7B`, { headers: { ...auth(), accept: 'application/json' } });
    expect(getVariables.body.errors[0]).toEqual({ message: 'variables: must be a JSON object', extensions: { code: 'bad_request', field: 'variables' } });
  });

  it('answers refusals of the whole operation with their status on /graphql, for either Accept', async () => {
    const kbOnly = await server.createKey(user, ['kb:read']);
    for (const accept of ['application/json', 'application/graphql-response+json']) {
      const forbidden = await postJson('/graphql', { query: '{ me { id } }' }, { authorization: `Bearer ${kbOnly}`, accept });
      expectCleanErrors(forbidden, 403, 'forbidden');
      const invalid = await postJson('/graphql', { query: '{ me { nope } }' }, { ...auth(), accept });
      expectCleanErrors(invalid, 400, 'bad_request');
    }
    // Once execution has started, errors come beside data with 200, as GraphQL has it.
    const missing = await postJson('/graphql', { query: '{ workspace(id: "00000000-0000-4000-8000-000000000000") { id } }' }, auth());
    expect(missing.status).toBe(200);
    expect(missing.body.errors[0].extensions).toEqual({ code: 'not_found' });
  });

  it('keeps the REST order of errors: 401, then 403, then 400', async () => {
    const kbOnly = await server.createKey(user, ['kb:read']);
    const broken = { body: '{"name":', headers: { 'content-type': 'application/json' } };
    expect((await server.request('POST', '/v1/kb/workspaces', broken)).status).toBe(401);
    expect((await server.request('POST', '/v1/kb/workspaces', { ...broken, key: `sk_${'A'.repeat(40)}` })).status).toBe(401);
    expect((await server.request('POST', '/v1/kb/workspaces', { ...broken, key: kbOnly })).status).toBe(403);
    expect((await server.request('POST', '/v1/kb/workspaces', { ...broken, key: user.key })).status).toBe(400);
    expect((await server.request('GET', '/v1/kb/workspaces/00000000-0000-4000-8000-000000000000', { key: user.key })).status).toBe(404);
  });
});
