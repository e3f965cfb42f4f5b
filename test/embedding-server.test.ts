import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upload, waitForDocuments } from './support/documents.js';
import { startFakeModel, type FakeModel } from './support/fake-openai.js';
import { expectError, startTestServer, type TestServer, type TestUser } from './support/server.js';
import { createWorkspace } from './support/fixtures.js';

/**
 * An OpenAI-compatible embeddings server whose behaviour the test switches: healthy, down
 * (503), slow, answering garbage, or vectors of the wrong size. The service talks to it through
 * the `openai` SDK exactly as it would to a real one.
 */
type Behaviour = 'healthy' | 'down' | 'slow' | 'garbage' | 'wrong-dimension' | 'refuses-poison';
const dimensions = 8;

function fakeVector(text: string, size = dimensions): number[] {
  // Texts sharing words get similar vectors: each word adds to a few hashed coordinates.
  const vector = new Array<number>(size).fill(0.01);
  for (const word of text.toLowerCase().match(/[a-z0-9]+/g) ?? []) {
    const hash = createHash('sha256').update(word).digest();
    vector[hash[0]! % size]! += 1;
  }
  return vector;
}

let behaviour: Behaviour = 'healthy';
let requests = 0;
let embeddingServer: FakeModel;
let baseUrl: string;

beforeAll(async () => {
  embeddingServer = await startFakeModel((request, reply) => {
    requests += 1;
    const input: string[] = request.body.input ?? [];
    switch (behaviour) {
      case 'down':
        return reply.json(503, { error: { message: 'model server is restarting' } });
      case 'slow':
        return void setTimeout(() => reply.json(200, { data: [], model: 'fake' }), 30_000).unref();
      case 'garbage':
        return reply.json(200, '{"data": "this is not a list of embeddings"');
      case 'refuses-poison':
        if (input.some((text) => text.includes('poison'))) return reply.json(400, { error: { message: 'input rejected by the content filter' } });
        break;
    }
    return reply.json(200, {
      object: 'list',
      model: 'fake-embed',
      data: input.map((text, index) => ({ object: 'embedding', index, embedding: fakeVector(text, behaviour === 'wrong-dimension' ? 5 : dimensions) })),
      usage: { prompt_tokens: 1, total_tokens: 1 },
    });
  }, 'fake-embed');
  baseUrl = embeddingServer.baseUrl;
});

afterAll(() => embeddingServer.close());

/** Its own embedded store: the index records this server's model, which no other test uses. */
const environment = (overrides: Record<string, string>) => ({
  DATABASE_URL: '',
  ELASTICSEARCH_URL: '',
  OPENAI_BASE_URL: baseUrl,
  OPENAI_EMBEDDING_MODEL: 'fake-embed',
  OPENAI_TIMEOUT_SECONDS: '1',
  KB_SEARCH_TIMEOUT_SECONDS: '2',
  KB_EMBED_MAX_BACKOFF_SECONDS: '0.2',
  ...overrides,
});

async function documentOf(server: TestServer, key: string, id: string) {
  return (await server.request('GET', `/v1/kb/documents/${id}`, { key })).body;
}

