import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { graphqlLimits } from '../src/graphql/limits.js';
import { startTestServer, type TestServer, type TestUser } from './support/server.js';
import { waitForDocuments } from './support/documents.js';
import { createWorkspace } from './support/fixtures.js';

let server: TestServer;
let user: TestUser;
let workspaceId: string;
let documentIds: string[];

type RawResult = { status: number; headers: Headers; body: any };

/** A GraphQL request whose status and headers matter. */
async function post(key: string, query: string, variables?: unknown): Promise<RawResult> {
  const response = await server.request('POST', '/graphql', {
    key,
    json: { query, variables },
    headers: { accept: 'application/graphql-response+json, application/json' },
  });
  return { status: response.status, headers: response.headers, body: response.body };
}

function expectRefused(result: RawResult, status: number, code: string, message?: RegExp) {
  expect(result.status, JSON.stringify(result.body)).toBe(status);
  expect(result.body.data).toBeUndefined();
  expect(result.body.errors).toHaveLength(1);
  expect(result.body.errors[0].extensions.code).toBe(code);
  if (message) expect(result.body.errors[0].message).toMatch(message);
  return result.body.errors[0] as { message: string; extensions: Record<string, unknown> };
}

beforeAll(async () => {
  server = await startTestServer();
  user = await server.createUser();
  workspaceId = (await createWorkspace(server, user.key, 'limits')).id;
  documentIds = [];
  for (let i = 0; i < 5; i += 1) {
    const uploaded = await server.request('POST', `/v1/kb/workspaces/${workspaceId}/documents`, {
      key: user.key,
      json: { filename: `note-${i}.md`, content: `# Note ${i}\n\nSome text about item ${i}. Another sentence.` },
    });
    documentIds.push(uploaded.body[0].id);
  }
  await waitForDocuments(server, user.key, documentIds);
});
afterAll(() => server.close());

/** `document { workspace { documents(first) { edges { node { ... } } } } }`, `levels` times over. */
function nestedDocuments(levels: number, first: string) {
  let selection = 'id';
  for (let i = 0; i < levels; i += 1) selection = `workspace { documents(first: ${first}) { edges { node { ${selection} } } } }`;
  return selection;
}

