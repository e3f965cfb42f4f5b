import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectProtocol, streamAgent } from './support/agent.js';
import { upload, waitForDocuments } from './support/documents.js';
import { expectError, startTestServer, type TestResponse, type TestServer, type TestUser } from './support/server.js';

// API keys restricted to workspaces (docs/api.md, "Keys restricted to workspaces"), through real
// HTTP and real GraphQL against a real server: every surface answers a restricted key exactly as
// it answers for a workspace that does not exist, outside the key's workspaces, and as usual inside.

const jwtSecret = 'restricted-keys-test-secret-that-is-long-enough';
const allScopes = ['user:read', 'user:write', 'kb:read', 'kb:write', 'chat:read', 'chat:write'];

let server: TestServer;
let owner: TestUser;
let stranger: TestUser;
/** The owner's workspaces: A and B hold documents; C is empty. */
let a: string;
let b: string;
let c: string;
let strangerWorkspace: string;
let docA: string;
let docB: string;
/** Restricted to A, and to A and B; every scope. */
let keyA: string;
let keyAId: string;
let keyAB: string;
let keyABId: string;

const secretOfB = 'The vault of workspace Bravo opens with the phrase periwinkle-giraffe-4417.';
const factOfA = 'The lighthouse of workspace Alpha was painted crimson in 1987 by Oskar Lindqvist.';

const rest = (method: string, path: string, key: string, json?: unknown) => server.request(method, path, { key, ...(json !== undefined && { json }) });

async function createKey(key: string, body: Record<string, unknown>): Promise<TestResponse> {
  return rest('POST', '/v1/user/me/api-keys', key, { name: 'restricted', scopes: allScopes, ...body });
}

async function newWorkspace(key: string, name: string): Promise<string> {
  const created = await rest('POST', '/v1/kb/workspaces', key, { name });
  expect(created.status, created.text).toBe(201);
  return created.body.id;
}

/** A 404 exactly as a workspace that does not exist gets it: same status, code and wording. */
function expectWorkspaceHidden(response: TestResponse, id: string) {
  const body = expectError(response, 404, 'not_found');
  expect(body).toEqual({ error: 'not_found', message: `workspace ${id} not found` });
}

const jwt = (userId: string, scope = allScopes.join(' ')) =>
  new SignJWT({ scope }).setProtectedHeader({ alg: 'HS256' }).setSubject(userId).setIssuedAt().setExpirationTime('10m').sign(new TextEncoder().encode(jwtSecret));

beforeAll(async () => {
  server = await startTestServer({ KB_JWT_SECRET: jwtSecret });
  owner = await server.createUser({ credits: 1000 });
  stranger = await server.createUser();
  a = await newWorkspace(owner.key, 'Alpha');
  b = await newWorkspace(owner.key, 'Bravo');
  c = await newWorkspace(owner.key, 'Charlie');
  strangerWorkspace = await newWorkspace(stranger.key, 'Alpha');
  const uploadedA = await upload(server, owner.key, a, [{ name: 'alpha.txt', bytes: factOfA }]);
  const uploadedB = await upload(server, owner.key, b, [{ name: 'bravo.txt', bytes: secretOfB }]);
  docA = uploadedA.body[0].id;
  docB = uploadedB.body[0].id;
  for (const document of await waitForDocuments(server, owner.key, [docA, docB])) expect(document.status, document.error ?? '').toBe('ready');
  const createdA = await createKey(owner.key, { name: 'only alpha', workspace_ids: [a] });
  const createdAB = await createKey(owner.key, { name: 'alpha and bravo', workspace_ids: [a, b] });
  expect(createdA.status, createdA.text).toBe(201);
  expect(createdAB.status, createdAB.text).toBe(201);
  ({ raw_key: keyA, id: keyAId } = createdA.body);
  ({ raw_key: keyAB, id: keyABId } = createdAB.body);
}, 300_000);

afterAll(() => server?.close());

