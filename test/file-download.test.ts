// What one answer may hold in memory: GET /v1/kb/documents/{id}/file streams the stored bytes
// slice by slice as the client takes them, so a client that stops reading holds about one slice;
// a GraphQL response is held to KB_MAX_GRAPHQL_RESPONSE_BYTES, and a file's base64 to what is
// left of it before any byte is read.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upload, waitForDocuments, type DocumentBody } from './support/documents.js';
import { expectError, startTestServer, type TestServer, type TestUser } from './support/server.js';
import { createWorkspace } from './support/fixtures.js';

let server: TestServer;
let owner: TestUser;
let workspaceId: string;

const responseLimit = 1024 * 1024;
/** A PDF by its signature, random after it: 80 slices of the file route, and incompressible. */
const largeFile = Buffer.concat([Buffer.from('%PDF-1.7\n'), randomBytes(40 * 1024 * 1024 - 9)]);
let large: DocumentBody;

beforeAll(async () => {
  // Ten files an upload, so that an upload's answer fits the small limit (the configuration requires it).
  server = await startTestServer({ KB_MAX_GRAPHQL_RESPONSE_BYTES: String(responseLimit), KB_MAX_UPLOAD_FILES: '10' });
  owner = await server.createUser();
  workspaceId = (await createWorkspace(server, owner.key, 'files')).id;
  const uploaded = await upload(server, owner.key, workspaceId, [{ name: 'large.pdf', bytes: largeFile }]);
  expect(uploaded.status, JSON.stringify(uploaded.body)).toBe(202);
  // Processed (it fails: no readable PDF), so that its parse holds no memory while memory is measured.
  large = (await waitForDocuments(server, owner.key, [(uploaded.body as DocumentBody[])[0]!.id]))[0]!;
}, 180_000);
afterAll(() => server.close());

const filePath = (document: Pick<DocumentBody, 'id' | 'workspace_id'>) => `/v1/kb/documents/${document.id}/file?workspace_id=${document.workspace_id}`;

/**
 * The array buffers of this process (which hosts the server) after a full collection: where the
 * bytes of an answer are, as Buffers. (Its heap is left out: the server's caches move it by tens
 * of megabytes either way.)
 */
function arrayBufferBytes(): number {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
  return process.memoryUsage().arrayBuffers;
}

/** arrayBufferBytes once it holds still: what earlier work left is collected, and nothing is on its way. */
async function settledArrayBufferBytes(): Promise<number> {
  let last = arrayBufferBytes();
  for (let waited = 0; waited < 30_000; waited += 500) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    const now = arrayBufferBytes();
    if (Math.abs(now - last) < 1024 * 1024) return now;
    last = now;
  }
  return last;
}

/** A GET over a raw socket that reads nothing: its bytes wait in the socket until `read` is called. */
function stalledGet(path: string) {
  const { hostname, port } = new URL(server.url);
  const socket = net.connect(Number(port), hostname);
  socket.write(`GET ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${owner.key}\r\n\r\n`);
  return {
    socket,
    /** Whether the answer has begun to arrive (the socket buffers what it is sent while nobody reads). */
    started: () => socket.readableLength > 0,
    /** Reads the whole answer: its head and body. */
    read: () =>
      new Promise<{ head: string; body: Buffer }>((resolve, reject) => {
        const chunks: Buffer[] = [];
        let received = 0;
        let expected: number | undefined;
        let headLength = 0;
        socket.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
          received += chunk.byteLength;
          if (expected === undefined) {
            const all = Buffer.concat(chunks);
            const end = all.indexOf('\r\n\r\n');
            if (end < 0) return;
            headLength = end + 4;
            expected = Number(/content-length: (\d+)/i.exec(all.subarray(0, end).toString('latin1'))?.[1]);
          }
          if (received >= headLength + expected) {
            const all = Buffer.concat(chunks);
            resolve({ head: all.subarray(0, headLength).toString('latin1'), body: all.subarray(headLength) });
          }
        });
        socket.on('error', reject);
        socket.on('close', () => {
          const statusLine = Buffer.concat(chunks).toString('latin1', 0, 200).split('\r\n')[0];
          reject(new Error(`closed after ${received - headLength} bytes of the body of "${statusLine}"`));
        });
      }),
  };
}

