import { describe, expect, it } from 'vitest';
import { chatBed, type MessageBody, type SessionBody } from '../../../test/support/chat.js';
import { createWorkspace, isoTimestamp, missingId, uuid } from '../../../test/support/fixtures.js';
import { expectError, type TestServer, type TestUser } from '../../../test/support/server.js';

// Sessions and messages over REST; deletion, ids, access and GraphQL are in chat-access.test.ts.
let server: TestServer;
let owner: TestUser;
const { createSession, sendMessage } = chatBed((started) => ({ server, owner } = started));

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
    expect(response.body.map((session: SessionBody) => session.id)).toEqual([second.id, first.id]);
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
      titles.push(...page.body.map((session: SessionBody) => session.title!));
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
    expect(listed.body.find((s: SessionBody) => s.id === session.id).message_count).toBe(3);
  });

  it('keeps many quickly sent messages in the order they were sent', async () => {
    const session = await createSession({ title: 'burst' });
    const sent: string[] = [];
    for (let index = 0; index < 15; index += 1) sent.push((await sendMessage(session.id, `message ${index}`)).id);
    const fetched = await server.request('GET', `/v1/chat/sessions/${session.id}`, { key: owner.key });
    expect(fetched.body.message_count).toBe(15);
    expect(fetched.body.messages.map((message: MessageBody) => message.id)).toEqual(sent);
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
});