describe('GraphQL cost control', () => {
  it('refuses connections nested through their first before running anything, with the cost and the limit', async () => {
    const started = Date.now();
    const refused = await post(user.key, `query($id: ID!) { document(id: $id) { ${nestedDocuments(2, '1000')} } }`, { id: documentIds[0] });
    const error = expectRefused(refused, 400, 'bad_request', /^query cost (\d+) exceeds the limit of 25000$/);
    expect(Number(/cost (\d+)/.exec(error.message)![1])).toBeGreaterThan(1_000_000);
    expect(Date.now() - started).toBeLessThan(5_000);

    // `first` from a variable counts the same; a small page of the same shape is answered.
    const viaVariable = await post(user.key, `query($id: ID!, $n: Int) { document(id: $id) { ${nestedDocuments(2, '$n')} } }`, {
      id: documentIds[0],
      n: 1000,
    });
    expectRefused(viaVariable, 400, 'bad_request', /^query cost \d+ exceeds the limit of 25000$/);
    const small = await post(user.key, `query($id: ID!, $n: Int) { document(id: $id) { ${nestedDocuments(2, '$n')} } }`, {
      id: documentIds[0],
      n: 5,
    });
    expect(small.status).toBe(200);
    expect(small.body.errors).toBeUndefined();
    expect(small.body.data.document.workspace.documents.edges).toHaveLength(5);
  });

  it('refuses the review’s attack, nested twice and three times, at once, and stays up', async () => {
    for (const levels of [2, 3]) {
      const query = `query($id: ID!) { document(id: $id) { ${nestedDocuments(levels, '1000')} } }`;
      const started = Date.now();
      const refused = await post(user.key, query, { id: documentIds[0] });
      expect(refused.status).toBe(400);
      expect(refused.body.errors[0].message).toMatch(/^query (depth|cost) \d+ exceeds the limit of \d+$/);
      expect(Date.now() - started).toBeLessThan(5_000);
    }
    expect((await server.request('GET', '/healthz')).status).toBe(200);
  });

  it('refuses a query deeper than 10, naming its depth', async () => {
    const query = `query($id: ID!) { document(id: $id) { ${nestedDocuments(3, '1')} } }`;
    expectRefused(await post(user.key, query, { id: documentIds[0] }), 400, 'bad_request', /^query depth 14 exceeds the limit of 10$/);
    // Depth 10 is fine.
    const ten = await post(user.key, `query($id: ID!) { document(id: $id) { ${nestedDocuments(2, '1')} } }`, { id: documentIds[0] });
    expect(ten.status).toBe(200);
    expect(ten.body.errors).toBeUndefined();
  });

  it('refuses more than 30 aliases, fragments included, and runs none of them', async () => {
    const aliased = (count: number, field: string, prefix = 'a') => Array.from({ length: count }, (_, i) => `${prefix}${i}: ${field}`).join(' ');
    expectRefused(await post(user.key, `{ ${aliased(31, 'me { id }')} }`), 400, 'bad_request', /^query alias count 31 exceeds the limit of 30$/);
    expectRefused(
      await post(user.key, `{ ...A ...B } fragment A on Query { ${aliased(16, 'me { id }')} } fragment B on Query { ${aliased(16, 'me { email }', 'b')} }`),
      400,
      'bad_request',
      /^query alias count 32 exceeds the limit of 30$/,
    );
    const thirty = await post(user.key, `{ ${aliased(30, 'me { id }')} }`);
    expect(thirty.status).toBe(200);

    // The review's attack: aliased createApiKey. No key is made; 250 of them are too many tokens as well.
    const before = await server.app.db.prisma.apiKey.count({ where: { userId: user.id } });
    const attack = (count: number) =>
      `mutation($input: CreateApiKeyInput!) { ${aliased(count, 'createApiKey(input: $input) { __typename }', 'k')} }`;
    const input = { name: 'alias attack', scopes: ['kb:read'] };
    expectRefused(await post(user.key, attack(31), { input }), 400, 'bad_request', /^query alias count 31 exceeds the limit of 30$/);
    expectRefused(await post(user.key, attack(250), { input }), 400, 'bad_request', /^query (alias|token) count (250 )?exceeds the limit of \d+$/);
    expect(await server.app.db.prisma.apiKey.count({ where: { userId: user.id } })).toBe(before);
  });

  it('refuses a document of more than 2,000 tokens while parsing it', async () => {
    expectRefused(await post(user.key, `{ me { ${'id '.repeat(2_100)} } }`), 400, 'bad_request', /^query token count exceeds the limit of 2000$/);
    // 1,9xx tokens are fine (repeating one field that often would trip GraphQL's own merge budget).
    const scopes = Array.from({ length: 1_950 }, () => '"kb:read"').join(' ');
    const long = await post(user.key, `mutation { createApiKey(input: { name: "long", scopes: [${scopes}] }) { __typename } }`);
    expect(long.status, JSON.stringify(long.body)).toBe(200);
    expect(long.body.data.createApiKey.__typename).toBe('NewApiKey');
  });

  it('refuses first or last over 1,000 or below 0 on every connection, literal or variable, naming the argument', async () => {
    const documentId = documentIds[0]!;
    // VARS: the variables beside $n, ARGS: the page arguments under test.
    const connections: [string, Record<string, unknown>, string][] = [
      ['query(VARS) { apiKeys(ARGS) { edges { node { id } } } }', {}, 'apiKeys'],
      ['query(VARS) { workspaces(ARGS) { edges { node { id } } } }', {}, 'workspaces'],
      ['query(VARS) { chatSessions(ARGS) { edges { node { id } } } }', {}, 'chatSessions'],
      ['query(VARS $w: ID!) { documents(workspaceId: $w, ARGS) { edges { node { id } } } }', { w: workspaceId }, 'documents'],
      ['query(VARS $d: ID!, $w: ID!) { documentChunks(id: $d, workspaceId: $w, ARGS) { edges { node { chunkIndex } } } }', { d: documentId, w: workspaceId }, 'documentChunks'],
      ['query(VARS $w: ID!) { workspace(id: $w) { documents(ARGS) { edges { node { id } } } } }', { w: workspaceId }, 'Workspace.documents'],
      ['query(VARS $d: ID!) { document(id: $d) { chunks(ARGS) { edges { node { chunkIndex } } } } }', { d: documentId }, 'Document.chunks'],
      [
        'query(VARS) { workspaces(first: 1) { edges { node { documents(first: 1) { edges { node { chunks(ARGS) { edges { node { chunkIndex } } } } } } } } } }',
        {},
        'nested Document.chunks',
      ],
    ];
    for (const [template, variables, name] of connections) {
      const run = (args: string, n?: number) => {
        const query = template.replace('ARGS', args).replace('VARS', n === undefined ? '' : '$n: Int,').replace('query() ', 'query ');
        return post(user.key, query, { ...variables, n });
      };
      const refusals: [string, number | undefined, RegExp][] = [
        ['first: 5000', undefined, /^first: must be at most 1000$/],
        ['first: $n', 1001, /^first: must be at most 1000$/],
        ['first: -1', undefined, /^first: must be at least 0$/],
        ['first: $n', -5, /^first: must be at least 0$/],
        ['last: 5000', undefined, /^last: must be at most 1000$/],
        ['last: $n', 1001, /^last: must be at most 1000$/],
      ];
      for (const [args, n, message] of refusals) {
        const error = expectRefused(await run(args, n), 400, 'bad_request', message);
        expect(error.extensions.field, `${name} ${args}`).toBe(message.source.slice(1, message.source.indexOf(':')));
      }
      for (const [args, n] of [['first: 1000', undefined], ['first: $n', 1000], ['first: 0', undefined]] as const) {
        const answered = await run(args, n);
        expect(answered.status, `${name} ${args}: ${JSON.stringify(answered.body)}`).toBe(200);
        expect(answered.body.errors, `${name} ${args}`).toBeUndefined();
      }
    }
  });

  it('answers every REST list and document tool at its largest page', async () => {
    const documentId = documentIds[0]!;
    const paths = [
      '/v1/user/me',
      '/v1/user/me/credits',
      '/v1/user/me/api-keys?limit=1000',
      '/v1/kb/workspaces?limit=1000',
      `/v1/kb/workspaces/${workspaceId}`,
      `/v1/kb/workspaces/${workspaceId}/stats`,
      `/v1/kb/workspaces/${workspaceId}/scan`,
      `/v1/kb/workspaces/${workspaceId}/documents?limit=1000`,
      `/v1/kb/documents/${documentId}`,
      `/v1/kb/documents/${documentId}/preview?workspace_id=${workspaceId}&chunks=1000`,
      `/v1/kb/documents/${documentId}/chunks?workspace_id=${workspaceId}&limit=1000`,
      `/v1/kb/documents/${documentId}/chunks/0/context?workspace_id=${workspaceId}&before=100&after=100`,
      `/v1/kb/documents/${documentId}/grep?workspace_id=${workspaceId}&pattern=e`,
      '/v1/chat/sessions?limit=1000',
    ];
    for (const path of paths) {
      const response = await server.request('GET', path, { key: user.key });
      expect(response.status, `${path}: ${response.text}`).toBe(200);
    }
    // A client page of 1,000 documents with every field and its workspace.
    const page = await post(
      user.key,
      `query($w: ID!) { documents(workspaceId: $w, first: 1000) { pageInfo { hasNextPage endCursor } edges { cursor node {
        id workspaceId filename contentType sizeBytes sha256 status error pageCount chunkCount metadata createdAt updatedAt workspace { id name } } } } }`,
      { w: workspaceId },
    );
    expect(page.status).toBe(200);
    expect(page.body.data.documents.edges).toHaveLength(5);
    expect(graphqlLimits.maxCost).toBe(25_000);
  });
});