describe('creating a key restricted to workspaces', () => {
  it('REST: 201 with workspace_ids (lower-cased, duplicates collapsed, in the order given); null for an unrestricted key; listed the same way', async () => {
    const created = await createKey(owner.key, { name: 'two', workspace_ids: [b, a.toUpperCase(), b, a] });
    expect(created.status, created.text).toBe(201);
    expect(Object.keys(created.body)).toEqual(['id', 'name', 'display_key', 'raw_key', 'scopes', 'workspace_ids']);
    expect(created.body.workspace_ids).toEqual([b, a]);
    const unrestricted = await createKey(owner.key, { name: 'all' });
    expect(unrestricted.body.workspace_ids).toBeNull();
    const explicitNull = await createKey(owner.key, { name: 'all again', workspace_ids: null });
    expect(explicitNull.status).toBe(201);
    expect(explicitNull.body.workspace_ids).toBeNull();

    const listed = await rest('GET', '/v1/user/me/api-keys', owner.key);
    expect(listed.status).toBe(200);
    const byId = new Map(listed.body.map((key: { id: string }) => [key.id, key]));
    expect(byId.get(created.body.id)).toMatchObject({ workspace_ids: [b, a] });
    expect(byId.get(unrestricted.body.id)).toMatchObject({ workspace_ids: null });
    expect(byId.get(keyAId)).toMatchObject({ workspace_ids: [a] });
    // The key every user starts with (made by `kb users create`) is unrestricted and untouched.
    const first = listed.body.at(-1);
    expect(first).toMatchObject({ name: 'default', scopes: allScopes, workspace_ids: null });
  });

  it('GraphQL: createApiKey takes workspaceIds; NewApiKey and ApiKey show them, null when unrestricted', async () => {
    const created = await server.graphql<{ createApiKey: { __typename: string; id: string; workspaceIds: string[] | null } }>(
      owner.key,
      `mutation($ids: [ID!]) { createApiKey(input: { name: "gql", scopes: ["kb:read"], workspaceIds: $ids }) { __typename ... on NewApiKey { id workspaceIds } } }`,
      { ids: [c, c] },
    );
    expect(created.data?.createApiKey).toMatchObject({ __typename: 'NewApiKey', workspaceIds: [c] });
    const listed = await server.graphql<{ apiKeys: { edges: { node: { id: string; workspaceIds: string[] | null } }[] } }>(
      owner.key,
      '{ apiKeys(first: 1000) { edges { node { id workspaceIds } } } }',
    );
    const nodes = listed.data!.apiKeys.edges.map((edge) => edge.node);
    expect(nodes.find((node) => node.id === created.data!.createApiKey.id)?.workspaceIds).toEqual([c]);
    expect(nodes.find((node) => node.id === keyABId)?.workspaceIds).toEqual([a, b]);
    expect(nodes.some((node) => node.workspaceIds === null)).toBe(true);
  });

  it('validates workspace_ids: 400 for an empty list, a lone value, non-strings and too many; 404 naming a workspace the caller cannot see; nothing is created', async () => {
    const before = (await rest('GET', '/v1/user/me/api-keys', owner.key)).body.length;
    const empty = expectError(await createKey(owner.key, { workspace_ids: [] }), 400, 'bad_request');
    expect(empty.message).toBe('workspace_ids: must name at least one workspace; leave the field out for a key that sees every workspace');
    expect(expectError(await createKey(owner.key, { workspace_ids: a }), 400, 'bad_request').message).toMatch(/^workspace_ids: /);
    expect(expectError(await createKey(owner.key, { workspace_ids: [7] }), 400, 'bad_request').message).toMatch(/^workspace_ids: /);
    const tooMany = Array.from({ length: 101 }, () => randomUUID());
    expect(expectError(await createKey(owner.key, { workspace_ids: tooMany }), 400, 'bad_request').message).toBe('workspace_ids: must name at most 100 workspaces');
    const missing = randomUUID();
    for (const [ids, named] of [
      [[missing], missing],
      [[a, strangerWorkspace], strangerWorkspace],
      [['not-a-uuid'], 'not-a-uuid'],
    ] as const) {
      expectWorkspaceHidden(await createKey(owner.key, { workspace_ids: ids }), named);
    }
    expect((await rest('GET', '/v1/user/me/api-keys', owner.key)).body.length).toBe(before);

    // Duplicates collapse before the bound: 150 copies of one id are one workspace.
    const repeated = await createKey(owner.key, { name: 'repeated', workspace_ids: Array.from({ length: 150 }, () => a) });
    expect(repeated.status, repeated.text).toBe(201);
    expect(repeated.body.workspace_ids).toEqual([a]);

    const graphEmpty = await server.graphql(owner.key, 'mutation { createApiKey(input: { name: "x", scopes: ["kb:read"], workspaceIds: [] }) { __typename } }');
    expect(graphEmpty.errors?.[0]?.extensions).toMatchObject({ code: 'bad_request', field: 'workspaceIds' });
  });
});

