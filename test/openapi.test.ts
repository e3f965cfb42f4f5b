import { execFileSync } from 'node:child_process';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routes } from '../src/rest/routes.js';
import { startTestServer, type TestServer, type TestUser } from './support/server.js';
import { createWorkspace } from './support/fixtures.js';

let server: TestServer;
let user: TestUser;
let description: any;

beforeAll(async () => {
  server = await startTestServer();
  user = await server.createUser();
  const response = await fetch(`${server.url}/openapi.json`);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  description = await response.json();
});

afterAll(async () => {
  await server?.close();
});

const openApiPath = (path: string) => path.replace(/:(\w+)/g, '{$1}');

describe('GET /openapi.json', () => {
  it('is a valid OpenAPI 3.1 description', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(description));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    expect(description.openapi).toBe('3.1.0');
  });

  it('describes every route of the route table, and nothing else', () => {
    const described = Object.entries(description.paths as Record<string, Record<string, unknown>>).flatMap(([path, operations]) =>
      Object.keys(operations).map((method) => `${method.toUpperCase()} ${path}`),
    );
    const table = routes.map((route) => `${route.method} ${openApiPath(route.path)}`);
    expect(described.sort()).toEqual([...table].sort());
  });

  it('gives every route a summary, a tag, an operation id and its documented responses', () => {
    const operationIds = new Set<string>();
    for (const route of routes) {
      // Fails for a route added to the table without a description.
      expect(route.summary?.trim(), `${route.method} ${route.path} has no summary`).toBeTruthy();
      const operation = description.paths[openApiPath(route.path)][route.method.toLowerCase()];
      expect(operation.summary).toBe(route.summary);
      expect(operation.tags).toEqual([route.tag]);
      expect(operationIds.has(operation.operationId), `operationId ${operation.operationId} twice`).toBe(false);
      operationIds.add(operation.operationId);
      expect(Object.keys(operation.responses)).toContain(String(route.response.status));
      for (const status of ['401', '403', '429', '500']) expect(Object.keys(operation.responses)).toContain(status);
      for (const response of Object.values(operation.responses) as { headers: Record<string, unknown> }[]) {
        expect(Object.keys(response.headers)).toContain('X-Request-Id');
      }
      if (route.idempotent) expect(operation.parameters.map((parameter: { name: string }) => parameter.name)).toContain('Idempotency-Key');
    }
  });

  it("takes the bodies' rules from the validators the server checks them with", async () => {
    const body = (path: string, method: string) => description.paths[path][method].requestBody.content['application/json'].schema;
    const workspace = body('/v1/kb/workspaces', 'post');
    expect(workspace.required).toEqual(['name']);
    expect(workspace.additionalProperties).toBe(false);
    expect(workspace.properties.name).toMatchObject({ type: 'string', minLength: 1 });
    const pattern = new RegExp(workspace.properties.name.pattern, 'u');
    expect(pattern.test('Papers')).toBe(true);
    expect(pattern.test('   ')).toBe(false);
    expect(pattern.test('Pa\u200bpers')).toBe(false);
    for (const invisible of ['Pa\u3164pers', 'Papers\u{e0041}', 'a\u2800b', 'a\u034fb']) expect(pattern.test(invisible), invisible).toBe(false);
    expect(pattern.test('love ❤\ufe0f')).toBe(true);
    // Explicit characters, no Unicode property escapes: other languages' regular expressions
    // (the fuzzer's, Python's) read it as JavaScript does.
    expect(workspace.properties.name.pattern).not.toMatch(/\\p\{/);
    // What the description allows, the server accepts; what it refuses, the server refuses.
    const accepted = await server.request('POST', '/v1/kb/workspaces', { key: user.key, json: { name: 'Papers' } });
    expect(accepted.status).toBe(201);
    const refused = await server.request('POST', '/v1/kb/workspaces', { key: user.key, json: { name: 'Pa\u200bpers2' } });
    expect(refused.status).toBe(400);

    const search = body('/v1/kb/query', 'post');
    expect(search.properties.top_k.anyOf[0]).toMatchObject({ type: 'integer', minimum: 1, maximum: 100 });
    expect(search.required.sort()).toEqual(['query']);
    // One workspace or several: exactly one of the two fields, as the type's own validator requires.
    expect(search.oneOf).toEqual([{ required: ['workspace_id'] }, { required: ['workspace_ids'] }]);
    const agent = body('/agent/stream', 'post');
    expect(agent.required.sort()).toEqual(['message', 'workspaceIds']);
    expect(agent.properties.workspaceIds).toMatchObject({ type: 'array', minItems: 1 });
  });

  // The fuzzer (schemathesis) reads the description with Python's `re` and counts lengths in code
  // points; the server trims names before it checks them and counts in JavaScript. For each
  // value the server's answer must be the description's, as Python reads it and as JavaScript does.
  it('accepts exactly the names and queries its description allows, read by Python as by JavaScript', async () => {
    const body = (path: string, method: string) => description.paths[path][method].requestBody.content['application/json'].schema;
    const name = body('/v1/kb/workspaces/{id}', 'patch').properties.name;
    const query = body('/v1/kb/query', 'post').properties.query;
    const names = [
      '\n\u00b3\u00ee\u{e28d6}\u0100', // the value schemathesis once found accepted against the description
      ' Papers ', '\tTabbed', 'Newline\n', '\ufeffMarked\ufeff', '\u2028Separated\u2029', '\u3000Ideographic\u3000', '\u00a0NBSP',
      'Line\nbreak', '\u001cFile separator', 'Next line\u0085', 'Zero\u200bwidth', '   ', '\n', '\ufeff',
      'a'.repeat(200), 'b'.repeat(201), ` \n${'c'.repeat(200)}\u3000\n`, '\u{1f600}'.repeat(200), '\u{1f601}'.repeat(201),
    ];
    const queries = ['what', ' \u001c ', '\ufeff', ' \u3000 ', 'q'.repeat(10_001), '\u{1f602}'.repeat(10_000)];
    const pythonCheck = [
      'import json, re, sys',
      'print(json.dumps([[re.search(pattern, value) is not None and (max_length is None or len(value) <= max_length) for value in values] for pattern, values, max_length in json.load(sys.stdin)]))',
    ].join('\n');
    const checked = [
      [name.pattern, names, name.maxLength ?? null],
      [query.pattern, queries, query.maxLength ?? null],
    ];
    const readByPython = JSON.parse(execFileSync('python3', ['-c', pythonCheck], { input: JSON.stringify(checked) }).toString()) as boolean[][];
    const readByJavaScript = [
      names.map((value) => new RegExp(name.pattern, 'u').test(value) && (name.maxLength === undefined || [...value].length <= name.maxLength)),
      queries.map((value) => new RegExp(query.pattern, 'u').test(value) && [...value].length <= query.maxLength),
    ];
    expect(readByJavaScript).toEqual(readByPython);

    const owner = await server.createUser();
    const workspace = await server.request('POST', '/v1/kb/workspaces', { key: owner.key, json: { name: 'Renamed by the description' } });
    expect(workspace.status).toBe(201);
    const acceptedNames = [];
    for (const value of names) {
      const renamed = await server.request('PATCH', `/v1/kb/workspaces/${workspace.body.id}`, { key: owner.key, json: { name: value } });
      expect([200, 400], JSON.stringify(renamed.body)).toContain(renamed.status);
      acceptedNames.push(renamed.status === 200);
    }
    const acceptedQueries = [];
    for (const value of queries) {
      const searched = await server.request('POST', '/v1/kb/query', { key: owner.key, json: { query: value, workspace_id: workspace.body.id } });
      expect([200, 400], JSON.stringify(searched.body)).toContain(searched.status);
      acceptedQueries.push(searched.status === 200);
    }
    expect([acceptedNames, acceptedQueries]).toEqual(readByPython);
    // Both ways are exercised: some of each list is refused, some accepted.
    for (const accepted of readByPython) expect(new Set(accepted)).toEqual(new Set([true, false]));
  });

  it('describes list query parameters as the integers and ids they are parsed into', () => {
    const parameters = description.paths['/v1/kb/workspaces'].get.parameters as { name: string; in: string; schema: any }[];
    const limit = parameters.find((parameter) => parameter.name === 'limit')!;
    expect(limit.in).toBe('query');
    expect(limit.schema).toMatchObject({ type: 'integer', minimum: 1, maximum: 1000 });
    const cursor = parameters.find((parameter) => parameter.name === 'cursor')!;
    expect(new RegExp(cursor.schema.pattern).test('0b8a7e0e-8f4e-4c38-9d70-0a4a9b6b1f5e')).toBe(true);
  });

  it('follows a list through the Link header with the cursor the description gives', async () => {
    for (const name of ['L1', 'L2', 'L3']) await server.request('POST', '/v1/kb/workspaces', { key: user.key, json: { name } });
    const first = await server.request('GET', '/v1/kb/workspaces?limit=2', { key: user.key });
    expect(first.status).toBe(200);
    const next = /<([^>]+)>; rel="next"/.exec(first.headers.get('link') ?? '')?.[1];
    expect(next).toMatch(/cursor=[0-9a-f-]{36}$/);
    const second = await server.request('GET', next!, { key: user.key });
    expect(second.status).toBe(200);
    const names = [...first.body, ...second.body].map((workspace: { name: string }) => workspace.name);
    expect(new Set(names).size).toBe(names.length);
    expect(names).toEqual(expect.arrayContaining(['L1', 'L2', 'L3', 'Papers']));
    const unknown = await server.request('GET', '/v1/kb/workspaces?cursor=not-a-cursor', { key: user.key });
    expect(unknown.status).toBe(400);
  });

  it('describes the responses as the server writes them', async () => {
    const schema = description.paths['/v1/user/me'].get.responses['200'].content['application/json'].schema;
    const me = await server.request('GET', '/v1/user/me', { key: user.key });
    expect(Object.keys(me.body).sort()).toEqual(Object.keys(schema.properties).sort());
    expect(schema.required.sort()).toEqual(Object.keys(schema.properties).sort());
    expect(schema.properties.phone.type).toEqual(['string', 'null']);
    const list = description.paths['/v1/kb/workspaces'].get.responses['200'];
    expect(list.content['application/json'].schema.type).toBe('array');
    expect(Object.keys(list.headers)).toContain('Link');
    expect(description.components.schemas.Error.required.sort()).toEqual(['error', 'message']);
  });

  it("describes a document's file as the bytes of its type, with the headers the server writes", async () => {
    const operation = description.paths['/v1/kb/documents/{id}/file'].get;
    const ok = operation.responses['200'];
    expect(Object.keys(ok.content).sort()).toEqual(
      [
        'application/epub+zip',
        'application/json',
        'application/pdf',
        'application/rtf',
        'application/vnd.oasis.opendocument.presentation',
        'application/vnd.oasis.opendocument.spreadsheet',
        'application/vnd.oasis.opendocument.text',
        'application/vnd.openxmlformats-officedocument.presentationml.presentation',
        'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
        'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
        'image/jpeg',
        'image/png',
        'image/tiff',
        'image/webp',
        'text/csv',
        'text/html',
        'text/markdown',
        'text/plain',
        'text/tab-separated-values',
      ],
    );
    expect(ok.content['application/pdf'].schema).toMatchObject({ type: 'string', format: 'binary' });
    expect(ok.content['text/plain'].schema).toMatchObject({ type: 'string', format: 'binary' });
    expect(ok.content['application/json'].schema.type).toBeUndefined();
    expect(operation.responses['404'].content['application/json'].schema.$ref).toBe('#/components/schemas/Error');
    const workspace = (await createWorkspace(server, user.key, 'Files')).id;
    const uploaded = await server.request('POST', `/v1/kb/workspaces/${workspace}/documents`, { key: user.key, json: { filename: 'a.md', content: '# A' } });
    const file = await fetch(`${server.url}/v1/kb/documents/${uploaded.body[0].id}/file?workspace_id=${workspace}`, { headers: { authorization: `Bearer ${user.key}` } });
    expect(file.status).toBe(200);
    expect(Object.keys(ok.content)).toContain(file.headers.get('content-type')!.split(';')[0]);
    for (const [name, header] of Object.entries(ok.headers as Record<string, { required: boolean; schema: { enum?: string[] } }>)) {
      const value = file.headers.get(name);
      if (header.required) expect(value, name).not.toBeNull();
      if (header.schema.enum) expect(header.schema.enum, name).toContain(value);
    }
    expect(await file.text()).toBe('# A');

    const retry = description.paths['/v1/kb/documents/{id}/retry'].post;
    expect(Object.keys(retry.responses)).toEqual(expect.arrayContaining(['202', '404', '409']));
    expect(retry.responses['202'].content['application/json'].schema.properties.stage.enum.sort()).toEqual(['embedding', 'failed', 'ocr', 'parsing', 'queued', 'ready']);
    expect(retry.parameters.map((parameter: { name: string }) => parameter.name)).not.toContain('Idempotency-Key');
    expect(description.components.schemas.Error.properties.error.enum).toContain('document_not_failed');
  });

  it("describes the agent's events, one schema per type, with the fields the stream sends", () => {
    const events = description.components.schemas.AgentEvent;
    const types = events.oneOf.map((member: any) => member.properties.type.const).sort();
    expect(types).toEqual(['done', 'error', 'job_started', 'reasoning', 'sources', 'token']);
    const stream = description.paths['/agent/stream'].post.responses['200'].content;
    expect(Object.keys(stream)).toEqual(['text/event-stream']);
    const done = events.oneOf.find((member: any) => member.properties?.type?.const === 'done') ?? null;
    expect(done?.required).toEqual(expect.arrayContaining(['type', 'jobId', 'sessionId', 'creditsUsed']));
    const sources = events.oneOf.find((member: any) => member.properties?.type?.const === 'sources');
    expect(Object.keys(sources.properties.sources.items.properties)).toEqual(expect.arrayContaining(['doc_id', 'filename', 'pages']));
  });
});

describe('GET /docs', () => {
  it('serves a reference page whose every asset comes from this server', async () => {
    const page = await fetch(`${server.url}/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'self'");
    const html = await page.text();
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1]!);
    expect(assets.length).toBeGreaterThanOrEqual(3);
    for (const asset of assets) {
      expect(asset, 'no asset from another origin').toMatch(/^\/docs\//);
      const response = await fetch(`${server.url}${asset}`);
      expect(response.status, asset).toBe(200);
      expect((await response.arrayBuffer()).byteLength, asset).toBeGreaterThan(10);
    }
    const start = await (await fetch(`${server.url}/docs/reference.js`)).text();
    expect(start).toContain("url: '/openapi.json'");
    expect(start).toContain('validatorUrl: null');
  });

  it('answers 404 for files that are not its assets, and 405 for other methods', async () => {
    expect((await fetch(`${server.url}/docs/../package.json`)).status).toBe(404);
    expect((await fetch(`${server.url}/docs/%2e%2e%2fpackage.json`)).status).toBe(404);
    expect((await fetch(`${server.url}/docs/index.html`)).status).toBe(404);
    const post = await fetch(`${server.url}/openapi.json`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
  });
});