describe('rate limits over GraphQL', () => {
  const createKeys = (count: number, prefix: string, extra = '') =>
    Array.from({ length: count }, (_, i) => `${prefix}${i}: createApiKey(input: { name: "${prefix}${i}" scopes: ["kb:read"] }) ${extra}{ __typename }`).join(' ');
  const keyCount = (userId: string) => server.app.db.prisma.apiKey.count({ where: { userId } });

  it('counts every call of a limited field, aliases and fragments included, and refuses an operation that does not fit', async () => {
    const caller = await server.createUser();
    // 20 calls, 10 of them through a fragment: 20 keys, 20 of the 100.
    const first = await post(caller.key, `mutation { ...More ${createKeys(10, 'a')} } fragment More on Mutation { ${createKeys(10, 'b')} }`);
    expect(first.status).toBe(200);
    expect(await keyCount(caller.id)).toBe(21);

    // 3 x 25 aliased lists: 95 used.
    const lists = Array.from({ length: 25 }, (_, i) => `l${i}: apiKeys(first: 1) { edges { node { id } } }`).join(' ');
    for (let i = 0; i < 3; i += 1) expect((await post(caller.key, `{ ${lists} }`)).status).toBe(200);

    // 6 calls do not fit in the 5 left: 429 with Retry-After, and none of them runs.
    const refused = await post(caller.key, `mutation { ${createKeys(6, 'c')} }`);
    const error = expectRefused(refused, 429, 'rate_limited', /^rate limit of 100 requests per minute exceeded \(this operation makes 6 calls, 5 remain\); retry in \d+ s$/);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(error.extensions.retryAfterSeconds).toBe(Number(refused.headers.get('retry-after')));
    expect(await keyCount(caller.id)).toBe(21);

    // A refused operation used nothing: 5 still fit (a skipped field is not a call), then none.
    const five = await post(caller.key, `mutation { ${createKeys(5, 'd')} ${createKeys(3, 'e', '@skip(if: true) ')} }`);
    expect(five.status).toBe(200);
    expect(await keyCount(caller.id)).toBe(26);
    expectRefused(await post(caller.key, `mutation { ${createKeys(1, 'f')} }`), 429, 'rate_limited');
    const rest = await server.request('GET', '/v1/user/me/api-keys', { key: caller.key });
    expect(rest.status).toBe(429);
  });
});