describe('workspaces through a restricted key', () => {
  it('lists only its workspaces (REST and GraphQL), and an unrestricted key of the same user still lists all', async () => {
    const listed = await rest('GET', '/v1/kb/workspaces', keyA);
    expect(listed.status).toBe(200);
    expect(listed.body.map((workspace: { id: string }) => workspace.id)).toEqual([a]);
    const both = await rest('GET', '/v1/kb/workspaces', keyAB);
    expect(both.body.map((workspace: { id: string }) => workspace.id).sort()).toEqual([a, b].sort());
    const all = await rest('GET', '/v1/kb/workspaces', owner.key);
    expect(all.body.map((workspace: { id: string }) => workspace.id).sort()).toEqual([a, b, c].sort());
    const graph = await server.graphql<{ workspaces: { edges: { node: { id: string } }[] } }>(keyA, '{ workspaces { edges { node { id } } } }');
    expect(graph.data!.workspaces.edges.map((edge) => edge.node.id)).toEqual([a]);
  });

  it('gets, renames, reads stats and scan of its workspace (200) and of no other (404, worded as for a missing one)', async () => {
    for (const suffix of ['', '/stats', '/scan']) {
      expect((await rest('GET', `/v1/kb/workspaces/${a}${suffix}`, keyA)).status).toBe(200);
      for (const hidden of [b, c, strangerWorkspace]) expectWorkspaceHidden(await rest('GET', `/v1/kb/workspaces/${hidden}${suffix}`, keyA), hidden);
      const nowhere = randomUUID();
      expectWorkspaceHidden(await rest('GET', `/v1/kb/workspaces/${nowhere}${suffix}`, keyA), nowhere);
    }
    expect((await rest('GET', `/v1/kb/workspaces/${b}/stats`, keyAB)).body).toMatchObject({ workspace_id: b, document_count: 1 });
    expectWorkspaceHidden(await rest('PATCH', `/v1/kb/workspaces/${b}`, keyA, { name: 'Taken over' }), b);
    const renamed = await rest('PATCH', `/v1/kb/workspaces/${a}`, keyA, { name: 'Alpha (renamed)' });
    expect(renamed.status).toBe(200);
    expect((await rest('PATCH', `/v1/kb/workspaces/${a}`, keyA, { name: 'Alpha' })).status).toBe(200);
    expect((await rest('GET', `/v1/kb/workspaces/${b}`, owner.key)).body.name).toBe('Bravo');
  });

  it('reads ids in any case, and no spelling of another id gets past the restriction', async () => {
    expect((await rest('GET', `/v1/kb/workspaces/${a.toUpperCase()}`, keyA)).status).toBe(200);
    for (const spelling of [b.toUpperCase(), `{${b}}`, b.replaceAll('-', ''), ` ${b}`, `${b}%00`]) {
      expectError(await rest('GET', `/v1/kb/workspaces/${encodeURIComponent(spelling)}`, keyA), 404, 'not_found');
    }
  });

  it('cannot delete another workspace: 404, and it is still there with its documents', async () => {
    expectWorkspaceHidden(await rest('DELETE', `/v1/kb/workspaces/${b}`, keyA), b);
    expectWorkspaceHidden(await rest('DELETE', `/v1/kb/workspaces/${strangerWorkspace}`, keyA), strangerWorkspace);
    expect((await rest('GET', `/v1/kb/workspaces/${b}/documents`, owner.key)).body.map((document: { id: string }) => document.id)).toEqual([docB]);
    expect((await rest('GET', `/v1/kb/workspaces/${strangerWorkspace}`, stranger.key)).status).toBe(200);
  });

  it('cannot create a workspace: 403 saying why, before the body is even looked at (REST and GraphQL)', async () => {
    for (const body of [{ name: 'Delta' }, { name: '' }, { nope: 1 }]) {
      const refused = expectError(await rest('POST', '/v1/kb/workspaces', keyA, body), 403, 'forbidden');
      expect(refused.message).toBe('this API key is restricted to workspaces and cannot create a workspace; use an unrestricted key');
    }
    const graph = await server.graphql(keyAB, 'mutation { createWorkspace(input: { name: "Delta" }) { __typename } }');
    expect(graph.status).toBe(403);
    expect(graph.errors?.[0]?.extensions?.code).toBe('forbidden');
    expect((await rest('GET', '/v1/kb/workspaces', owner.key)).body.map((workspace: { name: string }) => workspace.name)).not.toContain('Delta');
  });

  it('GraphQL aliases cannot reach past the restriction: the visible field answers, the hidden one is not_found and nothing of it is sent', async () => {
    const response = await server.request('POST', '/graphql', {
      key: keyA,
      json: {
        query: `query($a: ID!, $b: ID!, $s: ID!) {
          mine: workspace(id: $a) { id name documents { edges { node { filename } } } }
          theirs: workspace(id: $b) { id name documents { edges { node { filename } } } }
          stranger: workspace(id: $s) { id name }
        }`,
        variables: { a, b, s: strangerWorkspace },
      },
    });
    expect(response.status).toBe(200);
    // graphql-js reports the first of the hidden fields: its null empties `data`, the rest are not sent.
    const codes = response.body.errors.map((error: { extensions: { code: string } }) => error.extensions.code);
    expect(codes.length).toBeGreaterThan(0);
    expect(new Set(codes)).toEqual(new Set(['not_found']));
    expect(response.text).not.toContain('Bravo');
    expect(response.text).not.toContain('bravo.txt');
    // Every Query field is non-null: a hidden one empties the whole answer, the visible one included.
    expect(response.body.data).toBeNull();
    // Mutations answer errors as data: one alias is renamed, the hidden one is a not_found result and unchanged.
    const renamed = await server.graphql<{ mine: { __typename: string }; theirs: { __typename: string; code: string; message: string } }>(
      keyA,
      `mutation { mine: updateWorkspace(id: "${a}", input: { name: "Alpha" }) { __typename } theirs: updateWorkspace(id: "${b}", input: { name: "Mine now" }) { __typename ... on AppError { code message } } }`,
    );
    expect(renamed.data).toEqual({ mine: { __typename: 'Workspace' }, theirs: { __typename: 'AppError', code: 'not_found', message: `workspace ${b} not found` } });
    expect((await rest('GET', `/v1/kb/workspaces/${b}`, owner.key)).body.name).toBe('Bravo');
    const alone = await server.graphql<{ workspace: { documents: { edges: { node: { filename: string } }[] } } }>(
      keyA,
      `{ workspace(id: "${a}") { documents { edges { node { filename workspace { id } } } } } }`,
    );
    expect(alone.data!.workspace.documents.edges.map((edge) => edge.node.filename)).toEqual(['alpha.txt']);
  });
});

