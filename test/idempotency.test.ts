import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdempotencyStore } from '../src/modules/idempotency/store.js';
import { waitForDocuments } from './support/documents.js';
import { expectError, startTestServer, type TestServer, type TestUser } from './support/server.js';

let server: TestServer;
const jwtSecret = `idempotency-test-secret-${randomUUID()}`;
const jwtFor = (userId: string, seconds: number) =>
  new SignJWT({ scope: 'kb:read kb:write' })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(userId)
    .setIssuedAt()
    .setExpirationTime(`${seconds}s`)
    .sign(new TextEncoder().encode(jwtSecret));
let alice: TestUser;
let bob: TestUser;
/** Per user: a workspace and a chat session the routes that need one post into. */
const homes = new Map<string, { workspaceId: string; sessionId: string }>();

beforeAll(async () => {
  server = await startTestServer({ KB_JWT_SECRET: jwtSecret });
  [alice, bob] = await Promise.all([server.createUser(), server.createUser()]);
  for (const user of [alice, bob]) {
    const workspace = await server.request('POST', '/v1/kb/workspaces', { key: user.key, json: { name: 'home' } });
    const session = await server.request('POST', '/v1/chat/sessions', { key: user.key, json: { title: 'home' } });
    homes.set(user.key, { workspaceId: workspace.body.id, sessionId: session.body.id });
  }
}, 120_000);
afterAll(() => server?.close());

type Answer = { status: number; headers: Headers; text: string; body: any };

async function answer(response: Response): Promise<Answer> {
  const text = await response.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: response.status, headers: response.headers, text, body };
}

/** A POST with a JSON body, or a multipart upload when `form` is given. */
function post(key: string, path: string, options: { json?: unknown; form?: FormData; idempotencyKey?: string; headers?: Record<string, string> }) {
  const headers = new Headers(options.headers);
  headers.set('authorization', `Bearer ${key}`);
  if (options.idempotencyKey !== undefined) headers.set('idempotency-key', options.idempotencyKey);
  let body: BodyInit | undefined = options.form;
  if (options.json !== undefined) {
    headers.set('content-type', 'application/json');
    body = JSON.stringify(options.json);
  }
  return fetch(new URL(path, server.url), { method: 'POST', headers, body }).then(answer);
}

const form = (files: { name: string; bytes: string | Uint8Array }[], metadata?: unknown) => {
  const data = new FormData();
  for (const file of files) data.append('file', new File([file.bytes as BlobPart], file.name));
  if (metadata !== undefined) data.append('metadata', JSON.stringify(metadata));
  return data;
};

const newKey = () => `key-${randomUUID()}`;
/** Makes this run's files new to the store, whose uploads of known content return the document it has. */
const run = randomUUID();

/** How each creating route is sent (one variant per `n`), what it created, and how many exist. */
type CreatingRoute = {
  name: string;
  status: number;
  send(user: TestUser, n: number, idempotencyKey?: string): Promise<Answer>;
  /** A request the route refuses with 400 before anything is created. */
  sendInvalid(user: TestUser, idempotencyKey: string): Promise<Answer>;
  count(user: TestUser): Promise<number>;
};

const listLength = async (user: TestUser, path: string) => {
  const response = await server.request('GET', `${path}${path.includes('?') ? '&' : '?'}limit=1000`, { key: user.key });
  expect(response.status).toBe(200);
  return (response.body as unknown[]).length;
};

