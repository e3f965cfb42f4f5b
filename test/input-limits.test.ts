import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkJson, maxJsonDepth, maxMetadataBytes } from '../src/input-limits.js';
import { expectError, serverBed, type TestResponse, type TestServer, type TestUser } from './support/server.js';
import { createWorkspace } from './support/fixtures.js';

let server: TestServer;
let owner: TestUser;

serverBed((started) => ({ server, user: owner } = started));

const newWorkspace = (name?: string) => createWorkspace(server, owner, name);

const uploadPath = (workspaceId: string) => `/v1/kb/workspaces/${workspaceId}/documents`;

/** A multipart body written byte for byte, as curl sends it: `disposition` goes into the file part's header as given. */
async function rawMultipart(workspaceId: string, parts: { disposition: string; content: string | Uint8Array }[]): Promise<TestResponse> {
  const boundary = 'rawboundary1234';
  const chunks: Buffer[] = [];
  for (const part of parts) {
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; `), Buffer.from(part.disposition, 'latin1'));
    chunks.push(Buffer.from('\r\nContent-Type: text/plain\r\n\r\n'), Buffer.from(part.content), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  const response = await fetch(new URL(uploadPath(workspaceId), server.url), {
    method: 'POST',
    headers: { authorization: `Bearer ${owner.key}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
    body: Buffer.concat(chunks),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, body: text ? JSON.parse(text) : undefined };
}

/** `name` as the UTF-8 bytes a browser or curl puts between the quotes, spelled as a Latin-1 string. */
const utf8Bytes = (name: string) => Buffer.from(name, 'utf8').toString('latin1');

/** A JSON upload with a raw JSON text for metadata (so it can nest deeper than JSON.stringify allows). */
function jsonUpload(workspaceId: string, filename: string, metadataJson: string) {
  return server.request('POST', uploadPath(workspaceId), {
    key: owner.key,
    body: `{"filename":${JSON.stringify(filename)},"content":"text ${Math.random()}","metadata":${metadataJson}}`,
    headers: { 'content-type': 'application/json' },
  });
}

function multipartUpload(workspaceId: string, filename: string, metadataJson?: string) {
  const parts = [{ disposition: `name="file"; filename="${utf8Bytes(filename)}"`, content: `text ${Math.random()}` }];
  if (metadataJson !== undefined) parts.push({ disposition: 'name="metadata"', content: metadataJson });
  return rawMultipart(workspaceId, parts);
}

/**
 * uploadDocument (or uploadDocuments) over GraphQL's multipart request, written byte for byte:
 * metadata as a raw JSON variable (or a literal), the file name in RFC 5987 form so that any
 * character reaches the server as it is.
 */