describe('documents through a restricted key', () => {
  const documentPaths = (document: string, workspace: string) => [
    `/v1/kb/documents/${document}/preview?workspace_id=${workspace}`,
    `/v1/kb/documents/${document}/chunks?workspace_id=${workspace}`,
    `/v1/kb/documents/${document}/chunks/0/context?workspace_id=${workspace}`,
    `/v1/kb/documents/${document}/grep?workspace_id=${workspace}&pattern=workspace`,
    `/v1/kb/documents/${document}/file?workspace_id=${workspace}`,
  ];

  it('reads documents of its workspace (200) and of no other (404 as for a missing document)', async () => {
    expect((await rest('GET', `/v1/kb/workspaces/${a}/documents`, keyA)).body.map((document: { id: string }) => document.id)).toEqual([docA]);
    expectWorkspaceHidden(await rest('GET', `/v1/kb/workspaces/${b}/documents`, keyA), b);
    expect((await rest('GET', `/v1/kb/documents/${docA}`, keyA)).status).toBe(200);
    const hidden = expectError(await rest('GET', `/v1/kb/documents/${docB}`, keyA), 404, 'not_found');
    const missingId = randomUUID();
    const missing = expectError(await rest('GET', `/v1/kb/documents/${missingId}`, keyA), 404, 'not_found');
    expect(hidden.message).toBe(`document ${docB} not found`);
    expect(missing.message).toBe(`document ${missingId} not found`);
    for (const path of documentPaths(docA, a)) {
      const response = await rest('GET', path, keyA);
      expect(response.status, `${path}: ${response.text}`).toBe(200);
    }
    for (const [document, workspace] of [
      [docB, b],
      [docB, a],
      [docA, b],
    ] as const) {
      for (const path of documentPaths(document, workspace)) {
        const response = await rest('GET', path, keyA);
        expect(expectError(response, 404, 'not_found').message, path).toBe(`document ${document} not found`);
        expect(response.text).not.toContain('periwinkle');
      }
    }
    // The key restricted to both reads either.
    for (const path of documentPaths(docB, b)) expect((await rest('GET', path, keyAB)).status).toBe(200);
  });

  it('GraphQL document, documents, documentPreview, documentChunks, chunkContext and grepDocument hide the other workspace', async () => {
    const fields = [
      `document(id: "${docB}") { id }`,
      `documents(workspaceId: "${b}") { edges { node { id } } }`,
      `documentPreview(id: "${docB}", workspaceId: "${b}") { content }`,
      `documentChunks(id: "${docB}", workspaceId: "${b}") { edges { node { content } } }`,
      `chunkContext(documentId: "${docB}", workspaceId: "${b}", chunkIndex: 0) { chunks { content } }`,
      `grepDocument(documentId: "${docB}", workspaceId: "${b}", pattern: "vault") { totalMatches }`,
      `documentFile(id: "${docB}", workspaceId: "${b}") { base64 }`,
    ];
    for (const field of fields) {
      const response = await server.request('POST', '/graphql', { key: keyA, json: { query: `{ ${field} }` } });
      expect(response.body.errors?.[0]?.extensions?.code, field).toBe('not_found');
      expect(response.text).not.toContain('periwinkle');
    }
    const allowed = await server.graphql<{ grepDocument: { totalMatches: number } }>(
      keyA,
      `{ grepDocument(documentId: "${docA}", workspaceId: "${a}", pattern: "lighthouse") { totalMatches } }`,
    );
    expect(allowed.data!.grepDocument.totalMatches).toBe(1);
  });

  it('uploads into its workspace (202) and not into another (404, nothing stored), and deletes only there', async () => {
    const before = (await rest('GET', `/v1/kb/workspaces/${b}/documents`, owner.key)).body.length;
    expectWorkspaceHidden(await rest('POST', `/v1/kb/workspaces/${b}/documents`, keyA, { filename: 'planted.txt', content: 'planted by a restricted key' }), b);
    const multipart = await upload(server, keyA, b, [{ name: 'planted.txt', bytes: 'planted by a restricted key' }]);
    expect(multipart.status).toBe(404);
    expect((await rest('GET', `/v1/kb/workspaces/${b}/documents`, owner.key)).body.length).toBe(before);

    const accepted = await rest('POST', `/v1/kb/workspaces/${a}/documents`, keyA, { filename: 'note.txt', content: 'A short note of the Alpha team.' });
    expect(accepted.status, accepted.text).toBe(202);
    const noteId = accepted.body[0].id;
    const graphUpload = await server.graphql(keyA, `mutation { deleteDocument(id: "${docB}") { __typename ... on AppError { code } } }`);
    expect(graphUpload.data).toEqual({ deleteDocument: { __typename: 'AppError', code: 'not_found' } });
    expect(expectError(await rest('DELETE', `/v1/kb/documents/${docB}`, keyA), 404, 'not_found').message).toBe(`document ${docB} not found`);
    expect(expectError(await rest('POST', `/v1/kb/documents/${docB}/retry?workspace_id=${b}`, keyA), 404, 'not_found').message).toBe(`document ${docB} not found`);
    const graphRetry = await server.graphql(keyA, `mutation { retryDocument(id: "${docB}", workspaceId: "${b}") { __typename ... on AppError { code } } }`);
    expect(graphRetry.data).toEqual({ retryDocument: { __typename: 'AppError', code: 'not_found' } });
    expect(expectError(await rest('PATCH', `/v1/kb/documents/${docB}`, keyA, { filename: 'taken.txt', metadata: { by: 'A' } }), 404, 'not_found').message).toBe(`document ${docB} not found`);
    expect((await rest('GET', `/v1/kb/documents/${docB}`, owner.key)).status).toBe(200);
    await waitForDocuments(server, keyA, [noteId]);
    expect((await rest('DELETE', `/v1/kb/documents/${noteId}`, keyA)).status).toBe(204);
  });
});

