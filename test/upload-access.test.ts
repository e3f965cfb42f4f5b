import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer, type TestUser } from './support/server.js';

let server: TestServer;
let owner: TestUser;
let workspaceId: string;

beforeAll(async () => {
  server = await startTestServer();
  owner = await server.createUser();
  const created = await server.request('POST', '/v1/kb/workspaces', { key: owner.key, json: { name: 'uploads' } });
  workspaceId = created.body.id;
});
afterAll(() => server.close());

/**
 * POSTs a multipart upload whose body stays open until the answer has arrived (or 10 s have
 * passed): an answer that comes first was given without reading the body.
 */
async function uploadWithStalledBody(authorization: string | null) {
  const boundary = 'kb-test-boundary';
  const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.txt"\r\nContent-Type: text/plain\r\n\r\n`;
  let answered!: () => void;
  const answer = new Promise<void>((resolve) => (answered = resolve));
  let bodyEnded = false;
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      controller.enqueue(new TextEncoder().encode(head + 'x'.repeat(64 * 1024)));
      await Promise.race([answer, new Promise((resolve) => setTimeout(resolve, 10_000))]);
      bodyEnded = true;
      controller.enqueue(new TextEncoder().encode(`\r\n--${boundary}--\r\n`));
      controller.close();
    },
  });
  const headers: Record<string, string> = { 'content-type': `multipart/form-data; boundary=${boundary}` };
  if (authorization) headers.authorization = authorization;
  const response = await fetch(new URL(`/v1/kb/workspaces/${workspaceId}/documents`, server.url), {
    method: 'POST',
    headers,
    body,
    duplex: 'half',
  } as RequestInit);
  const answeredBeforeBodyEnded = !bodyEnded;
  answered();
  return { status: response.status, body: await response.json(), answeredBeforeBodyEnded };
}

describe('access is settled before an upload is read', () => {
  it('answers 401 to an upload without a valid credential before its body has been sent', async () => {
    for (const authorization of [null, 'Bearer sk_not_a_real_key_at_all_0000000000000000']) {
      const result = await uploadWithStalledBody(authorization);
      expect(result.status, String(authorization)).toBe(401);
      expect(result.body.error).toBe('unauthorized');
      expect(result.answeredBeforeBodyEnded, String(authorization)).toBe(true);
    }
  });

  it('answers 403 to an upload with a read-only key before its body has been sent', async () => {
    const readOnly = await server.createKey(owner, ['kb:read']);
    const result = await uploadWithStalledBody(`Bearer ${readOnly}`);
    expect(result.status).toBe(403);
    expect(result.body.error).toBe('forbidden');
    expect(result.answeredBeforeBodyEnded).toBe(true);
  });

  it('still reads the whole upload of a key that may write', async () => {
    const result = await uploadWithStalledBody(`Bearer ${owner.key}`);
    expect(result.status).toBe(202);
    expect(result.answeredBeforeBodyEnded).toBe(false);
  });
});

describe('GraphQL upload arguments that are not files', () => {
  const variants = [
    { name: 'a string variable', query: 'mutation($f: File!, $w: ID!) { uploadDocument(file: $f, workspaceId: $w) { id } }', variables: { f: 'abc' }, field: 'file' },
    { name: 'an object variable', query: 'mutation($f: File!, $w: ID!) { uploadDocument(file: $f, workspaceId: $w) { id } }', variables: { f: { a: 1 } }, field: 'file' },
    { name: 'a string literal', query: 'mutation($w: ID!) { uploadDocument(file: "abc", workspaceId: $w) { id } }', variables: {}, field: 'file' },
    { name: 'numbers in a list', query: 'mutation($w: ID!) { uploadDocuments(files: [1, 2], workspaceId: $w) { id } }', variables: {}, field: 'files' },
  ];
  for (const { name, query, variables, field } of variants) {
    it(`refuses ${name} with bad_request on ${field}, not an internal error`, async () => {
      const result = await server.graphql(owner.key, query, { ...variables, w: workspaceId });
      expect(result.errors?.[0]?.extensions?.code, JSON.stringify(result)).toBe('bad_request');
      expect(result.errors?.[0]?.extensions?.field).toBe(field);
      const list = await server.request('GET', `/v1/kb/workspaces/${workspaceId}/documents`, { key: owner.key });
      expect(list.body.filter((document: { filename: string }) => document.filename !== 'big.txt')).toEqual([]);
    });
  }
});