async function waitFor(condition: () => boolean, what: string) {
  for (let waited = 0; !condition(); waited += 50) {
    if (waited > 60_000) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('GET /v1/kb/documents/{id}/file', () => {
  it('holds about a slice, not the file, for clients that stop reading; then sends every byte as stored', async () => {
    const before = await settledArrayBufferBytes();
    const clients = [stalledGet(filePath(large)), stalledGet(filePath(large)), stalledGet(filePath(large))];
    await waitFor(() => clients.every((client) => client.started()), 'the answers to begin');
    // Once the server has pushed into the sockets what they take, and stopped there.
    const held = (await settledArrayBufferBytes()) - before;
    // Each client would hold the whole 40 MiB file, and more, if the answer were built in memory:
    // three clients, three copies at least. Streamed, each holds about a slice (1 MiB) beside what
    // its socket takes, and a few more while a slice is on its way from the store.
    expect(held, `${(held / 1024 / 1024).toFixed(1)} MiB held for 3 clients`).toBeLessThan(largeFile.byteLength);

    const [reader, ...others] = clients;
    for (const client of others) client.socket.destroy();
    const { head, body } = await reader!.read();
    reader!.socket.destroy();
    expect(head).toMatch(/^HTTP\/1\.1 200 /);
    expect(head).toMatch(new RegExp(`\r\ncontent-length: ${largeFile.byteLength}\r\n`, 'i'));
    expect(body.byteLength).toBe(largeFile.byteLength);
    expect(body.equals(largeFile)).toBe(true);
  });

  it('closes the connection short of Content-Length when the document is deleted while its file is sent', async () => {
    // Larger than what the sockets between server and client buffer.
    const bytes = Buffer.concat([Buffer.from('%PDF-1.4\n'), randomBytes(24 * 1024 * 1024)]);
    const [doomed] = (await upload(server, owner.key, workspaceId, [{ name: 'doomed.pdf', bytes }])).body as DocumentBody[];
    const client = stalledGet(filePath(doomed!));
    await waitFor(() => client.started(), 'the answer to begin');
    const deleted = await server.request('DELETE', `/v1/kb/documents/${doomed!.id}`, { key: owner.key });
    expect(deleted.status).toBe(204);
    const cut = await client.read().then(
      () => 'the whole file',
      (error: Error) => error.message,
    );
    // A 200 whose body stops short of its Content-Length.
    const [, sent] = /^closed after (\d+) bytes of the body of "HTTP\/1\.1 200 OK"$/.exec(cut) ?? [];
    expect(sent, cut).toBeDefined();
    expect(Number(sent)).toBeLessThan(bytes.byteLength);
    expect((await server.request('GET', '/healthz')).status).toBe(200);
  });

  it('answers HEAD with the headers of GET, reading none of the file', async () => {
    const get = await fetch(new URL(filePath(large), server.url), { headers: { authorization: `Bearer ${owner.key}` } });
    await get.body?.cancel();
    const head = await fetch(new URL(filePath(large), server.url), { method: 'HEAD', headers: { authorization: `Bearer ${owner.key}` } });
    expect(head.status).toBe(200);
    for (const name of ['content-type', 'content-length', 'content-disposition', 'x-content-type-options', 'content-security-policy']) {
      expect(head.headers.get(name), name).toBe(get.headers.get(name));
    }
    expect(head.headers.get('content-length')).toBe(String(largeFile.byteLength));
    expect((await head.arrayBuffer()).byteLength).toBe(0);

    // The length is the document's own: HEAD answers even with the stored bytes gone, which a
    // HEAD that read them could not.
    const [small] = (await upload(server, owner.key, workspaceId, [{ name: 'head-only.pdf', bytes: Buffer.concat([Buffer.from('%PDF-1.4\n'), randomBytes(5000)]) }])).body as DocumentBody[];
    await server.app.db.prisma.documentSource.delete({ where: { documentId: small!.id } });
    const unread = await fetch(new URL(filePath(small!), server.url), { method: 'HEAD', headers: { authorization: `Bearer ${owner.key}` } });
    expect(unread.status).toBe(200);
    expect(unread.headers.get('content-length')).toBe('5009');
  });

  it('serves a PDF as an attachment, so that no browser opens it in its PDF viewer, and text inline', async () => {
    const response = await fetch(new URL(filePath(large), server.url), { method: 'HEAD', headers: { authorization: `Bearer ${owner.key}` } });
    expect(response.headers.get('content-disposition')).toBe(`attachment; filename="large.pdf"; filename*=UTF-8''large.pdf`);
    const [text] = (await server.request('POST', `/v1/kb/workspaces/${workspaceId}/documents`, { key: owner.key, json: { filename: 'shown.md', content: '# Shown' } })).body as DocumentBody[];
    const shown = await fetch(new URL(filePath(text!), server.url), { headers: { authorization: `Bearer ${owner.key}` } });
    expect(shown.headers.get('content-disposition')).toBe(`inline; filename="shown.md"; filename*=UTF-8''shown.md`);
    expect(shown.headers.get('content-type')).toBe('text/markdown; charset=utf-8');
    expect(await shown.text()).toBe('# Shown');
  });
});

describe('what one GraphQL response may hold', () => {
  const fileQuery = 'query($id: ID!, $w: ID!) { documentFile(id: $id, workspaceId: $w) { filename base64 } }';

  it('refuses the base64 of a file larger than the limit before reading it, pointing at the file route', async () => {
    const result = await server.graphql(owner.key, fileQuery, { id: large.id, w: workspaceId });
    expect(result.status).toBe(200);
    expect(result.data).toBeNull();
    expect(result.errors).toHaveLength(1);
    expect(result.errors![0]).toMatchObject({
      path: ['documentFile', 'base64'],
      extensions: { code: 'bad_request', field: 'base64' },
    });
    expect(result.errors![0]!.message).toBe(
      `base64: the file is 40.00 MiB, 53.33 MiB in base64, more than the 1.00 MiB left of the response limit of 1.00 MiB (KB_MAX_GRAPHQL_RESPONSE_BYTES); download it from GET /v1/kb/documents/${large.id}/file?workspace_id=${workspaceId}`,
    );
  });

  it('counts every file of an operation against one budget: of two that fit alone, one is refused', async () => {
    const files = [0, 1].map((index) => ({ name: `budget-${index}.pdf`, bytes: Buffer.concat([Buffer.from('%PDF-1.4\n'), randomBytes(400 * 1024)]) }));
    const documents = (await upload(server, owner.key, workspaceId, files)).body as DocumentBody[];
    const alone = await server.graphql<{ documentFile: { base64: string } }>(owner.key, fileQuery, { id: documents[0]!.id, w: workspaceId });
    expect(alone.errors).toBeUndefined();
    expect(Buffer.from(alone.data!.documentFile.base64, 'base64').equals(files[0]!.bytes)).toBe(true);
    const both = await server.graphql(owner.key, 'query($a: ID!, $b: ID!, $w: ID!) { a: documentFile(id: $a, workspaceId: $w) { base64 } b: documentFile(id: $b, workspaceId: $w) { base64 } }', {
      a: documents[0]!.id,
      b: documents[1]!.id,
      w: workspaceId,
    });
    expect(both.status).toBe(200);
    expect(both.errors).toHaveLength(1);
    expect(both.errors![0]!.extensions).toMatchObject({ code: 'bad_request', field: 'base64' });
    expect(both.errors![0]!.message).toMatch(/^base64: the file is 0\.39 MiB, 0\.52 MiB in base64, more than the 0\.48 MiB left of the response limit of 1\.00 MiB/);
  });

  it('refuses any other answer larger than the limit, over GraphQL and REST, rather than keep it; a smaller page is served', async () => {
    const workspace = (await createWorkspace(server, owner.key, 'large metadata')).id;
    // 20 documents with 60 KiB of metadata each: 1.2 MiB as JSON.
    const metadata = JSON.stringify({ note: 'x'.repeat(60 * 1024) });
    for (const part of [0, 1]) {
      const files = Array.from({ length: 10 }, (_, index) => ({ name: `meta-${part}-${index}.txt`, bytes: `document ${part} ${index}` }));
      expect((await upload(server, owner.key, workspace, files, metadata)).status).toBe(202);
    }

    const message =
      'the response would be more than 1.00 MiB, the limit of one response (KB_MAX_GRAPHQL_RESPONSE_BYTES): ask for less at a time, such as a smaller page or fewer fields';
    const graphql = await server.graphql(owner.key, 'query($w: ID!) { documents(workspaceId: $w, first: 20) { edges { node { id metadata } } } }', { w: workspace });
    expect(graphql.status).toBe(400);
    expect(graphql.data ?? null).toBeNull();
    expect(graphql.errors).toEqual([{ message, extensions: { code: 'bad_request', field: 'query' } }]);

    const rest = expectError(await server.request('GET', `/v1/kb/workspaces/${workspace}/documents?limit=20`, { key: owner.key }), 400, 'bad_request');
    expect(rest.message).toBe(message);

    const page = await server.request('GET', `/v1/kb/workspaces/${workspace}/documents?limit=5`, { key: owner.key });
    expect(page.status).toBe(200);
    expect(page.body).toHaveLength(5);
  });
});