describe('search through a restricted key', () => {
  it('searches its workspace (200) and no other (404), on /v1/kb/query, /query and GraphQL search', async () => {
    for (const path of ['/v1/kb/query', '/query']) {
      const found = await rest('POST', path, keyA, { query: 'lighthouse painted crimson', workspace_id: a });
      expect(found.status, found.text).toBe(200);
      expect(found.body.results[0].content).toContain('lighthouse');
      for (const hidden of [b, strangerWorkspace]) {
        const response = await rest('POST', path, keyA, { query: 'vault phrase', workspace_id: hidden });
        expectWorkspaceHidden(response, hidden);
        expect(response.text).not.toContain('periwinkle');
      }
    }
    const graph = await server.request('POST', '/graphql', {
      key: keyA,
      json: {
        query: `query($a: ID!, $b: ID!) {
          a: search(input: { query: "lighthouse", workspaceId: $a }) { content }
          b: search(input: { query: "vault phrase", workspaceId: $b }) { content }
        }`,
        variables: { a, b },
      },
    });
    expect(graph.body.errors.map((error: { message: string; extensions: { code: string } }) => [error.extensions.code, error.message])).toEqual([
      ['not_found', `workspace ${b} not found`],
    ]);
    expect(graph.text).not.toContain('periwinkle');
    const both = await rest('POST', '/v1/kb/query', keyAB, { query: 'vault phrase', workspace_id: b });
    expect(both.body.results[0].content).toContain('periwinkle');
  });
});

describe('chat sessions through a restricted key', () => {
  let sessionA: string;
  let sessionAB: string;
  let sessionB: string;
  let sessionNone: string;

  beforeAll(async () => {
    const create = async (workspaceIds: string[]) => {
      const created = await rest('POST', '/v1/chat/sessions', owner.key, { title: `on ${workspaceIds.length}`, workspace_ids: workspaceIds });
      expect(created.status).toBe(201);
      await rest('POST', `/v1/chat/sessions/${created.body.id}/messages`, owner.key, { role: 'user', content: `about ${workspaceIds.join(',')}` });
      return created.body.id as string;
    };
    sessionA = await create([a]);
    sessionAB = await create([a, b]);
    sessionB = await create([b]);
    sessionNone = await create([]);
  });

  const listedIds = async (key: string) => (await rest('GET', '/v1/chat/sessions?limit=1000', key)).body.map((session: { id: string }) => session.id) as string[];

  it('sees a session only when every workspace it names is one of the key’s, and never one that names none', async () => {
    const ofA = await listedIds(keyA);
    expect(ofA).toContain(sessionA);
    for (const hidden of [sessionAB, sessionB, sessionNone]) expect(ofA).not.toContain(hidden);
    const ofAB = await listedIds(keyAB);
    for (const visible of [sessionA, sessionAB, sessionB]) expect(ofAB).toContain(visible);
    expect(ofAB).not.toContain(sessionNone);
    const ofOwner = await listedIds(owner.key);
    for (const session of [sessionA, sessionAB, sessionB, sessionNone]) expect(ofOwner).toContain(session);

    expect((await rest('GET', `/v1/chat/sessions/${sessionA}`, keyA)).body.messages).toHaveLength(1);
    for (const hidden of [sessionAB, sessionB, sessionNone]) {
      const response = await rest('GET', `/v1/chat/sessions/${hidden}`, keyA);
      expect(expectError(response, 404, 'not_found').message).toBe(`chat session ${hidden} not found`);
    }
    const graph = await server.request('POST', '/graphql', {
      key: keyA,
      json: { query: `{ mine: chatSession(id: "${sessionA}") { id } theirs: chatSession(id: "${sessionAB}") { id messages { content } } }` },
    });
    expect(graph.body.errors[0].extensions.code).toBe('not_found');
    expect(graph.text).not.toContain(`about ${a},${b}`);
    const connection = await server.graphql<{ chatSessions: { edges: { node: { id: string; workspaceIds: string[] } }[] } }>(
      keyA,
      '{ chatSessions(first: 1000) { edges { node { id workspaceIds } } } }',
    );
    for (const { node } of connection.data!.chatSessions.edges) expect(node.workspaceIds.every((id) => id === a)).toBe(true);
  });

  it('cannot write to, or delete, a session it cannot see; can in its own', async () => {
    for (const hidden of [sessionAB, sessionNone]) {
      expectError(await rest('POST', `/v1/chat/sessions/${hidden}/messages`, keyA, { role: 'user', content: 'planted' }), 404, 'not_found');
      expectError(await rest('DELETE', `/v1/chat/sessions/${hidden}`, keyA), 404, 'not_found');
      const still = await rest('GET', `/v1/chat/sessions/${hidden}`, owner.key);
      expect(still.status).toBe(200);
      expect(still.body.messages.map((message: { content: string }) => message.content)).not.toContain('planted');
    }
    expect((await rest('POST', `/v1/chat/sessions/${sessionA}/messages`, keyA, { role: 'user', content: 'allowed' })).status).toBe(201);
  });

  it('creates sessions only within its workspaces: 403 without workspace_ids, 404 naming one outside, 201 inside', async () => {
    const bare = expectError(await rest('POST', '/v1/chat/sessions', keyA, {}), 403, 'forbidden');
    expect(bare.message).toMatch(/restricted to workspaces .*name workspace_ids among its own/);
    expectError(await rest('POST', '/v1/chat/sessions', keyA), 403, 'forbidden');
    expectWorkspaceHidden(await rest('POST', '/v1/chat/sessions', keyA, { workspace_ids: [a, b] }), b);
    const created = await rest('POST', '/v1/chat/sessions', keyA, { title: 'mine', workspace_ids: [a] });
    expect(created.status).toBe(201);
    expect(await listedIds(keyA)).toContain(created.body.id);
    const removed = await rest('DELETE', `/v1/chat/sessions/${created.body.id}`, keyA);
    expect(removed.status).toBe(204);
  });
});