describe('an OpenAI-compatible embedding server', () => {
  let server: TestServer;
  let user: TestUser;
  let workspaceId: string;

  beforeAll(async () => {
    behaviour = 'healthy';
    server = await startTestServer(environment({ KB_EMBED_MAX_ATTEMPTS: '1000' }));
    user = await server.createUser();
    workspaceId = (await createWorkspace(server, user.key, 'remote')).id;
  }, 60_000);
  afterAll(() => server?.close());

  it('embeds documents and queries through the API, recording the model with the index', async () => {
    behaviour = 'healthy';
    const uploaded = await upload(server, user.key, workspaceId, [
      { name: 'cats.txt', bytes: 'cats purr and sleep all day' },
      { name: 'rockets.txt', bytes: 'rockets burn fuel to reach orbit' },
    ]);
    const documents = await waitForDocuments(server, user.key, uploaded.body.map((document: { id: string }) => document.id));
    expect(documents.map((document) => document.status)).toEqual(['ready', 'ready']);
    const search = await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'rockets orbit', workspace_id: workspaceId, mode: 'vector' } });
    expect(search.status, search.text).toBe(200);
    expect(search.body.results[0].filename).toBe('rockets.txt');
    const scan = await server.request('GET', `/v1/kb/workspaces/${workspaceId}/scan`, { key: user.key });
    expect(scan.body.embedding).toMatchObject({ model: 'openai:fake-embed', dimensions, index_model: 'openai:fake-embed', model_mismatch: false });
  });

  it('delays documents while the server is down, and finishes them when it is back', async () => {
    behaviour = 'down';
    const uploaded = await upload(server, user.key, workspaceId, [{ name: 'tides.txt', bytes: 'the moon pulls the tides' }]);
    const id = uploaded.body[0].id;
    await expect.poll(async () => (await server.app.db.prisma.job.findUnique({ where: { documentId: id } }))?.attempts ?? 0, { timeout: 30_000 }).toBeGreaterThanOrEqual(2);
    expect(await documentOf(server, user.key, id)).toMatchObject({ status: 'processing', embedded_chunks: 0, error: null });
    const search = await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'tides', workspace_id: workspaceId } });
    expect(expectError(search, 503, 'service_unavailable').message).toMatch(/embedding model (is unavailable|did not answer)/);
    behaviour = 'healthy';
    const [done] = await waitForDocuments(server, user.key, [id], 60_000);
    expect(done).toMatchObject({ status: 'ready', embedded_chunks: 1 });
  });

  /** Uploads while the server is down and waits until every document is parsed, its embedding held back. */
  async function uploadHeldBack(names: string[]) {
    behaviour = 'down';
    const ids: string[] = [];
    for (let first = 0; first < names.length; first += 20) {
      const uploaded = await upload(server, user.key, workspaceId, names.slice(first, first + 20).map((name) => ({ name, bytes: `the text of ${name}` })));
      expect(uploaded.status).toBe(202);
      ids.push(...uploaded.body.map((document: { id: string }) => document.id));
    }
    const prisma = server.app.db.prisma;
    await expect.poll(() => prisma.job.count({ where: { documentId: { in: ids }, kind: 'embed', attempts: { gte: 1 } } }), { timeout: 60_000 }).toBe(ids.length);
    return ids;
  }

  it('embeds many short documents together: one call for many documents, each ready', async () => {
    const ids = await uploadHeldBack(Array.from({ length: 40 }, (_, n) => `short-${n}.txt`));
    const before = requests;
    behaviour = 'healthy';
    const documents = await waitForDocuments(server, user.key, ids, 60_000);
    expect(documents.every((document) => document.status === 'ready' && document.embedded_chunks === 1)).toBe(true);
    // One document per call would be 40 calls; batches of up to KB_EMBED_BATCH_SIZE (32) chunks need 2.
    expect(requests - before).toBeLessThanOrEqual(8);
    const scan = await server.request('GET', `/v1/kb/workspaces/${workspaceId}/scan`, { key: user.key });
    expect(scan.body.totals.indexed_chunks).toBe(scan.body.totals.embedded_chunks);
  });

  it('fails only the document the server refuses when it was embedded together with others', async () => {
    const names = Array.from({ length: 9 }, (_, n) => `fine-${n}.txt`);
    names.splice(4, 0, 'poison.txt');
    const ids = await uploadHeldBack(names);
    behaviour = 'refuses-poison';
    const documents = await waitForDocuments(server, user.key, ids, 60_000);
    behaviour = 'healthy';
    const byName = new Map(documents.map((document) => [document.filename, document]));
    expect(byName.get('poison.txt')).toMatchObject({ status: 'failed', embedded_chunks: 0 });
    expect(byName.get('poison.txt')!.error).toMatch(/embedding model refused the document: .*400/);
    for (const name of names.filter((name) => name !== 'poison.txt')) expect(byName.get(name)).toMatchObject({ status: 'ready', embedded_chunks: 1, error: null });
  });

  it('answers a search 503 within its timeout when the server hangs', async () => {
    behaviour = 'slow';
    const started = Date.now();
    const search = await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'cats', workspace_id: workspaceId } });
    expectError(search, 503, 'service_unavailable');
    expect(Date.now() - started).toBeLessThan(10_000);
    // Keyword search needs no embedding.
    const keyword = await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'cats', workspace_id: workspaceId, mode: 'keyword' } });
    expect(keyword.status).toBe(200);
    expect(keyword.body.results[0].filename).toBe('cats.txt');
    behaviour = 'healthy';
  });

  it('deletes a document whose chunks are being embedded, leaving nothing behind', async () => {
    behaviour = 'slow';
    const uploaded = await upload(server, user.key, workspaceId, [{ name: 'doomed.txt', bytes: 'a document deleted while it is embedded' }]);
    const id = uploaded.body[0].id;
    await expect.poll(async () => (await documentOf(server, user.key, id)).chunk_count, { timeout: 30_000 }).toBe(1);
    expect((await server.request('DELETE', `/v1/kb/documents/${id}`, { key: user.key })).status).toBe(204);
    behaviour = 'healthy';
    expect((await server.request('GET', `/v1/kb/documents/${id}`, { key: user.key })).status).toBe(404);
    const prisma = server.app.db.prisma;
    await expect.poll(() => prisma.job.count({ where: { documentId: id } }), { timeout: 10_000 }).toBe(0);
    expect(await prisma.chunk.count({ where: { documentId: id } })).toBe(0);
    const scan = await server.request('GET', `/v1/kb/workspaces/${workspaceId}/scan`, { key: user.key });
    expect(scan.body.totals.indexed_chunks).toBe(scan.body.totals.embedded_chunks);
  });
});

describe('an embedding server that keeps failing or answers wrongly', () => {
  let server: TestServer;
  let user: TestUser;
  let workspaceId: string;

  beforeAll(async () => {
    behaviour = 'healthy';
    server = await startTestServer(environment({ KB_EMBED_MAX_ATTEMPTS: '2' }));
    user = await server.createUser();
    workspaceId = (await createWorkspace(server, user.key, 'failing')).id;
  }, 60_000);
  afterAll(() => server?.close());

  const uploadOne = async (name: string) => {
    const uploaded = await upload(server, user.key, workspaceId, [{ name, bytes: `text of ${name}` }]);
    const [document] = await waitForDocuments(server, user.key, [uploaded.body[0].id], 60_000);
    return document!;
  };

  it('fails a document with the reason once its attempts are spent', async () => {
    behaviour = 'down';
    const document = await uploadOne('down.txt');
    expect(document.status).toBe('failed');
    expect(document.error).toMatch(/^embed failed after 2 attempts: .*503/);
  });

  it('fails a document at once on an answer that is not embeddings, or of the wrong dimension', async () => {
    behaviour = 'garbage';
    const garbage = await uploadOne('garbage.txt');
    expect(garbage.status).toBe('failed');
    expect(garbage.error).toMatch(/embedding model refused the document/);
    behaviour = 'wrong-dimension';
    const wrong = await uploadOne('wrong.txt');
    expect(wrong.status).toBe('failed');
    expect(wrong.error).toMatch(/\b5\b.*\b8\b|\b8\b.*\b5\b/);
    const search = await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'anything', workspace_id: workspaceId } });
    expectError(search, 503, 'service_unavailable');
    behaviour = 'healthy';
  });
});