const creatingRoutes: CreatingRoute[] = [
  {
    name: 'POST /v1/user/me/api-keys',
    status: 201,
    send: (user, n, idempotencyKey) => post(user.key, '/v1/user/me/api-keys', { idempotencyKey, json: { name: `key ${n}`, scopes: ['kb:read'] } }),
    sendInvalid: (user, idempotencyKey) => post(user.key, '/v1/user/me/api-keys', { idempotencyKey, json: { name: 'key', scopes: ['kb:fly'] } }),
    count: (user) => listLength(user, '/v1/user/me/api-keys'),
  },
  {
    name: 'POST /v1/kb/workspaces',
    status: 201,
    // Names are unique: each test's first request uses a new one.
    send: (user, n, idempotencyKey) => post(user.key, '/v1/kb/workspaces', { idempotencyKey, json: { name: `workspace ${n}` } }),
    sendInvalid: (user, idempotencyKey) => post(user.key, '/v1/kb/workspaces', { idempotencyKey, json: { name: 'x'.repeat(201) } }),
    count: (user) => listLength(user, '/v1/kb/workspaces'),
  },
  {
    name: 'POST /v1/chat/sessions',
    status: 201,
    send: (user, n, idempotencyKey) => post(user.key, '/v1/chat/sessions', { idempotencyKey, json: { title: `session ${n}` } }),
    sendInvalid: (user, idempotencyKey) => post(user.key, '/v1/chat/sessions', { idempotencyKey, json: { title: 'session', colour: 'red' } }),
    count: (user) => listLength(user, '/v1/chat/sessions'),
  },
  {
    name: 'POST /v1/chat/sessions/:id/messages',
    status: 201,
    send: (user, n, idempotencyKey) =>
      post(user.key, `/v1/chat/sessions/${homes.get(user.key)!.sessionId}/messages`, { idempotencyKey, json: { role: 'user', content: `message ${n}` } }),
    sendInvalid: (user, idempotencyKey) =>
      post(user.key, `/v1/chat/sessions/${homes.get(user.key)!.sessionId}/messages`, { idempotencyKey, json: { role: 'user', content: '' } }),
    count: async (user) => (await server.request('GET', `/v1/chat/sessions/${homes.get(user.key)!.sessionId}`, { key: user.key })).body.message_count,
  },
  {
    name: 'POST /v1/kb/workspaces/:id/documents',
    status: 202,
    send: (user, n, idempotencyKey) =>
      post(user.key, `/v1/kb/workspaces/${homes.get(user.key)!.workspaceId}/documents`, {
        idempotencyKey,
        form: form([{ name: `note-${n}.txt`, bytes: `Note number ${n} of run ${run}.` }], { n }),
      }),
    sendInvalid: (user, idempotencyKey) =>
      post(user.key, `/v1/kb/workspaces/${homes.get(user.key)!.workspaceId}/documents`, { idempotencyKey, form: form([{ name: 'empty.txt', bytes: '' }]) }),
    count: (user) => listLength(user, `/v1/kb/workspaces/${homes.get(user.key)!.workspaceId}/documents`),
  },
];

let variant = 0;
/** A variant not sent before: a new workspace name, a new file's bytes. */
const fresh = () => (variant += 1);

const expectReplayOf = (replay: Answer, first: Answer) => {
  expect(replay.status).toBe(first.status);
  expect(replay.text).toBe(first.text);
  expect(replay.headers.get('content-type')).toBe(first.headers.get('content-type'));
  expect(replay.headers.get('idempotent-replayed')).toBe('true');
};

/** Runs SQL on the store of the server under test (its clock, its rows). */
const sql = (text: string, ...values: unknown[]) => server.app.db.prisma.$executeRawUnsafe(text, ...values);