describe('the agent through a restricted key', () => {
  const balance = async () => (await rest('GET', '/v1/user/me', owner.key)).body.creditsBalance as number;

  it('answers from its workspace, and refuses another with 404 before the stream opens and before any credit is reserved', async () => {
    const before = await balance();
    for (const workspaceIds of [[b], [a, b], [strangerWorkspace]]) {
      const refused = await streamAgent(server, keyA, { message: 'What opens the vault?', workspaceIds });
      expect(refused.events).toEqual([]);
      expectWorkspaceHidden({ ...refused, text: JSON.stringify(refused.body) } as TestResponse, workspaceIds.at(-1)!);
    }
    expect(await balance()).toBe(before);

    const stream = await streamAgent(server, keyA, { message: 'Who painted the lighthouse crimson?', workspaceIds: [a] });
    const { answer, done } = expectProtocol(stream);
    expect(answer).toContain('Oskar Lindqvist');
    const session = await rest('GET', `/v1/chat/sessions/${done.sessionId}`, keyA);
    expect(session.body.workspace_ids).toEqual([a]);
  });

  it('cannot continue a session it cannot see; a session another credential widened to B leaves its view', async () => {
    const mine = expectProtocol(await streamAgent(server, keyA, { message: 'When was the lighthouse painted?', workspaceIds: [a] }));
    // The owner continues the same session over workspace B: the session now holds B's content.
    const widened = expectProtocol(await streamAgent(server, owner.key, { message: 'What opens the vault?', workspaceIds: [b], sessionId: mine.done.sessionId }));
    expect(widened.answer).toContain('periwinkle');
    const session = await rest('GET', `/v1/chat/sessions/${mine.done.sessionId}`, owner.key);
    expect(session.body.workspace_ids).toEqual([a, b]);
    expectError(await rest('GET', `/v1/chat/sessions/${mine.done.sessionId}`, keyA), 404, 'not_found');
    const followUp = await streamAgent(server, keyA, { message: 'And who painted it?', workspaceIds: [a], sessionId: mine.done.sessionId });
    expect(expectError({ ...followUp, text: JSON.stringify(followUp.body) } as TestResponse, 404, 'not_found').message).toBe(
      `chat session ${mine.done.sessionId} not found`,
    );
    expect((await rest('GET', `/v1/chat/sessions/${mine.done.sessionId}`, keyAB)).status).toBe(200);
  });

  it('Subscription.agentStream refuses a workspace outside the key over /graphql, before the first event', async () => {
    const before = await balance();
    const response = await fetch(new URL('/graphql', server.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${keyA}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({
        query: 'subscription($input: AgentStreamInput!) { agentStream(input: $input) { __typename ... on AgentToken { content } } }',
        variables: { input: { message: 'What opens the vault?', workspaceIds: [b] } },
      }),
    });
    const text = await response.text();
    expect(text).toContain('not_found');
    expect(text).toContain(`workspace ${b} not found`);
    expect(text).not.toContain('AgentToken');
    expect(await balance()).toBe(before);
  });
});

describe('API keys made by a restricted key', () => {
  it('must stay within its workspaces and scopes: 403 for every workspace or a scope it lacks, 404 for a workspace it cannot see', async () => {
    const everything = expectError(await createKey(keyAB, { name: 'escape' }), 403, 'forbidden');
    expect(everything.message).toMatch(/restricted to workspaces and cannot create a key for every workspace/);
    expectError(await createKey(keyAB, { name: 'escape', workspace_ids: null }), 403, 'forbidden');
    expectWorkspaceHidden(await createKey(keyAB, { name: 'escape', workspace_ids: [a, c] }), c);
    expectWorkspaceHidden(await createKey(keyAB, { name: 'escape', workspace_ids: [strangerWorkspace] }), strangerWorkspace);
    const graph = await server.graphql(keyAB, 'mutation { createApiKey(input: { name: "escape", scopes: ["kb:read"] }) { __typename ... on AppError { code message } } }');
    expect(graph.data).toMatchObject({ createApiKey: { __typename: 'AppError', code: 'forbidden' } });

    const child = await createKey(keyAB, { name: 'child', scopes: ['kb:read'], workspace_ids: [b] });
    expect(child.status, child.text).toBe(201);
    expect(child.body.workspace_ids).toEqual([b]);
    expect((await rest('GET', '/v1/kb/workspaces', child.body.raw_key)).body.map((workspace: { id: string }) => workspace.id)).toEqual([b]);

    // Scopes: no credential grants what it lacks.
    const narrow = await createKey(owner.key, { name: 'narrow', scopes: ['user:write', 'kb:read'], workspace_ids: [a] });
    const lacking = expectError(await createKey(narrow.body.raw_key, { scopes: ['kb:read', 'kb:write'], workspace_ids: [a] }), 403, 'forbidden');
    expect(lacking.message).toBe('this credential lacks the kb:write scope, so it cannot grant it to a new key');
    expect((await createKey(narrow.body.raw_key, { scopes: ['kb:read'], workspace_ids: [a] })).status).toBe(201);
  });

  it('lists and revokes only keys restricted within its workspaces (itself included); others are 404', async () => {
    const ownerKeys = (await rest('GET', '/v1/user/me/api-keys', owner.key)).body as { id: string; workspace_ids: string[] | null }[];
    const listed = (await rest('GET', '/v1/user/me/api-keys?limit=1000', keyA)).body as { id: string; workspace_ids: string[] | null }[];
    expect(listed.map((key) => key.id)).toContain(keyAId);
    for (const key of listed) expect(key.workspace_ids).toEqual([a]);
    const expected = ownerKeys.filter((key) => key.workspace_ids !== null && key.workspace_ids.every((id) => id === a)).map((key) => key.id);
    expect(listed.map((key) => key.id).sort()).toEqual(expected.sort());
    const graph = await server.graphql<{ apiKeys: { edges: { node: { id: string; workspaceIds: string[] } }[] } }>(keyA, '{ apiKeys { edges { node { id workspaceIds } } } }');
    expect(graph.data!.apiKeys.edges.map((edge) => edge.node.id).sort()).toEqual(expected.sort());

    const defaultKey = ownerKeys.find((key) => key.workspace_ids === null)!;
    for (const hidden of [keyABId, defaultKey.id]) {
      expect(expectError(await rest('DELETE', `/v1/user/me/api-keys/${hidden}`, keyA), 404, 'not_found').message).toBe(`API key ${hidden} not found`);
    }
    expect((await rest('GET', '/v1/kb/workspaces', keyAB)).status).toBe(200);
    const child = await createKey(keyA, { name: 'short-lived', workspace_ids: [a] });
    expect((await rest('DELETE', `/v1/user/me/api-keys/${child.body.id}`, keyA)).status).toBe(204);
    expectError(await rest('GET', '/v1/kb/workspaces', child.body.raw_key), 401, 'unauthorized');
  });
});

