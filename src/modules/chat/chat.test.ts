import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, startTestServer, type TestServer, type TestUser } from '../../../test/support/server.js';
import { createWorkspace, isoTimestamp, missingId, uuid } from '../../../test/support/fixtures.js';

let server: TestServer;
let owner: TestUser;

beforeAll(async () => {
  server = await startTestServer();
  owner = await server.createUser();
});
afterAll(() => server.close());

type Session = { id: string; title: string | null; created_at: string; updated_at: string; message_count: number };
type Message = { id: string; role: string; content: string; sources: unknown; created_at: string };

async function createSession(json: unknown = {}, key = owner.key) {
  const response = await server.request('POST', '/v1/chat/sessions', { key, json });
  expect(response.status, response.text).toBe(201);
  return response.body as Session;
}

async function sendMessage(sessionId: string, content: string, role = 'user', key = owner.key) {
  const response = await server.request('POST', `/v1/chat/sessions/${sessionId}/messages`, { key, json: { content, role } });
  expect(response.status, response.text).toBe(201);
  return response.body as Message;
}

describe('chat sessions over REST', () => {
  it('creates a session with a title: 201 with id, title, timestamps and no messages', async () => {
    const response = await server.request('POST', '/v1/chat/sessions', { key: owner.key, json: { title: '  Planning  ' } });
    expect(response.status).toBe(201);
    expect(response.body).toMatchObject({
      id: expect.stringMatching(uuid),
      title: 'Planning',
      created_at: expect.stringMatching(isoTimestamp),
      updated_at: expect.stringMatching(isoTimestamp),
      message_count: 0,
    });
    expect(response.body).not.toHaveProperty('messages');
  });

  it('creates a session without any body, with an empty object, and with a null title', async () => {
    const bare = await server.request('POST', '/v1/chat/sessions', { key: owner.key });
    expect(bare.status, bare.text).toBe(201);
    expect(bare.body).toMatchObject({ id: expect.stringMatching(uuid), title: null, message_count: 0 });
    const empty = await createSession({});
    expect(empty.title).toBeNull();
    const nullTitle = await createSession({ title: null });
    expect(nullTitle.title).toBeNull();
    expect(new Set([bare.body.id, empty.id, nullTitle.id]).size).toBe(3);
  });

  it('accepts the caller’s own workspaces in workspace_ids', async () => {
    const user = await server.createUser();
    const first = await createWorkspace(server, user, 'first');
    const second = await createWorkspace(server, user, 'second');
    const response = await server.request('POST', '/v1/chat/sessions', {
      key: user.key,
      json: { title: 'scoped', workspace_ids: [first.id, second.id.toUpperCase(), first.id] },
    });
    expect(response.status, response.text).toBe(201);
    expect(response.body.title).toBe('scoped');
    const stored = await server.app.db.prisma.chatSession.findUniqueOrThrow({ where: { id: response.body.id } });
    expect([...stored.workspaceIds].sort()).toEqual([first.id, second.id].sort());
    const empty = await server.request('POST', '/v1/chat/sessions', { key: user.key, json: { workspace_ids: [] } });
    expect(empty.status).toBe(201);
  });

  it('answers 404 for workspace_ids naming another user’s, an unknown or a non-UUID workspace; nothing is created', async () => {
    const user = await server.createUser();
    const own = await createWorkspace(server, user, 'mine');
    const foreign = await createWorkspace(server, await server.createUser(), 'theirs');
    for (const workspaceIds of [[foreign.id], [own.id, foreign.id], [missingId], ['not-a-uuid'], [own.id, '42']]) {
      const body = expectError(
        await server.request('POST', '/v1/chat/sessions', { key: user.key, json: { workspace_ids: workspaceIds } }),
        404,
        'not_found',
      );
      expect(body.message, JSON.stringify(workspaceIds)).toMatch(/workspace/);
    }
    const list = await server.request('GET', '/v1/chat/sessions', { key: user.key });
    expect(list.body).toEqual([]);
  });

  it('validates the create body with 400 naming the field', async () => {
    const cases: [unknown, RegExp][] = [
      [{ title: 'x'.repeat(201) }, /^title: /],
      [{ title: 42 }, /^title: /],
      [{ workspace_ids: 'not a list' }, /^workspace_ids: /],
      [{ workspace_ids: [7] }, /^workspace_ids: /],
      [{ title: 'ok', topic: 'extra' }, /^topic: /],
      [[], /^body: /],
      ['a string', /^body: /],
    ];
    for (const [json, message] of cases) {
      const body = expectError(await server.request('POST', '/v1/chat/sessions', { key: owner.key, json }), 400, 'bad_request');
      expect(body.message, JSON.stringify(json)).toMatch(message);
    }
  });

  it('rejects invalid JSON with 400 and a non-JSON content type with 415', async () => {
    const invalid = expectError(
      await server.request('POST', '/v1/chat/sessions', { key: owner.key, body: '{"title": ', headers: { 'content-type': 'application/json' } }),
      400,
      'bad_request',
    );
    expect(invalid.message).toMatch(/^body: /);
    expectError(
      await server.request('POST', '/v1/chat/sessions', { key: owner.key, body: '{"title":"x"}', headers: { 'content-type': 'text/plain' } }),
      415,
      'unsupported_media_type',
    );
    expectError(
      await server.request('POST', `/v1/chat/sessions/${missingId}/messages`, {
        key: owner.key,
        body: 'content=hi&role=user',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
      415,
      'unsupported_media_type',
    );
    const charset = await server.request('POST', '/v1/chat/sessions', {
      key: owner.key,
      body: '{"title":"charset"}',
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    expect(charset.status).toBe(201);
  });

  it('lists the caller’s sessions newest first as a bare array, without Link when all fit', async () => {
    const user = await server.createUser();
    const first = await createSession({ title: 'one' }, user.key);
    const second = await createSession({ title: 'two' }, user.key);
    const response = await server.request('GET', '/v1/chat/sessions', { key: user.key });
    expect(response.status).toBe(200);
    expect(Array.isArray(response.body)).toBe(true);
    expect(response.body.map((session: Session) => session.id)).toEqual([second.id, first.id]);
    expect(response.body[0]).toMatchObject({ id: second.id, title: 'two', message_count: 0, created_at: second.created_at });
    expect(response.body[0]).not.toHaveProperty('messages');
    expect(response.headers.get('link')).toBeNull();
  });

  it('pages with limit and cursor, announcing the next page in a Link header', async () => {
    const user = await server.createUser();
    for (const title of ['a', 'b', 'c', 'd', 'e']) await createSession({ title }, user.key);
    const titles: string[] = [];
    let next: string | null = '/v1/chat/sessions?limit=2';
    let pages = 0;
    while (next) {
      const page = await server.request('GET', next, { key: user.key });
      expect(page.status).toBe(200);
      expect(page.body.length).toBeLessThanOrEqual(2);
      titles.push(...page.body.map((session: Session) => session.title!));
      const link = page.headers.get('link');
      if (link) expect(link).toMatch(/^<\/v1\/chat\/sessions\?limit=2&cursor=[^>]+>; rel="next"$/);
      next = link ? /^<([^>]+)>/.exec(link)![1]! : null;
      pages += 1;
      expect(pages).toBeLessThan(10);
    }
    expect(pages).toBe(3);
    expect(titles).toEqual(['e', 'd', 'c', 'b', 'a']);
  });

  it('rejects a limit outside 1..1000 or not a number with 400 naming limit', async () => {
    for (const limit of ['0', '1001', 'many', '2.5', '-1']) {
      const body = expectError(await server.request('GET', `/v1/chat/sessions?limit=${limit}`, { key: owner.key }), 400, 'bad_request');
      expect(body.message, limit).toMatch(/^limit: /);
    }
    expect((await server.request('GET', '/v1/chat/sessions?limit=1000', { key: owner.key })).status).toBe(200);
  });

  it('appends messages: 201 with the message, history oldest first, message_count and updated_at follow', async () => {
    const session = await createSession({ title: 'history' });
    const first = await server.request('POST', `/v1/chat/sessions/${session.id}/messages`, {
      key: owner.key,
      json: { content: 'What is in the report?', role: 'user' },
    });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({
      id: expect.stringMatching(uuid),
      role: 'user',
      content: 'What is in the report?',
      sources: [],
      created_at: expect.stringMatching(isoTimestamp),
    });
    const second = await sendMessage(session.id, 'It covers Q3.', 'assistant');
    const third = await sendMessage(session.id, 'Answer briefly.', 'system');

    const fetched = await server.request('GET', `/v1/chat/sessions/${session.id}`, { key: owner.key });
    expect(fetched.status).toBe(200);
    expect(fetched.body).toMatchObject({ id: session.id, title: 'history', created_at: session.created_at, message_count: 3 });
    expect(fetched.body.messages).toEqual([first.body, second, third]);
    expect(Date.parse(fetched.body.updated_at)).toBeGreaterThanOrEqual(Date.parse(third.created_at));
    expect(Date.parse(fetched.body.updated_at)).toBeGreaterThanOrEqual(Date.parse(session.updated_at));

    const listed = await server.request('GET', '/v1/chat/sessions', { key: owner.key });
    expect(listed.body.find((s: Session) => s.id === session.id).message_count).toBe(3);
  });

  it('keeps many quickly sent messages in the order they were sent', async () => {
    const session = await createSession({ title: 'burst' });
    const sent: string[] = [];
    for (let index = 0; index < 15; index += 1) sent.push((await sendMessage(session.id, `message ${index}`)).id);
    const fetched = await server.request('GET', `/v1/chat/sessions/${session.id}`, { key: owner.key });
    expect(fetched.body.message_count).toBe(15);
    expect(fetched.body.messages.map((message: Message) => message.id)).toEqual(sent);
  });

  it('accepts content of exactly 50,000 characters and keeps it intact', async () => {
    const session = await createSession();
    const content = 'ü'.repeat(49_999) + '!';
    const message = await sendMessage(session.id, content);
    expect(message.content).toBe(content);
    const fetched = await server.request('GET', `/v1/chat/sessions/${session.id}`, { key: owner.key });
    expect(fetched.body.messages[0].content).toBe(content);
  });

  it('validates a message with 400 naming the field and stores nothing', async () => {
    const session = await createSession({ title: 'strict' });
    const cases: [unknown, RegExp][] = [
      [{ content: '', role: 'user' }, /^content: /],
      [{ content: 'x'.repeat(50_001), role: 'user' }, /^content: /],
      [{ content: 5, role: 'user' }, /^content: /],
      [{ content: null, role: 'user' }, /^content: /],
      [{ role: 'user' }, /^content: /],
      [{ content: 'hi', role: 'moderator' }, /^role: /],
      [{ content: 'hi', role: 'User' }, /^role: /],
      [{ content: 'hi', role: '' }, /^role: /],
      [{ content: 'hi' }, /^role: /],
      [{ content: 'hi', role: 'user', sources: [] }, /^sources: /],
      [{}, /^(content|role): /],
      [[], /^body: /],
      [null, /^body: /],
    ];
    for (const [json, message] of cases) {
      const body = expectError(
        await server.request('POST', `/v1/chat/sessions/${session.id}/messages`, { key: owner.key, json }),
        400,
        'bad_request',
      );
      expect(body.message, JSON.stringify(json).slice(0, 80)).toMatch(message);
    }
    const noBody = expectError(await server.request('POST', `/v1/chat/sessions/${session.id}/messages`, { key: owner.key }), 400, 'bad_request');
    expect(noBody.message).toMatch(/^body: /);
    const invalidJson = expectError(
      await server.request('POST', `/v1/chat/sessions/${session.id}/messages`, {
        key: owner.key,
        body: '{"content": "hi", "role": "user"',
        headers: { 'content-type': 'application/json' },
      }),
      400,
      'bad_request',
    );
    expect(invalidJson.message).toMatch(/^body: /);
    const fetched = await server.request('GET', `/v1/chat/sessions/${session.id}`, { key: owner.key });
    expect(fetched.body.message_count).toBe(0);
    expect(fetched.body.messages).toEqual([]);
  });

  it('deletes a session with its messages: 204, then 404 on every endpoint', async () => {
    const session = await createSession({ title: 'doomed' });
    await sendMessage(session.id, 'one');
    await sendMessage(session.id, 'two', 'assistant');
    const deleted = await server.request('DELETE', `/v1/chat/sessions/${session.id}`, { key: owner.key });
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    expectError(await server.request('DELETE', `/v1/chat/sessions/${session.id}`, { key: owner.key }), 404, 'not_found');
    expectError(await server.request('GET', `/v1/chat/sessions/${session.id}`, { key: owner.key }), 404, 'not_found');
    expectError(
      await server.request('POST', `/v1/chat/sessions/${session.id}/messages`, { key: owner.key, json: { content: 'late', role: 'user' } }),
      404,
      'not_found',
    );
    const listed = await server.request('GET', '/v1/chat/sessions', { key: owner.key });
    expect(listed.body.map((s: Session) => s.id)).not.toContain(session.id);
    expect(await server.app.db.prisma.chatMessage.count({ where: { sessionId: session.id } })).toBe(0);
  });

  it('treats ids that are not UUIDs, and unknown UUIDs, as 404', async () => {
    for (const id of ['not-a-uuid', '123', '%E0%A4%A', `${missingId}0`, missingId]) {
      expectError(await server.request('GET', `/v1/chat/sessions/${id}`, { key: owner.key }), 404, 'not_found');
      expectError(await server.request('DELETE', `/v1/chat/sessions/${id}`, { key: owner.key }), 404, 'not_found');
      expectError(
        await server.request('POST', `/v1/chat/sessions/${id}/messages`, { key: owner.key, json: { content: 'hi', role: 'user' } }),
        404,
        'not_found',
      );
    }
  });

  it('accepts a session id in upper case', async () => {
    const session = await createSession({ title: 'case' });
    const fetched = await server.request('GET', `/v1/chat/sessions/${session.id.toUpperCase()}`, { key: owner.key });
    expect(fetched.status).toBe(200);
    expect(fetched.body.id).toBe(session.id);
  });

  it('hides other users’ sessions behind 404 on every endpoint and changes nothing', async () => {
    const session = await createSession({ title: 'private' });
    await sendMessage(session.id, 'secret');
    const intruder = await server.createUser();
    expectError(await server.request('GET', `/v1/chat/sessions/${session.id}`, { key: intruder.key }), 404, 'not_found');
    expectError(
      await server.request('POST', `/v1/chat/sessions/${session.id}/messages`, { key: intruder.key, json: { content: 'hijack', role: 'user' } }),
      404,
      'not_found',
    );
    expectError(await server.request('DELETE', `/v1/chat/sessions/${session.id}`, { key: intruder.key }), 404, 'not_found');
    const list = await server.request('GET', '/v1/chat/sessions', { key: intruder.key });
    expect(list.status).toBe(200);
    expect(list.body).toEqual([]);
    const stillThere = await server.request('GET', `/v1/chat/sessions/${session.id}`, { key: owner.key });
    expect(stillThere.status).toBe(200);
    expect(stillThere.body.messages.map((m: Message) => m.content)).toEqual(['secret']);
  });

  it('needs chat:read to read and chat:write to change, naming the scope', async () => {
    const user = await server.createUser();
    const readOnly = await server.createKey(user, ['chat:read']);
    const writeOnly = await server.createKey(user, ['chat:write']);
    const other = await server.createKey(user, ['kb:read', 'kb:write', 'user:read', 'user:write']);
    const session = await createSession({ title: 'scoped' }, user.key);

    expect((await server.request('GET', '/v1/chat/sessions', { key: readOnly })).status).toBe(200);
    expect((await server.request('GET', `/v1/chat/sessions/${session.id}`, { key: readOnly })).status).toBe(200);
    for (const key of [readOnly, other]) {
      const attempts = [
        await server.request('POST', '/v1/chat/sessions', { key, json: { title: 'x' } }),
        await server.request('POST', `/v1/chat/sessions/${session.id}/messages`, { key, json: { content: 'x', role: 'user' } }),
        await server.request('DELETE', `/v1/chat/sessions/${session.id}`, { key }),
      ];
      for (const attempt of attempts) expect(expectError(attempt, 403, 'forbidden').message).toContain('chat:write');
    }
    for (const key of [writeOnly, other]) {
      for (const path of ['/v1/chat/sessions', `/v1/chat/sessions/${session.id}`]) {
        expect(expectError(await server.request('GET', path, { key }), 403, 'forbidden').message).toContain('chat:read');
      }
    }
    // A write-only key can create, append and delete.
    const created = await server.request('POST', '/v1/chat/sessions', { key: writeOnly, json: { title: 'by writer' } });
    expect(created.status).toBe(201);
    const message = await server.request('POST', `/v1/chat/sessions/${created.body.id}/messages`, {
      key: writeOnly,
      json: { content: 'hello', role: 'user' },
    });
    expect(message.status).toBe(201);
    expect((await server.request('DELETE', `/v1/chat/sessions/${created.body.id}`, { key: writeOnly })).status).toBe(204);

    const stillThere = await server.request('GET', `/v1/chat/sessions/${session.id}`, { key: user.key });
    expect(stillThere.body.message_count).toBe(0);
  });

  it('answers 401 without a credential or with an unknown one', async () => {
    const session = await createSession();
    for (const key of [null, 'sk_notARealKey00000000000000000000000000', 'garbage']) {
      expectError(await server.request('GET', '/v1/chat/sessions', { key }), 401, 'unauthorized');
      expectError(await server.request('POST', '/v1/chat/sessions', { key, json: {} }), 401, 'unauthorized');
      expectError(await server.request('GET', `/v1/chat/sessions/${session.id}`, { key }), 401, 'unauthorized');
      expectError(await server.request('DELETE', `/v1/chat/sessions/${session.id}`, { key }), 401, 'unauthorized');
      expectError(
        await server.request('POST', `/v1/chat/sessions/${session.id}/messages`, { key, json: { content: 'x', role: 'user' } }),
        401,
        'unauthorized',
      );
    }
    const fetched = await server.request('GET', `/v1/chat/sessions/${session.id}`, { key: owner.key });
    expect(fetched.status).toBe(200);
  });

  it('orders errors 401, then 403, then 400, then 404', async () => {
    const readOnly = await server.createKey(owner, ['chat:read']);
    const path = `/v1/chat/sessions/${missingId}/messages`;
    const bad = { content: '', role: 'robot' };
    expectError(await server.request('POST', path, { json: bad }), 401, 'unauthorized');
    expectError(await server.request('POST', path, { key: readOnly, json: bad }), 403, 'forbidden');
    expectError(
      await server.request('POST', path, { key: readOnly, body: 'not json', headers: { 'content-type': 'application/json' } }),
      403,
      'forbidden',
    );
    expectError(await server.request('POST', path, { key: owner.key, json: bad }), 400, 'bad_request');
    expectError(await server.request('POST', path, { key: owner.key, json: { content: 'fine', role: 'user' } }), 404, 'not_found');
    expectError(
      await server.request('POST', '/v1/chat/sessions', { key: readOnly, json: { workspace_ids: ['nope'], extra: 1 } }),
      403,
      'forbidden',
    );
  });
});

describe('chat sessions over GraphQL', () => {
  const sessionFields = `id title workspaceIds createdAt updatedAt messageCount`;

  it('creates a session, sends messages and reads them back oldest first', async () => {
    const user = await server.createUser();
    const workspace = await createWorkspace(server, user, 'graph ws');
    const created = await server.graphql<{ createChatSession: Record<string, unknown> & { id: string } }>(
      user.key,
      `mutation($input: CreateChatSessionInput) {
        createChatSession(input: $input) { __typename ... on ChatSession { ${sessionFields} } ... on AppError { code message } }
      }`,
      { input: { title: 'Graph chat', workspaceIds: [workspace.id] } },
    );
    expect(created.errors).toBeUndefined();
    expect(created.data?.createChatSession).toEqual({
      __typename: 'ChatSession',
      id: expect.stringMatching(uuid),
      title: 'Graph chat',
      workspaceIds: [workspace.id],
      createdAt: expect.stringMatching(isoTimestamp),
      updatedAt: expect.stringMatching(isoTimestamp),
      messageCount: 0,
    });
    const sessionId = created.data!.createChatSession.id;

    const sent = [];
    for (const [role, content] of [
      ['user', 'hello'],
      ['assistant', 'hi there'],
    ]) {
      const result = await server.graphql<{ sendChatMessage: Record<string, unknown> }>(
        user.key,
        `mutation($sessionId: ID!, $input: SendChatMessageInput!) {
          sendChatMessage(sessionId: $sessionId, input: $input) {
            __typename ... on ChatMessage { id role content sources createdAt } ... on AppError { code message }
          }
        }`,
        { sessionId, input: { role, content } },
      );
      expect(result.errors).toBeUndefined();
      expect(result.data?.sendChatMessage).toMatchObject({ __typename: 'ChatMessage', role, content, sources: [] });
      sent.push(result.data!.sendChatMessage.id);
    }

    const fetched = await server.graphql<{ chatSession: { messageCount: number; messages: { id: string; role: string }[] } }>(
      user.key,
      `query($id: ID!) { chatSession(id: $id) { messageCount messages { id role content } } }`,
      { id: sessionId },
    );
    expect(fetched.data?.chatSession.messageCount).toBe(2);
    expect(fetched.data?.chatSession.messages.map((message) => message.id)).toEqual(sent);

    // The same data is visible over REST.
    const rest = await server.request('GET', `/v1/chat/sessions/${sessionId}`, { key: user.key });
    expect(rest.body.messages.map((message: Message) => message.id)).toEqual(sent);

    const listed = await server.graphql<{ chatSessions: { edges: { node: { id: string; messageCount: number } }[] } }>(
      user.key,
      `{ chatSessions(first: 10) { edges { node { id messageCount } } pageInfo { hasNextPage } } }`,
    );
    expect(listed.data?.chatSessions.edges).toEqual([{ node: { id: sessionId, messageCount: 2 } }]);

    const deleted = await server.graphql<{ deleteChatSession: Record<string, unknown> }>(
      user.key,
      `mutation($id: ID!) { deleteChatSession(id: $id) { __typename ... on Deleted { id } ... on AppError { code } } }`,
      { id: sessionId },
    );
    expect(deleted.data?.deleteChatSession).toEqual({ __typename: 'Deleted', id: sessionId });
    const again = await server.graphql<{ deleteChatSession: Record<string, unknown> }>(
      user.key,
      `mutation($id: ID!) { deleteChatSession(id: $id) { __typename ... on Deleted { id } ... on AppError { code } } }`,
      { id: sessionId },
    );
    expect(again.data?.deleteChatSession).toEqual({ __typename: 'AppError', code: 'not_found' });
  });

  it('creates a session with no input at all', async () => {
    const user = await server.createUser();
    const created = await server.graphql<{ createChatSession: { __typename: string; title: string | null } }>(
      user.key,
      `mutation { createChatSession { __typename ... on ChatSession { title messageCount } } }`,
    );
    expect(created.data?.createChatSession).toEqual({ __typename: 'ChatSession', title: null, messageCount: 0 });
  });

  it('reports invalid messages and foreign workspaces as errors with the right code', async () => {
    const user = await server.createUser();
    const session = await createSession({}, user.key);
    const send = (input: unknown) =>
      server.graphql<{ sendChatMessage: { __typename: string; code?: string; message?: string } }>(
        user.key,
        `mutation($sessionId: ID!, $input: SendChatMessageInput!) {
          sendChatMessage(sessionId: $sessionId, input: $input) { __typename ... on AppError { code message } }
        }`,
        { sessionId: session.id, input },
      );
    for (const [input, field] of [
      [{ role: 'robot', content: 'hi' }, 'role'],
      [{ role: 'user', content: '' }, 'content'],
      [{ role: 'user', content: 'x'.repeat(50_001) }, 'content'],
    ] as const) {
      const result = await send(input);
      const error = result.data?.sendChatMessage?.__typename === 'AppError' ? result.data.sendChatMessage : result.errors?.[0];
      const code = error && 'code' in error ? error.code : (error as { extensions?: { code?: string } } | undefined)?.extensions?.code;
      expect(code, JSON.stringify(result)).toBe('bad_request');
      expect(error?.message, JSON.stringify(result)).toMatch(new RegExp(`^${field}: `));
    }
    const fetched = await server.request('GET', `/v1/chat/sessions/${session.id}`, { key: user.key });
    expect(fetched.body.message_count).toBe(0);

    const foreign = await createWorkspace(server, await server.createUser(), 'foreign');
    const created = await server.graphql<{ createChatSession: { __typename: string; code?: string } }>(
      user.key,
      `mutation($ids: [ID!]) { createChatSession(input: { workspaceIds: $ids }) { __typename ... on AppError { code message } } }`,
      { ids: [foreign.id] },
    );
    expect(created.data?.createChatSession).toMatchObject({ __typename: 'AppError', code: 'not_found' });
  });

  it('hides other users’ sessions: not_found for read, send and delete', async () => {
    const session = await createSession({ title: 'mine' });
    const intruder = await server.createUser();
    const read = await server.graphql(intruder.key, `query($id: ID!) { chatSession(id: $id) { id } }`, { id: session.id });
    expect(read.data).toBeNull();
    expect(read.errors?.[0]?.extensions?.code).toBe('not_found');
    const send = await server.graphql<{ sendChatMessage: { __typename: string; code: string } }>(
      intruder.key,
      `mutation($id: ID!) { sendChatMessage(sessionId: $id, input: { role: "user", content: "hi" }) { __typename ... on AppError { code } } }`,
      { id: session.id },
    );
    expect(send.data?.sendChatMessage).toEqual({ __typename: 'AppError', code: 'not_found' });
    const deleted = await server.graphql<{ deleteChatSession: { __typename: string; code: string } }>(
      intruder.key,
      `mutation($id: ID!) { deleteChatSession(id: $id) { __typename ... on AppError { code } } }`,
      { id: session.id },
    );
    expect(deleted.data?.deleteChatSession).toEqual({ __typename: 'AppError', code: 'not_found' });
    const notUuid = await server.graphql(owner.key, `{ chatSession(id: "nope") { id } }`);
    expect(notUuid.errors?.[0]?.extensions?.code).toBe('not_found');
    const stillThere = await server.request('GET', `/v1/chat/sessions/${session.id}`, { key: owner.key });
    expect(stillThere.body.message_count).toBe(0);
  });

  it('applies the same scopes and authentication, naming the scope', async () => {
    const user = await server.createUser();
    const readOnly = await server.createKey(user, ['chat:read']);
    const writeOnly = await server.createKey(user, ['chat:write']);
    const session = await createSession({}, user.key);

    const create = await server.graphql(readOnly, `mutation { createChatSession { __typename } }`);
    expect(create.errors?.[0]?.extensions?.code).toBe('forbidden');
    expect(create.errors?.[0]?.message).toContain('chat:write');
    const send = await server.graphql(
      readOnly,
      `mutation($id: ID!) { sendChatMessage(sessionId: $id, input: { role: "user", content: "x" }) { __typename } }`,
      { id: session.id },
    );
    expect(send.errors?.[0]?.extensions?.code).toBe('forbidden');
    expect(send.errors?.[0]?.message).toContain('chat:write');

    for (const query of [`{ chatSessions { edges { node { id } } } }`, `{ chatSession(id: "${session.id}") { id } }`]) {
      const denied = await server.graphql(writeOnly, query);
      expect(denied.errors?.[0]?.extensions?.code, query).toBe('forbidden');
      expect(denied.errors?.[0]?.message, query).toContain('chat:read');
      const anonymous = await server.graphql(null, query);
      expect(anonymous.errors?.[0]?.extensions?.code, query).toBe('unauthorized');
    }
    const anonymousCreate = await server.graphql(null, `mutation { createChatSession { __typename } }`);
    expect(anonymousCreate.errors?.[0]?.extensions?.code).toBe('unauthorized');
    const fetched = await server.request('GET', `/v1/chat/sessions/${session.id}`, { key: user.key });
    expect(fetched.body.message_count).toBe(0);
    expect((await server.request('GET', '/v1/chat/sessions', { key: user.key })).body).toHaveLength(1);
  });
});