describe.each(creatingRoutes)('$name with an Idempotency-Key', (route) => {
  it('runs once: a retry with the same key and request gets the first answer, marked as replayed', async () => {
    const before = await route.count(alice);
    const key = newKey();
    const n = fresh();
    const first = await route.send(alice, n, key);
    expect(first.status, first.text).toBe(route.status);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    for (let retry = 0; retry < 2; retry += 1) expectReplayOf(await route.send(alice, n, key), first);
    expect(await route.count(alice)).toBe(before + 1);
  });

  it('refuses the same key with another body (422) and creates nothing', async () => {
    const key = newKey();
    const first = await route.send(alice, fresh(), key);
    expect(first.status, first.text).toBe(route.status);
    const before = await route.count(alice);
    const other = await route.send(alice, fresh(), key);
    expect(expectError(other, 422, 'idempotency_key_reused').message).toContain('Idempotency-Key');
    expect(await route.count(alice)).toBe(before);
  });

  it('keeps keys per user: another user with the same key runs their own request', async () => {
    const key = newKey();
    const n = fresh();
    const aliceAnswer = await route.send(alice, n, key);
    const bobBefore = await route.count(bob);
    const bobAnswer = await route.send(bob, n, key);
    expect(bobAnswer.status, bobAnswer.text).toBe(route.status);
    expect(bobAnswer.headers.get('idempotent-replayed')).toBeNull();
    expect(bobAnswer.body.id ?? bobAnswer.body[0].id).not.toBe(aliceAnswer.body.id ?? aliceAnswer.body[0].id);
    expect(await route.count(bob)).toBe(bobBefore + 1);
  });

  it('refuses a key that is not 1 to 255 printable ASCII characters with 400 naming the header', async () => {
    const before = await route.count(alice);
    for (const [key, problem] of [
      ['k'.repeat(256), 'it has 256'],
      ['tab\there', 'found the control character U+0009 at position 4'],
      ['caf\u00e9', 'found the byte 0xE9, which is not ASCII, at position 4'],
    ] as const) {
      const refused = expectError(await route.send(alice, fresh(), key), 400, 'bad_request');
      expect(refused.message).toBe(`Idempotency-Key: must be 1 to 255 printable ASCII characters (${problem})`);
    }
    // White space alone is trimmed to nothing by HTTP.
    expect(expectError(await route.send(alice, fresh(), '   '), 400, 'bad_request').message).toContain('(it is empty)');
    // The longest key is fine.
    const longest = `${newKey()} ~!`.padEnd(255, '~');
    expect((await route.send(alice, fresh(), longest)).status).toBe(route.status);
    expect(await route.count(alice)).toBe(before + 1);
  });

  it('runs exactly one of many simultaneous requests with the same key; the others are told to wait or get its answer', async () => {
    const before = await route.count(alice);
    const key = newKey();
    const n = fresh();
    const answers = await Promise.all(Array.from({ length: 12 }, () => route.send(alice, n, key)));
    const executed = answers.filter((item) => item.status === route.status && item.headers.get('idempotent-replayed') === null);
    expect(executed).toHaveLength(1);
    for (const item of answers) {
      if (item === executed[0]) continue;
      if (item.status === 409) {
        expectError(item, 409, 'idempotency_key_in_use');
        expect(item.headers.get('retry-after')).toBe('1');
      } else {
        expectReplayOf(item, executed[0]!);
      }
    }
    expect(await route.count(alice)).toBe(before + 1);
    // Afterwards every retry is a replay.
    expectReplayOf(await route.send(alice, n, key), executed[0]!);
  });

  it('does not keep a 400: the corrected request with the same key runs', async () => {
    const before = await route.count(alice);
    const key = newKey();
    expectError(await route.sendInvalid(alice, key), 400, 'bad_request');
    expectError(await route.sendInvalid(alice, key), 400, 'bad_request');
    const corrected = await route.send(alice, fresh(), key);
    expect(corrected.status, corrected.text).toBe(route.status);
    expect(corrected.headers.get('idempotent-replayed')).toBeNull();
    expect(await route.count(alice)).toBe(before + 1);
  });

  it('treats an expired key as new', async () => {
    const key = newKey();
    const n = fresh();
    const first = await route.send(alice, n, key);
    expect(first.status, first.text).toBe(route.status);
    // Stored for 24 hours from the first request.
    const [row] = await server.app.db.prisma.$queryRawUnsafe<{ hours: number }[]>(
      `SELECT extract(epoch FROM expires_at - created_at)::float / 3600 AS hours FROM idempotency_keys WHERE user_id = $1::uuid AND key = $2`,
      alice.id,
      key,
    );
    expect(row!.hours).toBeCloseTo(24, 3);
    await sql(`UPDATE idempotency_keys SET expires_at = clock_timestamp() - interval '1 second' WHERE user_id = $1::uuid AND key = $2`, alice.id, key);
    const before = await route.count(alice);
    const again = await route.send(alice, fresh(), key);
    expect(again.status, again.text).toBe(route.status);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(await route.count(alice)).toBe(before + 1);
  });

  it('answers 409 with Retry-After while the first request is in progress, and takes over a key whose holder stopped', async () => {
    const key = newKey();
    const n = fresh();
    const first = await route.send(alice, n, key);
    expect(first.status, first.text).toBe(route.status);
    // As a request in progress leaves its row: no response yet, held by a lease (the same request hash).
    await sql(
      `UPDATE idempotency_keys SET response_status = NULL, response_headers = NULL, response_body = NULL, expires_at = clock_timestamp() + interval '1 minute'
        WHERE user_id = $1::uuid AND key = $2`,
      alice.id,
      key,
    );
    const before = await route.count(alice);
    const busy = await route.send(alice, n, key);
    expectError(busy, 409, 'idempotency_key_in_use');
    expect(busy.headers.get('retry-after')).toBe('1');
    // Another request with a key in use is still another request.
    expectError(await route.send(alice, fresh(), key), 422, 'idempotency_key_reused');
    expect(await route.count(alice)).toBe(before);
    // The process holding it died: its lease is not renewed and runs out.
    await sql(`UPDATE idempotency_keys SET expires_at = clock_timestamp() - interval '1 millisecond' WHERE user_id = $1::uuid AND key = $2`, alice.id, key);
    const takenOver = await route.send(alice, fresh(), key);
    expect(takenOver.status, takenOver.text).toBe(route.status);
    expect(takenOver.headers.get('idempotent-replayed')).toBeNull();
    expect(await route.count(alice)).toBe(before + 1);
  });
});