describe('revocation, deletion and other credentials', () => {
  it('a revoked restricted key is refused at once, though its requests were answered (and cached) just before', async () => {
    const created = await createKey(owner.key, { name: 'doomed', workspace_ids: [a] });
    const doomed = created.body.raw_key as string;
    for (let i = 0; i < 3; i += 1) expect((await rest('GET', `/v1/kb/workspaces/${a}`, doomed)).status).toBe(200);
    const inFlight = Array.from({ length: 20 }, () => rest('GET', `/v1/kb/workspaces/${a}`, doomed));
    expect((await rest('DELETE', `/v1/user/me/api-keys/${created.body.id}`, owner.key)).status).toBe(204);
    for (const response of await Promise.all(inFlight)) expect([200, 401]).toContain(response.status);
    for (let i = 0; i < 5; i += 1) expectError(await rest('GET', `/v1/kb/workspaces/${a}`, doomed), 401, 'unauthorized');
    // The other keys keep their own restrictions after the cache was emptied.
    expect((await rest('GET', '/v1/kb/workspaces', keyA)).body.map((workspace: { id: string }) => workspace.id)).toEqual([a]);
  });

  it('a key whose workspace was deleted sees nothing of it, and cannot hand it on', async () => {
    const doomedWorkspace = await newWorkspace(owner.key, 'Doomed');
    const both = await createKey(owner.key, { name: 'alpha and doomed', workspace_ids: [a, doomedWorkspace] });
    const only = await createKey(owner.key, { name: 'only doomed', workspace_ids: [doomedWorkspace] });
    expect((await rest('DELETE', `/v1/kb/workspaces/${doomedWorkspace}`, both.body.raw_key)).status).toBe(204);
    expect((await rest('GET', '/v1/kb/workspaces', both.body.raw_key)).body.map((workspace: { id: string }) => workspace.id)).toEqual([a]);
    expect((await rest('GET', '/v1/kb/workspaces', only.body.raw_key)).body).toEqual([]);
    expectWorkspaceHidden(await rest('GET', `/v1/kb/workspaces/${doomedWorkspace}`, both.body.raw_key), doomedWorkspace);
    expectWorkspaceHidden(await rest('POST', '/v1/kb/query', only.body.raw_key, { query: 'anything', workspace_id: doomedWorkspace }), doomedWorkspace);
    expectWorkspaceHidden(await createKey(both.body.raw_key, { name: 'heir', workspace_ids: [doomedWorkspace] }), doomedWorkspace);
    expectWorkspaceHidden(await rest('POST', '/v1/chat/sessions', only.body.raw_key, { workspace_ids: [doomedWorkspace] }), doomedWorkspace);
    expectError(await rest('POST', '/v1/kb/workspaces', only.body.raw_key, { name: 'Reborn' }), 403, 'forbidden');
    // Its list still says what it was given, so nothing widens silently.
    const listed = (await rest('GET', '/v1/user/me/api-keys?limit=1000', owner.key)).body.find((key: { id: string }) => key.id === only.body.id);
    expect(listed.workspace_ids).toEqual([doomedWorkspace]);
  });

  it('JWTs are never restricted: every workspace, and workspaces can be created', async () => {
    const token = await jwt(owner.id);
    const listed = await rest('GET', '/v1/kb/workspaces', token);
    expect(listed.body.map((workspace: { id: string }) => workspace.id)).toEqual(expect.arrayContaining([a, b, c]));
    expect((await rest('GET', `/v1/kb/documents/${docB}`, token)).status).toBe(200);
    const created = await rest('POST', '/v1/kb/workspaces', token, { name: 'By token' });
    expect(created.status).toBe(201);
    expect((await rest('DELETE', `/v1/kb/workspaces/${created.body.id}`, token)).status).toBe(204);
    const key = await createKey(token, { name: 'from a token' });
    expect(key.body.workspace_ids).toBeNull();
  });

  it('a graphql-sse stream reserved by one credential cannot be used by a credential that sees other workspaces', async () => {
    const endpoint = new URL('/graphql/stream', server.url);
    const reserved = await fetch(endpoint, { method: 'PUT', headers: { authorization: `Bearer ${keyA}` } });
    expect(reserved.status).toBe(201);
    const token = await reserved.text();
    // The unrestricted key of the same user may not send operations whose results would arrive on the restricted key's stream.
    const posted = await fetch(endpoint, {
      method: 'POST',
      headers: { authorization: `Bearer ${owner.key}`, 'content-type': 'application/json', 'x-graphql-event-stream-token': token },
      body: JSON.stringify({ query: `{ workspace(id: "${b}") { name } }`, extensions: { operationId: 'x' } }),
    });
    expect(posted.status).toBe(404);
    const read = await fetch(endpoint, { headers: { authorization: `Bearer ${keyAB}`, accept: 'text/event-stream', 'x-graphql-event-stream-token': token } });
    expect(read.status).toBe(404);
    await read.body?.cancel();
  });

  it('concurrent requests of restricted and unrestricted keys each get their own view', async () => {
    const requests = Array.from({ length: 40 }, (_, i) => {
      const key = [keyA, keyAB, owner.key][i % 3]!;
      return rest('GET', '/v1/kb/workspaces', key).then((response) => ({ key, ids: response.body.map((workspace: { id: string }) => workspace.id).sort() }));
    });
    const expected = new Map([
      [keyA, [a]],
      [keyAB, [a, b].sort()],
    ]);
    for (const { key, ids } of await Promise.all(requests)) {
      if (key === owner.key) expect(ids).toEqual(expect.arrayContaining([a, b, c]));
      else expect(ids).toEqual(expected.get(key));
    }
    const searches = await Promise.all(Array.from({ length: 10 }, (_, i) => rest('POST', '/v1/kb/query', i % 2 ? keyA : keyAB, { query: 'vault phrase', workspace_id: b })));
    searches.forEach((response, i) => expect(response.status).toBe(i % 2 ? 404 : 200));
  });

  it('a cursor naming a workspace, document, session or key it cannot see pages exactly as an unknown id does', async () => {
    // Rows it cannot see, made between rows it can, so that paging from one of them would show something.
    const [olderNote] = (await upload(server, owner.key, a, [{ name: 'older.txt', bytes: 'An older note of Alpha.' }])).body;
    const [hiddenNote] = (await upload(server, owner.key, b, [{ name: 'hidden.txt', bytes: 'A note of Bravo.' }])).body;
    await upload(server, owner.key, a, [{ name: 'newer.txt', bytes: 'A newer note of Alpha.' }]);
    const ownerSessions = (await rest('GET', '/v1/chat/sessions?limit=1000', owner.key)).body as { id: string }[];
    const ownerKeys = (await rest('GET', '/v1/user/me/api-keys?limit=1000', owner.key)).body as { id: string }[];
    const ownerWorkspaces = (await rest('GET', '/v1/kb/workspaces?limit=1000', owner.key)).body as { id: string }[];
    expect(olderNote.id).not.toBe(hiddenNote.id);
    for (const key of [keyA, keyAB]) {
      const lists = [`/v1/kb/workspaces`, '/v1/chat/sessions', '/v1/user/me/api-keys', `/v1/kb/workspaces/${a}/documents`];
      for (const path of lists) {
        const visible = new Set(((await rest('GET', `${path}?limit=1000`, key)).body as { id: string }[]).map((item) => item.id));
        const everything = [...ownerWorkspaces, ...ownerSessions, ...ownerKeys].map((item) => item.id).concat([docB, hiddenNote.id, strangerWorkspace]);
        const hidden = everything.filter((id) => !visible.has(id));
        const answer = async (cursor: string) => {
          const response = await rest('GET', `${path}?limit=1000&cursor=${cursor}`, key);
          return { status: response.status, body: response.body };
        };
        const unknown = await answer(randomUUID());
        for (const id of hidden) expect(await answer(id), `${path} after ${id}`).toEqual(unknown);
      }
    }
    // A cursor it can see pages as usual.
    const page = await rest('GET', `/v1/kb/workspaces/${a}/documents?limit=1&cursor=${olderNote.id}`, keyA);
    expect(page.body.map((document: { id: string }) => document.id)).toEqual([docA]);
  });

  it('left what it could not touch as it was', async () => {
    const workspace = await rest('GET', `/v1/kb/workspaces/${b}`, owner.key);
    expect(workspace.body.name).toBe('Bravo');
    const documents = await rest('GET', `/v1/kb/workspaces/${b}/documents`, owner.key);
    // bravo.txt, and hidden.txt which the owner put there; nothing a restricted key sent.
    expect(documents.body.map((document: { filename: string }) => document.filename).sort()).toEqual(['bravo.txt', 'hidden.txt']);
    const preview = await rest('GET', `/v1/kb/documents/${docB}/preview?workspace_id=${b}`, owner.key);
    expect(preview.body.content).toContain('periwinkle-giraffe-4417');
    expect((await rest('GET', '/v1/kb/workspaces', stranger.key)).body.map((w: { id: string }) => w.id)).toEqual([strangerWorkspace]);
  });
});
