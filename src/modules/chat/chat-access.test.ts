import { describe, expect, it } from 'vitest';
import { chatBed, type MessageBody, type SessionBody } from '../../../test/support/chat.js';
import { createWorkspace, isoTimestamp, missingId, uuid } from '../../../test/support/fixtures.js';
import { expectError, type TestServer, type TestUser } from '../../../test/support/server.js';

// Chat sessions deleted, named by odd ids, and guarded from other users and scopes, over REST and GraphQL.
let server: TestServer;
let owner: TestUser;
const { createSession, sendMessage } = chatBed((started) => ({ server, owner } = started));

describe('chat sessions over REST: deletion, ids and access', () => {
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
    expect(listed.body.map((s: SessionBody) => s.id)).not.toContain(session.id);
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
    expect(stillThere.body.messages.map((m: MessageBody) => m.content)).toEqual(['secret']);
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
    expect(rest.body.messages.map((message: MessageBody) => message.id)).toEqual(sent);

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