describe('Idempotency-Key across requests', () => {
  it('refuses one key on two endpoints, and on two paths of one endpoint', async () => {
    const key = newKey();
    expect((await creatingRoutes[1]!.send(alice, fresh(), key)).status).toBe(201);
    expectError(await post(alice.key, '/v1/chat/sessions', { idempotencyKey: key, json: { title: 'x' } }), 422, 'idempotency_key_reused');
    const sessionKey = newKey();
    const other = await server.request('POST', '/v1/chat/sessions', { key: alice.key, json: {} });
    expect((await post(alice.key, `/v1/chat/sessions/${homes.get(alice.key)!.sessionId}/messages`, { idempotencyKey: sessionKey, json: { role: 'user', content: 'hi' } })).status).toBe(201);
    expectError(await post(alice.key, `/v1/chat/sessions/${other.body.id}/messages`, { idempotencyKey: sessionKey, json: { role: 'user', content: 'hi' } }), 422, 'idempotency_key_reused');
  });

  it('takes a body with its keys in another order, or spaced otherwise, as the same request', async () => {
    const key = newKey();
    const first = await post(alice.key, '/v1/user/me/api-keys', { idempotencyKey: key, json: { name: 'ordered', scopes: ['kb:read'] } });
    const reordered = await fetch(new URL('/v1/user/me/api-keys', server.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${alice.key}`, 'idempotency-key': key, 'content-type': 'application/json' },
      body: '{ "scopes": [ "kb:read" ],\n  "name": "ordered" }',
    }).then(answer);
    expectReplayOf(reordered, first);
  });

  it('replays a created API key to its credential only, and keeps the raw key sealed in the store', async () => {
    const key = newKey();
    const first = await post(alice.key, '/v1/user/me/api-keys', { idempotencyKey: key, json: { name: 'sealed', scopes: ['kb:read'] } });
    expect(first.status).toBe(201);
    expect(first.body.raw_key).toMatch(/^sk_/);
    expectReplayOf(await post(alice.key, '/v1/user/me/api-keys', { idempotencyKey: key, json: { name: 'sealed', scopes: ['kb:read'] } }), first);
    const [stored] = await server.app.db.prisma.$queryRawUnsafe<{ body: Uint8Array }[]>(
      'SELECT response_body AS body FROM idempotency_keys WHERE user_id = $1::uuid AND key = $2',
      alice.id,
      key,
    );
    expect(Buffer.from(stored!.body).includes(first.body.raw_key)).toBe(false);
    expect(Buffer.from(stored!.body).includes('sealed')).toBe(false);
    // Another key of the same user: another credential, so another request.
    const otherKey = await server.createKey(alice, ['user:read', 'user:write']);
    expectError(await post(otherKey, '/v1/user/me/api-keys', { idempotencyKey: key, json: { name: 'sealed', scopes: ['kb:read'] } }), 422, 'idempotency_key_reused');
  });

  it('replays to any JWT of the user, and takes a JWT and an API key for different credentials', async () => {
    const key = newKey();
    const body = { name: `by jwt ${key}` };
    const [jwt, laterJwt] = [await jwtFor(alice.id, 600), await jwtFor(alice.id, 900)];
    expect(laterJwt).not.toBe(jwt);
    const first = await post(jwt, '/v1/kb/workspaces', { idempotencyKey: key, json: body });
    expect(first.status, first.text).toBe(201);
    expectReplayOf(await post(laterJwt, '/v1/kb/workspaces', { idempotencyKey: key, json: body }), first);
    expectError(await post(alice.key, '/v1/kb/workspaces', { idempotencyKey: key, json: body }), 422, 'idempotency_key_reused');
    // Another user's JWT: their own key space.
    const bobs = await post(await jwtFor(bob.id, 600), '/v1/kb/workspaces', { idempotencyKey: key, json: body });
    expect(bobs.status, bobs.text).toBe(201);
    expect(bobs.body.id).not.toBe(first.body.id);
  });

  it("does not replay to a JWT with other scopes: a created key's raw value stays with credentials as trusted as the first", async () => {
    const key = newKey();
    const scoped = (scope: string) =>
      new SignJWT({ scope }).setProtectedHeader({ alg: 'HS256' }).setSubject(alice.id).setIssuedAt().setExpirationTime('600s').sign(new TextEncoder().encode(jwtSecret));
    const all = 'user:read user:write kb:read kb:write chat:read chat:write';
    const body = { name: `all scopes ${key}`, scopes: all.split(' ') };
    const first = await post(await scoped(all), '/v1/user/me/api-keys', { idempotencyKey: key, json: body });
    expect(first.status, first.text).toBe(201);
    expect(first.body.raw_key).toMatch(/^sk_/);
    const narrower = await post(await scoped('user:write'), '/v1/user/me/api-keys', { idempotencyKey: key, json: body });
    expectError(narrower, 422, 'idempotency_key_reused');
    expect(narrower.text).not.toContain(first.body.raw_key);
    // The same scopes in another order are the same credential.
    expectReplayOf(await post(await scoped(all.split(' ').reverse().join(' ')), '/v1/user/me/api-keys', { idempotencyKey: key, json: body }), first);
  });

  it('takes the path as the route reads it: an id in upper case and a trailing slash are the same request', async () => {
    const { sessionId } = homes.get(alice.key)!;
    const key = newKey();
    const json = { role: 'user', content: `case ${key}` };
    const first = await post(alice.key, `/v1/chat/sessions/${sessionId}/messages`, { idempotencyKey: key, json });
    expect(first.status, first.text).toBe(201);
    expectReplayOf(await post(alice.key, `/v1/chat/sessions/${sessionId.toUpperCase()}/messages/`, { idempotencyKey: key, json }), first);
  });

  it('keeps and replays what the operation decided: a 404 and a 409', async () => {
    const missing = randomUUID();
    const key = newKey();
    const notFound = await post(alice.key, `/v1/kb/workspaces/${missing}/documents`, { idempotencyKey: key, form: form([{ name: 'a.txt', bytes: 'a' }]) });
    expectError(notFound, 404, 'not_found');
    expectReplayOf(await post(alice.key, `/v1/kb/workspaces/${missing}/documents`, { idempotencyKey: key, form: form([{ name: 'a.txt', bytes: 'a' }]) }), notFound);

    const conflictKey = newKey();
    const conflict = await post(alice.key, '/v1/kb/workspaces', { idempotencyKey: conflictKey, json: { name: 'HOME' } });
    expectError(conflict, 409, 'conflict');
    // Even once the name is free, the key keeps its answer (as Stripe's do): a new attempt takes a new key.
    await server.request('PATCH', `/v1/kb/workspaces/${homes.get(alice.key)!.workspaceId}`, { key: alice.key, json: { name: 'home renamed' } });
    try {
      expectReplayOf(await post(alice.key, '/v1/kb/workspaces', { idempotencyKey: conflictKey, json: { name: 'HOME' } }), conflict);
    } finally {
      await server.request('PATCH', `/v1/kb/workspaces/${homes.get(alice.key)!.workspaceId}`, { key: alice.key, json: { name: 'home' } });
    }
  });

  it('does not keep refusals made before the operation ran: 403, 415, 413', async () => {
    const key = newKey();
    const readOnly = await server.createKey(alice, ['kb:read']);
    expectError(await post(readOnly, '/v1/kb/workspaces', { idempotencyKey: key, json: { name: `scoped ${key}` } }), 403, 'forbidden');
    const wrongType = await fetch(new URL('/v1/kb/workspaces', server.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${alice.key}`, 'idempotency-key': key, 'content-type': 'text/plain' },
      body: JSON.stringify({ name: `typed ${key}` }),
    }).then(answer);
    expectError(wrongType, 415, 'unsupported_media_type');
    expectError(await post(alice.key, '/v1/kb/workspaces', { idempotencyKey: key, json: { name: 'x'.repeat(server.config.maxJsonBytes) } }), 413, 'payload_too_large');
    const created = await post(alice.key, '/v1/kb/workspaces', { idempotencyKey: key, json: { name: `scoped ${key}` } });
    expect(created.status, created.text).toBe(201);
    expect(created.headers.get('idempotent-replayed')).toBeNull();
  });

  it('refuses an upload retried with the same key but other bytes, or another file name, or other metadata', async () => {
    const path = `/v1/kb/workspaces/${homes.get(alice.key)!.workspaceId}/documents`;
    const key = newKey();
    const bytes = `The original ${randomUUID()}`;
    const first = await post(alice.key, path, { idempotencyKey: key, form: form([{ name: 'a.txt', bytes }], { tag: 1 }) });
    expect(first.status, first.text).toBe(202);
    for (const changed of [
      form([{ name: 'a.txt', bytes: `${bytes}!` }], { tag: 1 }),
      form([{ name: 'b.txt', bytes }], { tag: 1 }),
      form([{ name: 'a.txt', bytes }], { tag: 2 }),
      form([{ name: 'a.txt', bytes }]),
      form([{ name: 'a.txt', bytes }, { name: 'a.txt', bytes }], { tag: 1 }),
    ]) {
      expectError(await post(alice.key, path, { idempotencyKey: key, form: changed }), 422, 'idempotency_key_reused');
    }
    // The same upload sent as JSON text is the same request: the same file and metadata.
    const asJson = await post(alice.key, path, { idempotencyKey: key, json: { filename: 'a.txt', content: bytes, metadata: { tag: 1 } } });
    expectReplayOf(asJson, first);
    // Without metadata too: no metadata part is the same as a JSON body without `metadata`.
    const bare = newKey();
    const bareFirst = await post(alice.key, path, { idempotencyKey: bare, form: form([{ name: 'g.txt', bytes }]) });
    expect(bareFirst.status, bareFirst.text).toBe(202);
    expectReplayOf(await post(alice.key, path, { idempotencyKey: bare, json: { filename: 'g.txt', content: bytes } }), bareFirst);
  });

  it('replays an upload as it was answered, not as the document is now', async () => {
    const path = `/v1/kb/workspaces/${homes.get(alice.key)!.workspaceId}/documents`;
    const key = newKey();
    const upload = () => form([{ name: 'later.txt', bytes: `Read later. ${randomUUID()}` }]);
    const data = upload();
    const first = await post(alice.key, path, { idempotencyKey: key, form: data });
    expect(first.body[0].status).toBe('queued');
    const [document] = await waitForDocuments(server, alice.key, [first.body[0].id]);
    expect(document!.status).toBe('ready');
    expectReplayOf(await post(alice.key, path, { idempotencyKey: key, form: data }), first);
  });

  it('ignores the header where nothing is created', async () => {
    const search = await post(alice.key, '/v1/kb/query', { idempotencyKey: 'not\tchecked', json: { query: 'anything', workspace_id: homes.get(alice.key)!.workspaceId } });
    expect(search.status, search.text).toBe(200);
    expect(search.headers.get('idempotent-replayed')).toBeNull();
  });

  it('is not honoured by /graphql', async () => {
    const key = newKey();
    const create = () =>
      fetch(new URL('/graphql', server.url), {
        method: 'POST',
        headers: { authorization: `Bearer ${alice.key}`, 'idempotency-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ query: `mutation { createChatSession(input: {title: "graphql"}) { ... on ChatSession { id } } }` }),
      }).then(answer);
    const [a, b] = [await create(), await create()];
    expect(a.body.data.createChatSession.id).not.toBe(b.body.data.createChatSession.id);
  });

  it('deletes expired keys when it sweeps, and only those', async () => {
    const [expired, live] = [newKey(), newKey()];
    for (const key of [expired, live]) expect((await creatingRoutes[2]!.send(alice, fresh(), key)).status).toBe(201);
    await sql(`UPDATE idempotency_keys SET expires_at = clock_timestamp() - interval '1 hour' WHERE user_id = $1::uuid AND key = $2`, alice.id, expired);
    const store = new IdempotencyStore(server.app.db.prisma, { info() {}, error() {} });
    expect(await store.sweep()).toBeGreaterThanOrEqual(1);
    const rows = await server.app.db.prisma.$queryRawUnsafe<{ key: string }[]>(
      'SELECT key FROM idempotency_keys WHERE user_id = $1::uuid AND key = ANY($2::text[])',
      alice.id,
      [expired, live],
    );
    expect(rows.map((row) => row.key)).toEqual([live]);
  });
});