async function graphqlUpload(workspaceId: string, filename: string, metadataJson: string | null, options: { many?: boolean; literal?: string } = {}) {
  const metadataArgument = options.literal ?? '$metadata';
  const metadataVariable = options.literal ? '' : ', $metadata: JSON';
  const query = options.many
    ? `mutation($w: ID!, $f: [File!]!${metadataVariable}) { result: uploadDocuments(workspaceId: $w, files: $f, metadata: ${metadataArgument}) { id filename metadata } }`
    : `mutation($w: ID!, $f: File!${metadataVariable}) { result: uploadDocument(workspaceId: $w, file: $f, metadata: ${metadataArgument}) { id filename metadata } }`;
  const metadata = options.literal ? '' : `,"metadata":${metadataJson ?? 'null'}`;
  const operations = `{"query":${JSON.stringify(query)},"variables":{"w":"${workspaceId}","f":${options.many ? '[null]' : 'null'}${metadata}}}`;
  const map = JSON.stringify({ 0: [options.many ? 'variables.f.0' : 'variables.f'] });
  const boundary = 'graphqlboundary5678';
  const body = [
    `--${boundary}\r\nContent-Disposition: form-data; name="operations"\r\n\r\n${operations}\r\n`,
    `--${boundary}\r\nContent-Disposition: form-data; name="map"\r\n\r\n${map}\r\n`,
    `--${boundary}\r\nContent-Disposition: form-data; name="0"; filename*=UTF-8''${rfc5987(filename)}\r\nContent-Type: text/plain\r\n\r\ngraph ${Math.random()}\r\n`,
    `--${boundary}--\r\n`,
  ].join('');
  const response = await fetch(new URL('/graphql', server.url), {
    method: 'POST',
    headers: { authorization: `Bearer ${owner.key}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
    body,
  });
  return (await response.json()) as { data?: { result: unknown } | null; errors?: { message: string; extensions: { code: string; field?: string } }[] };
}

const rfc5987 = (text: string) => encodeURIComponent(text).replace(/['()*]/g, (character) => `%${character.charCodeAt(0).toString(16).toUpperCase()}`);

async function documentCount(workspaceId: string) {
  return server.app.db.prisma.document.count({ where: { workspaceId } });
}

const nested = (depth: number, leaf = '1') => '{"a":'.repeat(depth) + leaf + '}'.repeat(depth);

describe('upload metadata', () => {
  const nulCases: [string, string][] = [
    ['NUL in a value', '{"k":"a\\u0000b"}'],
    ['NUL in a key', '{"k\\u0000":"v"}'],
    ['NUL in a nested value', '{"a":{"b":[1,{"c":"\\u0000"}]}}'],
    ['NUL in a nested key', '{"a":[{"\\u0000":true}]}'],
    ['an unpaired surrogate', '{"k":"\\ud800"}'],
    ['an unpaired surrogate in a key', '{"\\udc00x":1}'],
    // It used to vanish on the way to the store: a key-by-key copy makes it the prototype.
    ['a __proto__ key', '{"a":{"__proto__":{"admin":true}}}'],
  ];

  it.each(nulCases)('refuses %s with 400 naming metadata: JSON, multipart and GraphQL, storing nothing', async (_case, metadata) => {
    const workspace = await newWorkspace();
    const viaJson = expectError(await jsonUpload(workspace.id, 'a.txt', metadata), 400, 'bad_request');
    expect(viaJson.message).toMatch(/^metadata: /);
    const viaMultipart = expectError(await multipartUpload(workspace.id, 'a.txt', metadata), 400, 'bad_request');
    expect(viaMultipart.message).toBe(viaJson.message);
    for (const many of [false, true]) {
      const viaGraphQL = await graphqlUpload(workspace.id, 'a.txt', metadata, { many });
      expect(viaGraphQL.errors?.[0]?.extensions).toMatchObject({ code: 'bad_request', field: 'metadata' });
      expect(viaGraphQL.errors?.[0]?.message).toBe(viaJson.message);
    }
    expect(await documentCount(workspace.id)).toBe(0);
  });

  it('refuses NUL in a GraphQL metadata literal', async () => {
    const workspace = await newWorkspace();
    const result = await graphqlUpload(workspace.id, 'a.txt', null, { literal: '{k: "a\\u0000b"}' });
    expect(result.errors?.[0]?.extensions).toMatchObject({ code: 'bad_request', field: 'metadata' });
    expect(await documentCount(workspace.id)).toBe(0);
  });

  it(`takes ${maxJsonDepth} levels and refuses ${maxJsonDepth + 1}, or 5,000, with 400 on every transport`, async () => {
    const workspace = await newWorkspace();
    const deepest = await jsonUpload(workspace.id, 'deepest.txt', nested(maxJsonDepth));
    expect(deepest.status, deepest.text).toBe(202);
    for (const depth of [maxJsonDepth + 1, 5000]) {
      const viaJson = expectError(await jsonUpload(workspace.id, 'deep.txt', nested(depth)), 400, 'bad_request');
      expect(viaJson.message).toMatch(new RegExp(`^metadata: must not nest more than ${maxJsonDepth} levels deep`));
      expectError(await multipartUpload(workspace.id, 'deep.txt', nested(depth)), 400, 'bad_request');
      const viaGraphQL = await graphqlUpload(workspace.id, 'deep.txt', nested(depth));
      expect(viaGraphQL.errors?.[0]?.extensions).toMatchObject({ code: 'bad_request', field: 'metadata' });
      // Arrays count as levels too.
      const arrays = '['.repeat(depth) + ']'.repeat(depth);
      expectError(await jsonUpload(workspace.id, 'deep.txt', `{"a":${arrays}}`), 400, 'bad_request');
    }
    expect(await documentCount(workspace.id)).toBe(1);
    expect((await server.request('GET', '/healthz')).status).toBe(200);
  });

  it(`refuses metadata over ${maxMetadataBytes} bytes as JSON on every transport`, async () => {
    const workspace = await newWorkspace();
    const big = JSON.stringify({ text: 'é'.repeat(maxMetadataBytes / 2) });
    const viaJson = expectError(await jsonUpload(workspace.id, 'big.txt', big), 400, 'bad_request');
    expect(viaJson.message).toBe(`metadata: must be at most ${maxMetadataBytes} bytes as JSON`);
    expectError(await multipartUpload(workspace.id, 'big.txt', big), 400, 'bad_request');
    expect((await graphqlUpload(workspace.id, 'big.txt', big)).errors?.[0]?.message).toBe(viaJson.message);
    expect(await documentCount(workspace.id)).toBe(0);
  });

  it('keeps metadata that is within the limits exactly as sent', async () => {
    const workspace = await newWorkspace();
    const metadata = { 'key with spaces': ['ü', 1.5, null, false, { '': 'empty key' }], emoji: '😀', rtl: 'שלום' };
    const response = await jsonUpload(workspace.id, 'kept.txt', JSON.stringify(metadata));
    expect(response.status, response.text).toBe(202);
    expect(response.body[0].metadata).toEqual(metadata);
  });
});

describe('deep or broken JSON anywhere in a REST body', () => {
  it('refuses a deeply nested field value with 400 naming it, on any endpoint', async () => {
    const deepArray = '['.repeat(100_000) + ']'.repeat(100_000);
    const cases: [string, string, string][] = [
      ['/v1/kb/workspaces', `{"name":${deepArray}}`, 'name'],
      ['/v1/user/me/api-keys', `{"name":"k","scopes":${deepArray}}`, 'scopes'],
      ['/v1/chat/sessions', `{"title":${nested(100_000)}}`, 'title'],
    ];
    for (const [path, body, field] of cases) {
      const error = expectError(await server.request('POST', path, { key: owner.key, body, headers: { 'content-type': 'application/json' } }), 400, 'bad_request');
      expect(error.message).toMatch(new RegExp(`^${field}: must not nest more than ${maxJsonDepth} levels deep`));
    }
  });

  it('refuses a body that is not UTF-8 (overlong or stray bytes) instead of storing U+FFFD', async () => {
    for (const bytes of [Buffer.from([0xc0, 0xae, 0xc0, 0xae]), Buffer.from([0xff]), Buffer.from([0xed, 0xa0, 0x80])]) {
      const body = Buffer.concat([Buffer.from('{"name":"'), bytes, Buffer.from('"}')]);
      const response = await fetch(new URL('/v1/kb/workspaces', server.url), {
        method: 'POST',
        headers: { authorization: `Bearer ${owner.key}`, 'content-type': 'application/json' },
        body,
      });
      expect(response.status).toBe(400);
      expect(await response.json()).toEqual({ error: 'bad_request', message: 'body: is not valid UTF-8' });
    }
  });

  it('refuses unpaired surrogates and NUL in message content, over REST and GraphQL alike', async () => {
    const session = await server.request('POST', '/v1/chat/sessions', { key: owner.key, json: {} });
    for (const content of ['a\ud800', '\udfffb', 'a\u0000b']) {
      const viaRest = expectError(
        await server.request('POST', `/v1/chat/sessions/${session.body.id}/messages`, { key: owner.key, json: { role: 'user', content } }),
        400,
        'bad_request',
      );
      expect(viaRest.message).toMatch(/^content: /);
      const viaGraphQL = await server.graphql(
        owner.key,
        'mutation($id: ID!, $content: String!) { sendChatMessage(sessionId: $id, input: { role: "user", content: $content }) { __typename } }',
        { id: session.body.id, content },
      );
      expect(viaGraphQL.errors?.[0]?.extensions).toMatchObject({ code: 'bad_request', field: 'content' });
      expect(viaGraphQL.errors?.[0]?.message).toBe(viaRest.message);
    }
    const paired = await server.request('POST', `/v1/chat/sessions/${session.body.id}/messages`, { key: owner.key, json: { role: 'user', content: 'ok 😀' } });
    expect(paired.status).toBe(201);
    expect(paired.body.content).toBe('ok 😀');
  });
});

const refusedInNames: [string, string, RegExp][] = [
  ['a C0 control (BEL)', 'bell\u0007.txt', /control characters \(found U\+0007\)/],
  ['a line feed', 'two\nlines.txt', /control characters \(found U\+000A\)/],
  ['DEL', 'del\u007f.txt', /control characters \(found U\+007F\)/],
  ['a C1 control (NEL)', 'nel\u0085.txt', /control characters \(found U\+0085\)/],
  ['a C1 control (CSI)', 'csi\u009b.txt', /control characters \(found U\+009B\)/],
  ['NUL', 'nul\u0000.txt', /NUL/],
  ...['\u061c', '\u200e', '\u200f', '\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069'].map(
    (character): [string, string, RegExp] => [
      `the bidirectional control U+${character.codePointAt(0)!.toString(16).toUpperCase()}`,
      `evil${character}txt.exe`,
      /bidirectional formatting characters/,
    ],
  ),
  ['a zero-width space', 'Pa\u200bpers.txt', /invisible formatting characters \(found U\+200B\)/],
  ['a zero-width no-break space (BOM) inside', 'a\ufeffb.txt', /invisible formatting characters \(found U\+FEFF\)/],
  ['a word joiner', 'a\u2060b.txt', /invisible formatting characters \(found U\+2060\)/],
  ['a soft hyphen', 'a\u00adb.txt', /invisible formatting characters \(found U\+00AD\)/],
  ['a line separator', 'a\u2028b.txt', /invisible formatting characters \(found U\+2028\)/],
  ['a combining grapheme joiner', 'Pa\u034fpers.txt', /invisible formatting characters \(found U\+034F\)/],
  ['a tag character', 'Papers\u{e0041}.txt', /invisible formatting characters \(found U\+E0041\)/],
  ['an unassigned default-ignorable code point', 'a\u2065b.txt', /invisible formatting characters \(found U\+2065\)/],
  ['the Hangul filler', 'Pa\u3164pers.txt', /characters that show as blank space \(found U\+3164\)/],
  ['a Hangul choseong filler alone', '\u115f', /characters that show as blank space \(found U\+115F\)/],
  ['the halfwidth Hangul filler', 'a\uffa0b.txt', /characters that show as blank space \(found U\+FFA0\)/],
  ['the blank Braille pattern', 'a\u2800b.txt', /characters that show as blank space \(found U\+2800\)/],
  ['an unpaired surrogate', 'a\ud800b.txt', /well-formed Unicode/],
];

describe('names: workspaces, API keys, chat titles', () => {
  it.each(refusedInNames)('refuses %s with 400 naming the field, over REST and GraphQL alike', async (_case, name, problem) => {
    const workspace = await newWorkspace();
    const rest: [string, string, unknown, string][] = [
      ['POST', '/v1/kb/workspaces', { name }, 'name'],
      ['PATCH', `/v1/kb/workspaces/${workspace.id}`, { name }, 'name'],
      ['POST', '/v1/user/me/api-keys', { name, scopes: ['kb:read'] }, 'name'],
      ['POST', '/v1/chat/sessions', { title: name }, 'title'],
    ];
    const messages: string[] = [];
    for (const [method, path, json, field] of rest) {
      const error = expectError(await server.request(method, path, { key: owner.key, json }), 400, 'bad_request');
      expect(error.message).toMatch(new RegExp(`^${field}: `));
      expect(error.message).toMatch(problem);
      messages.push(error.message);
    }
    const graphql = [
      ['mutation($name: String!) { createWorkspace(input: { name: $name }) { __typename } }', {}],
      ['mutation($id: ID!, $name: String!) { updateWorkspace(id: $id, input: { name: $name }) { __typename } }', { id: workspace.id }],
      ['mutation($name: String!) { createApiKey(input: { name: $name, scopes: ["kb:read"] }) { __typename } }', {}],
      ['mutation($name: String!) { createChatSession(input: { title: $name }) { __typename } }', {}],
    ] as const;
    for (const [index, [query, variables]] of graphql.entries()) {
      const result = await server.graphql(owner.key, query, { ...variables, name });
      expect(result.errors?.[0]?.extensions?.code, query).toBe('bad_request');
      expect(result.errors?.[0]?.message).toBe(messages[index]);
    }
    const names = await server.app.db.prisma.workspace.findMany({ where: { userId: owner.id }, select: { name: true } });
    expect(names.map((row) => row.name)).not.toContain(name.trim());
    expect((await server.request('GET', `/v1/kb/workspaces/${workspace.id}`, { key: owner.key })).body.name).toBe(workspace.name);
  });

  it('keeps names with joiners (emoji, Persian), variation selectors, other scripts and symbols', async () => {
    for (const name of ['family 👨‍👩‍👧', 'می‌خواهم', 'naïve café', '日本語', 'a"b', '\ufeffleading BOM is trimmed', 'love ❤\ufe0f', '葛\u{e0100}城', 'ᠠ\u180bᠡ']) {
      const response = await server.request('POST', '/v1/kb/workspaces', { key: owner.key, json: { name } });
      expect(response.status, response.text).toBe(201);
      expect(response.body.name).toBe(name.trim());
    }
  });
});

describe('file names', () => {
  it.each(refusedInNames)('refuses %s in a file name over JSON, multipart and GraphQL; nothing is stored', async (_case, name, problem) => {
    const workspace = await newWorkspace();
    const viaJson = expectError(
      await server.request('POST', uploadPath(workspace.id), { key: owner.key, json: { filename: name, content: 'x' } }),
      400,
      'bad_request',
    );
    expect(viaJson.message).toMatch(/^filename: /);
    expect(viaJson.message).toMatch(problem);
    // An unpaired surrogate cannot be written in UTF-8, so only JSON can send one.
    if (!/[\ud800-\udfff]/.test(name)) {
      // In a multipart header, RFC 5987 can carry every character, CR and LF included.
      const viaMultipart = expectError(await rawMultipart(workspace.id, [{ disposition: `name="file"; filename*=UTF-8''${rfc5987(name)}`, content: 'x' }]), 400, 'bad_request');
      expect(viaMultipart.message).toBe(viaJson.message);
      // As raw bytes between quotes, a C0 control or DEL makes the part's header malformed.
      const raw = expectError(await multipartUpload(workspace.id, name), 400, 'bad_request');
      expect(raw.message).toMatch(/[\u0000-\u001f\u007f]/.test(name) ? /^(filename|body): / : /^filename: /);
      if (!/[\u0000-\u001f\u007f]/.test(name)) expect(raw.message).toBe(viaJson.message);
      const viaGraphQL = await graphqlUpload(workspace.id, name, null);
      expect(viaGraphQL.errors?.[0]?.extensions?.code).toBe('bad_request');
      // GraphQL's multipart parser drops a part whose file name holds CR or LF: the file is then missing.
      if (!/[\r\n]/.test(name)) {
        expect(viaGraphQL.errors?.[0]?.extensions?.field).toBe('filename');
        expect(viaGraphQL.errors?.[0]?.message).toBe(viaJson.message);
      }
    }
    expect(await documentCount(workspace.id)).toBe(0);
  });

  it('reads UTF-8 file names as UTF-8: raw bytes as curl and browsers send them, and RFC 5987', async () => {
    const workspace = await newWorkspace();
    const cases: [string, string][] = [
      [`filename="${utf8Bytes('résumé.txt')}"`, 'résumé.txt'],
      [`filename="${utf8Bytes('日本語のファイル.md')}"`, '日本語のファイル.md'],
      [`filename="${utf8Bytes('emoji 😀.txt')}"`, 'emoji 😀.txt'],
      ["filename*=UTF-8''r%C3%A9sum%C3%A9%202.txt", 'résumé 2.txt'],
      // filename* wins over filename when a client sends both (RFC 6266).
      [`filename="fallback.txt"; filename*=UTF-8''%E2%82%AC%20rates.txt`, '€ rates.txt'],
      ["filename*=ISO-8859-1''caf%E9.txt", 'café.txt'],
    ];
    for (const [disposition, expected] of cases) {
      const response = await rawMultipart(workspace.id, [{ disposition: `name="file"; ${disposition}`, content: `content of ${expected}` }]);
      expect(response.status, response.text).toBe(202);
      expect(response.body[0].filename).toBe(expected);
      const stored = await server.request('GET', `/v1/kb/documents/${response.body[0].id}`, { key: owner.key });
      expect(stored.body.filename).toBe(expected);
    }
    const viaGraphQL = await graphqlUpload(workspace.id, 'naïve.txt', null);
    expect(viaGraphQL.data?.result).toMatchObject({ filename: 'naïve.txt' });
  });

  it('keeps quotes, semicolons and apostrophes in file names whole', async () => {
    const workspace = await newWorkspace();
    for (const name of ['a"b.txt', 'x";y.txt', "it's (1).txt", 'semi;colon.txt', '..."', '.."x']) {
      const viaJson = await server.request('POST', uploadPath(workspace.id), { key: owner.key, json: { filename: name, content: `json ${name}` } });
      expect(viaJson.status, viaJson.text).toBe(202);
      expect(viaJson.body[0].filename).toBe(name);
      const viaMultipart = await rawMultipart(workspace.id, [
        { disposition: `name="file"; filename*=UTF-8''${rfc5987(name)}`, content: `multipart ${name}` },
      ]);
      expect(viaMultipart.status, viaMultipart.text).toBe(202);
      expect(viaMultipart.body[0].filename).toBe(name);
    }
  });
});

describe('HEAD', () => {
  it('answers REST GET routes as GET does, without a body', async () => {
    await newWorkspace();
    await newWorkspace();
    const workspace = await newWorkspace();
    for (const path of ['/v1/user/me', '/v1/kb/workspaces?limit=1', `/v1/kb/workspaces/${workspace.id}`, `/v1/kb/workspaces/${workspace.id}/stats`, '/v1/user/me/credits']) {
      const get = await fetch(new URL(path, server.url), { headers: { authorization: `Bearer ${owner.key}` } });
      const getBody = await get.arrayBuffer();
      const head = await fetch(new URL(path, server.url), { method: 'HEAD', headers: { authorization: `Bearer ${owner.key}` } });
      expect(head.status, path).toBe(get.status);
      expect(await head.text()).toBe('');
      expect(head.headers.get('content-type')).toBe(get.headers.get('content-type'));
      expect(head.headers.get('link')).toBe(get.headers.get('link'));
      expect(Number(head.headers.get('content-length'))).toBe(getBody.byteLength);
    }
    const list = await fetch(new URL('/v1/kb/workspaces?limit=1', server.url), { method: 'HEAD', headers: { authorization: `Bearer ${owner.key}` } });
    expect(list.headers.get('link')).toMatch(/rel="next"/);
  });

  it('answers errors as GET does: 401, 404, 400', async () => {
    const cases: [string, string | null, number][] = [
      ['/v1/kb/workspaces', null, 401],
      ['/v1/kb/workspaces/00000000-0000-4000-8000-000000000000', owner.key, 404],
      ['/v1/kb/workspaces?limit=0', owner.key, 400],
      ['/v1/nothing', owner.key, 404],
    ];
    for (const [path, key, status] of cases) {
      const headers = key ? { authorization: `Bearer ${key}` } : undefined;
      const get = await fetch(new URL(path, server.url), { headers });
      const head = await fetch(new URL(path, server.url), { method: 'HEAD', headers });
      expect(get.status, path).toBe(status);
      expect(head.status, path).toBe(status);
      expect(await head.text()).toBe('');
    }
  });

  it('answers /healthz and /readyz', async () => {
    for (const path of ['/healthz', '/readyz']) {
      const head = await fetch(new URL(path, server.url), { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(head.headers.get('content-type')).toBe('application/json');
      expect(await head.text()).toBe('');
      const post = await server.request('POST', path);
      expectError(post, 405, 'method_not_allowed');
      expect(post.headers.get('allow')).toBe('GET, HEAD');
    }
  });

  it('is listed in Allow wherever GET is', async () => {
    const cases: [string, string, string][] = [
      ['PUT', '/v1/kb/workspaces', 'GET, HEAD, POST'],
      ['POST', '/v1/kb/documents/00000000-0000-4000-8000-000000000000', 'GET, HEAD, PATCH, DELETE'],
      ['GET', '/v1/chat/sessions/00000000-0000-4000-8000-000000000000/messages', 'POST'],
      ['HEAD', '/v1/chat/sessions/00000000-0000-4000-8000-000000000000/messages', 'POST'],
    ];
    for (const [method, path, allow] of cases) {
      const response = await fetch(new URL(path, server.url), { method, headers: { authorization: `Bearer ${owner.key}` } });
      expect(response.status, `${method} ${path}`).toBe(405);
      expect(response.headers.get('allow')).toBe(allow);
    }
  });
});

describe('timestamps of new rows', () => {
  it('gives a new workspace, chat session and document an updated_at equal to its created_at', async () => {
    for (let round = 0; round < 10; round += 1) {
      const workspace = await newWorkspace();
      expect(workspace.updated_at).toBe(workspace.created_at);
      const session = await server.request('POST', '/v1/chat/sessions', { key: owner.key, json: { title: `t${round}` } });
      expect(session.body.updated_at).toBe(session.body.created_at);
      const upload = await server.request('POST', uploadPath(workspace.id), { key: owner.key, json: { filename: 'a.txt', content: `round ${round}` } });
      expect(upload.body[0].updated_at).toBe(upload.body[0].created_at);
      const viaGraphQL = await server.graphql<{ createWorkspace: { createdAt: string; updatedAt: string } }>(
        owner.key,
        'mutation($name: String!) { createWorkspace(input: { name: $name }) { ... on Workspace { createdAt updatedAt } } }',
        { name: `graph ${round} ${Math.random()}` },
      );
      expect(viaGraphQL.data!.createWorkspace.updatedAt).toBe(viaGraphQL.data!.createWorkspace.createdAt);
    }
    // In the store, to the microsecond.
    const earlier = await server.app.db.prisma.$queryRaw<{ count: bigint }[]>`
      SELECT count(*) AS count FROM (
        SELECT created_at, updated_at FROM workspaces UNION ALL
        SELECT created_at, updated_at FROM chat_sessions UNION ALL
        SELECT created_at, updated_at FROM documents
      ) AS rows WHERE updated_at < created_at`;
    expect(Number(earlier[0]!.count)).toBe(0);
  });

  it('never lets a later write move updated_at before created_at', async () => {
    const workspace = await newWorkspace();
    await server.app.db.prisma.workspace.update({ where: { id: workspace.id }, data: { updatedAt: new Date(0) } });
    const fetched = await server.request('GET', `/v1/kb/workspaces/${workspace.id}`, { key: owner.key });
    expect(fetched.body.updated_at).toBe(workspace.created_at);
    const renamed = await server.request('PATCH', `/v1/kb/workspaces/${workspace.id}`, { key: owner.key, json: { name: `renamed ${Math.random()}` } });
    expect(Date.parse(renamed.body.updated_at)).toBeGreaterThanOrEqual(Date.parse(renamed.body.created_at));
  });
});

/** Whether a parsed JSON value has an own `__proto__` key anywhere. */
function hasProtoKey(value: unknown): boolean {
  if (Array.isArray(value)) return value.some(hasProtoKey);
  if (value === null || typeof value !== 'object') return false;
  return Object.hasOwn(value, '__proto__') || Object.values(value).some(hasProtoKey);
}

describe('checkJson', () => {
  it('measures exactly what JSON.stringify writes, in UTF-8 bytes', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), (value) => {
        const json = JSON.stringify(value);
        // fast-check's JSON values may hold -0, which JSON writes as 0; and no lone surrogates.
        const clean = JSON.parse(json) as unknown;
        // fast-check also makes `__proto__` keys, which checkJson refuses by design (the HTTP cases above).
        if (hasProtoKey(clean)) expect(() => checkJson('value', clean, { maxDepth: 64 })).toThrow('a key must not be "__proto__"');
        else expect(checkJson('value', clean, { maxDepth: 64 })).toBe(Buffer.byteLength(JSON.stringify(clean)));
      }),
    );
  });

  it('walks any depth without recursion', () => {
    let value: unknown = 1;
    for (let depth = 0; depth < 1_000_000; depth += 1) value = [value];
    expect(() => checkJson('value', value)).toThrow(`value: must not nest more than ${maxJsonDepth} levels deep`);
    expect(() => checkJson('value', value, { maxDepth: 2_000_000 })).not.toThrow();
  });
});
