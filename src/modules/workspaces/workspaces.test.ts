import { describe, expect, it } from 'vitest';
import { expectError, serverBed, type TestServer, type TestUser } from '../../../test/support/server.js';
import { createWorkspace, isoTimestamp, uuid } from '../../../test/support/fixtures.js';

let server: TestServer;
let owner: TestUser;

serverBed((started) => ({ server, user: owner } = started));

describe('workspaces over REST', () => {
  it('creates a workspace: 201 with id, trimmed name and timestamps', async () => {
    const response = await server.request('POST', '/v1/kb/workspaces', { key: owner.key, json: { name: '  Research  ' } });
    expect(response.status).toBe(201);
    expect(response.body).toEqual({
      id: expect.stringMatching(uuid),
      name: 'Research',
      created_at: expect.stringMatching(isoTimestamp),
      updated_at: expect.stringMatching(isoTimestamp),
    });
    expect(Object.keys(response.body)).toEqual(['id', 'name', 'created_at', 'updated_at']);
  });

  it('lists the caller’s workspaces newest first as a bare array', async () => {
    const user = await server.createUser();
    const first = await createWorkspace(server, user, 'first');
    const second = await createWorkspace(server, user, 'second');
    const response = await server.request('GET', '/v1/kb/workspaces', { key: user.key });
    expect(response.status).toBe(200);
    expect(response.body.map((workspace: { id: string }) => workspace.id)).toEqual([second.id, first.id]);
    expect(response.headers.get('link')).toBeNull();
  });

  it('pages with limit and cursor, announcing the next page in a Link header', async () => {
    const user = await server.createUser();
    const created = [];
    for (const name of ['a', 'b', 'c']) created.push(await createWorkspace(server, user, name));
    const firstPage = await server.request('GET', '/v1/kb/workspaces?limit=2', { key: user.key });
    expect(firstPage.body.map((w: { name: string }) => w.name)).toEqual(['c', 'b']);
    const link = firstPage.headers.get('link');
    expect(link).toMatch(/^<\/v1\/kb\/workspaces\?limit=2&cursor=[^>]+>; rel="next"$/);
    const nextPath = /^<([^>]+)>/.exec(link!)![1]!;
    const secondPage = await server.request('GET', nextPath, { key: user.key });
    expect(secondPage.body.map((w: { name: string }) => w.name)).toEqual(['a']);
    expect(secondPage.headers.get('link')).toBeNull();
  });

  it('rejects a limit outside 1..1000 or not a number with 400 naming limit', async () => {
    for (const limit of ['0', '1001', 'ten', '1.5']) {
      const body = expectError(await server.request('GET', `/v1/kb/workspaces?limit=${limit}`, { key: owner.key }), 400, 'bad_request');
      expect(body.message).toMatch(/^limit: /);
    }
  });

  it('rejects a cursor it did not issue with 400 naming cursor, forged or garbled', async () => {
    const forged = Buffer.from('GPC:S:not-a-uuid').toString('base64');
    for (const cursor of ['abc', forged, '%25%25']) {
      const body = expectError(await server.request('GET', `/v1/kb/workspaces?cursor=${cursor}`, { key: owner.key }), 400, 'bad_request');
      expect(body.message).toMatch(/^cursor: /);
    }
  });

  it('refuses text PostgreSQL cannot store (NUL) with 400 naming the field, over REST and GraphQL', async () => {
    const body = expectError(await server.request('POST', '/v1/kb/workspaces', { key: owner.key, json: { name: 'a\u0000b' } }), 400, 'bad_request');
    expect(body.message).toMatch(/^name: /);
    const viaGraphQL = await server.graphql(owner.key, 'mutation($name: String!) { createWorkspace(input: { name: $name }) { __typename } }', {
      name: 'a\u0000b',
    });
    expect(viaGraphQL.errors?.[0]?.extensions?.code).toBe('bad_request');
  });

  it('gets, renames and deletes a workspace; deleting again is 404', async () => {
    const workspace = await createWorkspace(server, owner, 'to rename');
    const fetched = await server.request('GET', `/v1/kb/workspaces/${workspace.id}`, { key: owner.key });
    expect(fetched.status).toBe(200);
    expect(fetched.body).toEqual(workspace);

    const renamed = await server.request('PATCH', `/v1/kb/workspaces/${workspace.id}`, { key: owner.key, json: { name: 'renamed' } });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ id: workspace.id, name: 'renamed', created_at: workspace.created_at });
    expect(Date.parse(renamed.body.updated_at)).toBeGreaterThanOrEqual(Date.parse(workspace.updated_at));

    const deleted = await server.request('DELETE', `/v1/kb/workspaces/${workspace.id}`, { key: owner.key });
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    expectError(await server.request('DELETE', `/v1/kb/workspaces/${workspace.id}`, { key: owner.key }), 404, 'not_found');
    expectError(await server.request('GET', `/v1/kb/workspaces/${workspace.id}`, { key: owner.key }), 404, 'not_found');
  });

  it('answers 409 for a duplicate name, ignoring case, on create and rename; nothing changes', async () => {
    const user = await server.createUser();
    await createWorkspace(server, user, 'Papers');
    expectError(await server.request('POST', '/v1/kb/workspaces', { key: user.key, json: { name: 'papers' } }), 409, 'conflict');
    const other = await createWorkspace(server, user, 'Other');
    expectError(
      await server.request('PATCH', `/v1/kb/workspaces/${other.id}`, { key: user.key, json: { name: 'PAPERS' } }),
      409,
      'conflict',
    );
    const list = await server.request('GET', '/v1/kb/workspaces', { key: user.key });
    expect(list.body.map((w: { name: string }) => w.name).sort()).toEqual(['Other', 'Papers']);
  });

  it('answers 409 for a name that looks the same: compatibility forms, full case folding, composition, invisible selectors', async () => {
    const user = await server.createUser();
    const lookAlikes: [string, string][] = [
      ['Straße', 'STRASSE'],
      ['ﬁnance', 'FINANCE'],
      ['Ｐａｐｅｒｓ', 'papers'],
      ['café', 'cafe\u0301'],
      ['Σίσυφος', 'ΣΊΣΥΦΟΣ'],
      ['Notes', 'Notes\ufe0f'],
      ['paperwork', 'paper\u200dwork'],
    ];
    for (const [first, second] of lookAlikes) {
      await createWorkspace(server, user, first);
      const refused = expectError(await server.request('POST', '/v1/kb/workspaces', { key: user.key, json: { name: second } }), 409, 'conflict');
      expect(refused.message).toBe(
        `a workspace named "${first}" already exists, and "${second}" is the same name (names are compared ignoring case, compatibility forms and invisible characters)`,
      );
    }
    const other = await createWorkspace(server, user, 'Other');
    expectError(await server.request('PATCH', `/v1/kb/workspaces/${other.id}`, { key: user.key, json: { name: 'strasse' } }), 409, 'conflict');
    const viaGraphQL = await server.graphql<{ createWorkspace: { __typename: string; code: string } }>(
      user.key,
      'mutation { createWorkspace(input: { name: "FINANCE" }) { __typename ... on AppError { code } } }',
    );
    expect(viaGraphQL.data?.createWorkspace).toEqual({ __typename: 'AppError', code: 'conflict' });
    // A workspace may be renamed to a look-alike of its own name.
    expect((await server.request('PATCH', `/v1/kb/workspaces/${other.id}`, { key: user.key, json: { name: 'OTHER' } })).status).toBe(200);
    const list = await server.request('GET', '/v1/kb/workspaces?limit=100', { key: user.key });
    expect(list.body.map((w: { name: string }) => w.name).sort()).toEqual([...lookAlikes.map(([first]) => first), 'OTHER'].sort());
  });

  it('lets two users use the same name', async () => {
    const a = await server.createUser();
    const b = await server.createUser();
    await createWorkspace(server, a, 'Shared name');
    await createWorkspace(server, b, 'Shared name');
  });

  it('validates the name with 400 naming the field', async () => {
    const cases: unknown[] = [{}, { name: '' }, { name: '   ' }, { name: 'x'.repeat(201) }, { name: 42 }, { name: null }];
    for (const json of cases) {
      const body = expectError(await server.request('POST', '/v1/kb/workspaces', { key: owner.key, json }), 400, 'bad_request');
      expect(body.message, JSON.stringify(json)).toMatch(/^name: /);
    }
    const unknownField = expectError(
      await server.request('POST', '/v1/kb/workspaces', { key: owner.key, json: { name: 'ok', color: 'red' } }),
      400,
      'bad_request',
    );
    expect(unknownField.message).toMatch(/^color: /);
  });

  it('rejects unknown fields on PATCH and leaves the workspace as it was', async () => {
    const workspace = await createWorkspace(server, owner, 'patch strict');
    const body = expectError(
      await server.request('PATCH', `/v1/kb/workspaces/${workspace.id}`, { key: owner.key, json: { name: 'new', owner: 'x' } }),
      400,
      'bad_request',
    );
    expect(body.message).toMatch(/^owner: /);
    const fetched = await server.request('GET', `/v1/kb/workspaces/${workspace.id}`, { key: owner.key });
    expect(fetched.body.name).toBe('patch strict');
  });

  it('treats ids that are not UUIDs as 404', async () => {
    for (const id of ['not-a-uuid', '123', '%E0%A4%A']) {
      expectError(await server.request('GET', `/v1/kb/workspaces/${id}`, { key: owner.key }), 404, 'not_found');
      expectError(await server.request('DELETE', `/v1/kb/workspaces/${id}`, { key: owner.key }), 404, 'not_found');
    }
  });

  it('hides other users’ workspaces behind 404 on every endpoint', async () => {
    const workspace = await createWorkspace(server, owner, 'private');
    const intruder = await server.createUser();
    for (const [method, suffix] of [
      ['GET', ''],
      ['GET', '/stats'],
      ['GET', '/scan'],
      ['DELETE', ''],
    ] as const) {
      expectError(await server.request(method, `/v1/kb/workspaces/${workspace.id}${suffix}`, { key: intruder.key }), 404, 'not_found');
    }
    expectError(
      await server.request('PATCH', `/v1/kb/workspaces/${workspace.id}`, { key: intruder.key, json: { name: 'mine now' } }),
      404,
      'not_found',
    );
    const list = await server.request('GET', '/v1/kb/workspaces', { key: intruder.key });
    expect(list.body).toEqual([]);
    const stillThere = await server.request('GET', `/v1/kb/workspaces/${workspace.id}`, { key: owner.key });
    expect(stillThere.body.name).toBe('private');
  });

  it('reports stats and scan of an empty workspace', async () => {
    const workspace = await createWorkspace(server, owner, 'empty');
    const stats = await server.request('GET', `/v1/kb/workspaces/${workspace.id}/stats`, { key: owner.key });
    expect(stats.status).toBe(200);
    expect(stats.body).toEqual({
      workspace_id: workspace.id,
      document_count: 0,
      chunk_count: 0,
      embedded_chunk_count: 0,
      total_size_bytes: 0,
      processing_status: 'idle',
      documents_by_status: { queued: 0, processing: 0, ready: 0, failed: 0 },
      ocr: { documents: 0, pages_done: 0, pages_total: 0 },
    });
    const scan = await server.request('GET', `/v1/kb/workspaces/${workspace.id}/scan`, { key: owner.key });
    expect(scan.status).toBe(200);
    expect(scan.body).toEqual({
      workspace_id: workspace.id,
      embedding: {
        model: 'bge-small-en-v1.5-q',
        dimensions: 384,
        index: server.config.elasticsearch ? 'elasticsearch' : 'pgvector',
        index_model: 'bge-small-en-v1.5-q',
        index_dimensions: 384,
        model_mismatch: false,
      },
      documents: [],
      totals: { document_count: 0, chunk_count: 0, embedded_chunks: 0, indexed_chunks: 0 },
    });
  });

  it('counts documents by status in stats and scan', async () => {
    const workspace = await createWorkspace(server, owner, 'with documents');
    const prisma = server.app.db.prisma;
    await prisma.document.createMany({
      data: [
        { workspaceId: workspace.id, filename: 'a.txt', contentType: 'text/plain', sizeBytes: 100, sha256: 'a', status: 'ready', chunkCount: 3 },
        { workspaceId: workspace.id, filename: 'b.txt', contentType: 'text/plain', sizeBytes: 50, sha256: 'b', status: 'failed' },
      ],
    });
    const stats = await server.request('GET', `/v1/kb/workspaces/${workspace.id}/stats`, { key: owner.key });
    expect(stats.body).toMatchObject({
      document_count: 2,
      chunk_count: 3,
      total_size_bytes: 150,
      processing_status: 'failed',
      documents_by_status: { queued: 0, processing: 0, ready: 1, failed: 1 },
    });
    const scan = await server.request('GET', `/v1/kb/workspaces/${workspace.id}/scan`, { key: owner.key });
    expect(scan.body.totals).toEqual({ document_count: 2, chunk_count: 3, embedded_chunks: 0, indexed_chunks: 0 });
    expect(scan.body.documents.map((d: { filename: string }) => d.filename).sort()).toEqual(['a.txt', 'b.txt']);

    await server.request('DELETE', `/v1/kb/workspaces/${workspace.id}`, { key: owner.key });
    expect(await prisma.document.count({ where: { workspaceId: workspace.id } })).toBe(0);
  });

  it('needs kb:read to read and kb:write to change, naming the scope', async () => {
    const readOnly = await server.createKey(owner, ['kb:read']);
    const writeOnly = await server.createKey(owner, ['kb:write']);
    const workspace = await createWorkspace(server, owner, 'scoped');
    expect((await server.request('GET', '/v1/kb/workspaces', { key: readOnly })).status).toBe(200);
    const denied = expectError(await server.request('POST', '/v1/kb/workspaces', { key: readOnly, json: { name: 'x' } }), 403, 'forbidden');
    expect(denied.message).toContain('kb:write');
    expect(expectError(await server.request('GET', '/v1/kb/workspaces', { key: writeOnly }), 403, 'forbidden').message).toContain('kb:read');
    expectError(await server.request('GET', `/v1/kb/workspaces/${workspace.id}/stats`, { key: writeOnly }), 403, 'forbidden');
    expectError(await server.request('DELETE', `/v1/kb/workspaces/${workspace.id}`, { key: readOnly }), 403, 'forbidden');
  });

  it('orders errors 401, then 403, then 400, then 404', async () => {
    const readOnly = await server.createKey(owner, ['kb:read']);
    const missing = '00000000-0000-4000-8000-000000000000';
    // Bad body and unknown id together: without a credential 401, with the wrong scope 403.
    expectError(await server.request('PATCH', `/v1/kb/workspaces/${missing}`, { json: { name: 5 } }), 401, 'unauthorized');
    expectError(await server.request('PATCH', `/v1/kb/workspaces/${missing}`, { key: readOnly, json: { name: 5 } }), 403, 'forbidden');
    expectError(await server.request('PATCH', `/v1/kb/workspaces/${missing}`, { key: owner.key, json: { name: 5 } }), 400, 'bad_request');
    expectError(await server.request('PATCH', `/v1/kb/workspaces/${missing}`, { key: owner.key, json: { name: 'fine' } }), 404, 'not_found');
    expectError(
      await server.request('PATCH', `/v1/kb/workspaces/${missing}`, { key: readOnly, body: 'not json', headers: { 'content-type': 'application/json' } }),
      403,
      'forbidden',
    );
  });
});