describe('the store, as another process sees it', () => {
  const quiet = { info() {}, error() {} };
  const request = (key: string) => ({ userId: alice.id, key, method: 'POST', path: '/somewhere', requestHash: 'hash' });

  it('keeps a running request by renewing its lease; once renewals stop, another process takes the key over and the first cannot store its answer', async () => {
    const options = { lifetimeMs: 60_000, leaseMs: 400 };
    const [one, other] = [new IdempotencyStore(server.app.db.prisma, quiet, options), new IdempotencyStore(server.app.db.prisma, quiet, options)];
    const key = newKey();
    const begun = await one.begin(request(key));
    if (begun.kind !== 'started') throw new Error(`expected started, got ${begun.kind}`);
    // Three leases later the holder has renewed it all along.
    await new Promise((resolve) => setTimeout(resolve, 1200));
    expect((await other.begin(request(key))).kind).toBe('in_progress');
    expect((await other.begin({ ...request(key), requestHash: 'another' })).kind).toBe('mismatch');
    expect((await other.lookup(alice.id, key))?.inProgress).toBe(true);
    // The holder dies: nothing renews its lease.
    begun.claim.stopRenewing();
    await new Promise((resolve) => setTimeout(resolve, 600));
    const takeover = await other.begin(request(key));
    if (takeover.kind !== 'started') throw new Error(`expected started, got ${takeover.kind}`);
    expect(await begun.claim.complete({ status: 201, headers: {}, body: new TextEncoder().encode('stale') })).toBe(false);
    expect(await takeover.claim.complete({ status: 201, headers: { 'content-type': 'text/plain' }, body: new TextEncoder().encode('fresh') })).toBe(true);
    const replay = await one.begin(request(key));
    if (replay.kind !== 'replay') throw new Error(`expected replay, got ${replay.kind}`);
    expect(replay.response.status).toBe(201);
    expect(replay.response.headers).toEqual({ 'content-type': 'text/plain' });
    expect(Buffer.from(replay.response.body).toString()).toBe('fresh');
  });

  it('lets exactly one of many processes claim a key at once (the primary key decides)', async () => {
    const key = newKey();
    const stores = Array.from({ length: 10 }, () => new IdempotencyStore(server.app.db.prisma, quiet));
    const results = await Promise.all(stores.map((store) => store.begin(request(key))));
    expect(results.filter((result) => result.kind === 'started')).toHaveLength(1);
    expect(results.filter((result) => result.kind === 'in_progress')).toHaveLength(9);
    for (const result of results) if (result.kind === 'started') await result.claim.release();
  });

  it('forgets a released key', async () => {
    const store = new IdempotencyStore(server.app.db.prisma, quiet);
    const key = newKey();
    const begun = await store.begin(request(key));
    if (begun.kind !== 'started') throw new Error(`expected started, got ${begun.kind}`);
    await begun.claim.release();
    expect(await store.lookup(alice.id, key)).toBeNull();
    expect((await store.begin(request(key))).kind).toBe('started');
  });

  it('frees keys left in progress when started as the only process (as the embedded store starts)', async () => {
    const key = newKey();
    const abandoned = new IdempotencyStore(server.app.db.prisma, quiet);
    const begun = await abandoned.begin(request(key));
    if (begun.kind !== 'started') throw new Error(`expected started, got ${begun.kind}`);
    begun.claim.stopRenewing();
    const restarted = new IdempotencyStore(server.app.db.prisma, quiet);
    await restarted.start({ exclusive: true });
    await restarted.stop();
    expect(await restarted.lookup(alice.id, key)).toBeNull();
  });
});