describe('workspaces over GraphQL', () => {
  it('creates, lists and reads with the same rules', async () => {
    const user = await server.createUser();
    const created = await server.graphql<{ createWorkspace: { __typename: string; id: string; name: string } }>(
      user.key,
      `mutation { createWorkspace(input: { name: "Graph" }) { __typename ... on Workspace { id name } ... on AppError { code message } } }`,
    );
    expect(created.data?.createWorkspace).toMatchObject({ __typename: 'Workspace', name: 'Graph' });
    const duplicate = await server.graphql<{ createWorkspace: { __typename: string; code: string } }>(
      user.key,
      `mutation { createWorkspace(input: { name: "graph" }) { __typename ... on AppError { code message } } }`,
    );
    expect(duplicate.data?.createWorkspace).toMatchObject({ __typename: 'AppError', code: 'conflict' });
    const listed = await server.graphql<{ workspaces: { edges: { node: { id: string; stats: { documentCount: number } } }[] } }>(
      user.key,
      `{ workspaces(first: 10) { edges { node { id stats { documentCount } } } } }`,
    );
    expect(listed.data?.workspaces.edges).toEqual([{ node: { id: created.data!.createWorkspace.id, stats: { documentCount: 0 } } }]);

    const intruder = await server.createUser();
    const hidden = await server.graphql(intruder.key, `query($id: ID!) { workspace(id: $id) { id } }`, {
      id: created.data!.createWorkspace.id,
    });
    expect(hidden.errors?.[0]?.extensions?.code).toBe('not_found');
  });

  it('gives each workspace in a list its own stats (loaded in one batch)', async () => {
    const user = await server.createUser();
    const ids: string[] = [];
    for (const [index, name] of ['one', 'two', 'three'].entries()) {
      const workspace = await server.request('POST', '/v1/kb/workspaces', { key: user.key, json: { name } });
      ids.push(workspace.body.id);
      await server.app.db.prisma.document.createMany({
        data: Array.from({ length: index }, (_, n) => ({
          workspaceId: workspace.body.id,
          filename: `${name}-${n}.txt`,
          contentType: 'text/plain',
          sizeBytes: 10 * (index + 1),
          sha256: `${name}-${n}`,
          status: 'ready' as const,
          chunkCount: index,
        })),
      });
    }
    const listed = await server.graphql<{ workspaces: { edges: { node: { id: string; stats: { documentCount: number; totalSizeBytes: number; chunkCount: number } } }[] } }>(
      user.key,
      '{ workspaces { edges { node { id stats { documentCount totalSizeBytes chunkCount } } } } }',
    );
    const statsById = Object.fromEntries(listed.data!.workspaces.edges.map((edge) => [edge.node.id, edge.node.stats]));
    expect(statsById[ids[0]!]).toEqual({ documentCount: 0, totalSizeBytes: 0, chunkCount: 0 });
    expect(statsById[ids[1]!]).toEqual({ documentCount: 1, totalSizeBytes: 20, chunkCount: 1 });
    expect(statsById[ids[2]!]).toEqual({ documentCount: 2, totalSizeBytes: 60, chunkCount: 4 });
  });

  it('denies a field without its scope, naming it in extensions.code and the message', async () => {
    const user = await server.createUser();
    const chatOnly = await server.createKey(user, ['chat:read']);
    const result = await server.graphql(chatOnly, `{ workspaces { edges { node { id } } } }`);
    expect(result.errors?.[0]?.extensions?.code).toBe('forbidden');
    expect(result.errors?.[0]?.message).toContain('kb:read');
    const anonymous = await server.graphql(null, `{ workspaces { edges { node { id } } } }`);
    expect(anonymous.errors?.[0]?.extensions?.code).toBe('unauthorized');
  });
});
