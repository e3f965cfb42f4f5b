import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readBenchPdf, upload, waitForDocuments, type DocumentBody } from '../../../test/support/documents.js';
import { expectError, startTestServer, type TestServer, type TestUser } from '../../../test/support/server.js';
import { createWorkspace } from '../../../test/support/fixtures.js';

let server: TestServer;
let owner: TestUser;
let workspaceId: string;

const documentPath = (id: string) => `/v1/kb/documents/${id}`;

async function uploadReady(name: string, text: string, metadata?: string): Promise<DocumentBody> {
  const response = await upload(server, owner.key, workspaceId, [{ name, bytes: text }], metadata);
  expect(response.status, JSON.stringify(response.body)).toBe(202);
  const [document] = await waitForDocuments(server, owner.key, [(response.body as DocumentBody[])[0]!.id]);
  expect(document!.status).toBe('ready');
  return document!;
}

async function keywordHits(query: string, filter?: Record<string, unknown>) {
  const response = await server.request('POST', '/v1/kb/query', { key: owner.key, json: { query, workspace_id: workspaceId, mode: 'keyword', filter } });
  expect(response.status, response.text).toBe(200);
  return (response.body.results as { document_id: string; filename: string }[]).map((hit) => [hit.document_id, hit.filename]);
}

/** Polls until the document's chunks are all embedded again after a rename. */
async function waitForEmbedded(id: string): Promise<DocumentBody> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const document = (await server.request('GET', documentPath(id), { key: owner.key })).body as DocumentBody;
    if (document.embedded_chunks === document.chunk_count) return document;
    if (Date.now() > deadline) throw new Error(`not embedded again: ${JSON.stringify(document)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

beforeAll(async () => {
  server = await startTestServer();
  owner = await server.createUser();
  workspaceId = (await createWorkspace(server, owner.key, 'renames')).id;
});
afterAll(() => server.close());

describe('PATCH /v1/kb/documents/{id}', () => {
  it('renames a ready document, which is found by its new name once embedded again and stays searchable meanwhile', async () => {
    const document = await uploadReady('notes.txt', 'The pond behind the mill holds carp and a few old pike.');
    expect(await keywordHits('zebrafish')).toEqual([]);
    const response = await server.request('PATCH', documentPath(document.id), { key: owner.key, json: { filename: '  Zebrafish survey 2024.txt ' } });
    expect(response.status, response.text).toBe(200);
    expect(response.body).toMatchObject({ id: document.id, filename: 'Zebrafish survey 2024.txt', status: 'ready', content_type: 'text/plain', metadata: {} });
    expect(Object.keys(response.body)).toEqual(Object.keys(document));
    // Still searchable by its text while its chunks are embedded again.
    expect(await keywordHits('carp pike')).toContainEqual([document.id, 'Zebrafish survey 2024.txt']);
    const embedded = await waitForEmbedded(document.id);
    expect(embedded).toMatchObject({ status: 'ready', stage: 'ready', chunk_count: document.chunk_count, error: null });
    expect(await keywordHits('zebrafish')).toEqual([[document.id, 'Zebrafish survey 2024.txt']]);
    expect(await keywordHits('notes')).toEqual([]);
    // The file is served under its new name.
    const file = await fetch(new URL(`${documentPath(document.id)}/file?workspace_id=${workspaceId}`, server.url), { headers: { authorization: `Bearer ${owner.key}` } });
    expect(file.headers.get('content-disposition')).toContain('filename="Zebrafish survey 2024.txt"');
  });

  it('refuses a second rename while the first is indexed, then takes it', async () => {
    const pages = Array.from({ length: 40 }, (_, index) => `Section ${index}. ${'Barley and oats were sown on the north field after the thaw. '.repeat(8)}`);
    const document = await uploadReady('field-notes.txt', pages.join('\n\n'));
    expect(document.chunk_count).toBeGreaterThan(5);
    const first = await server.request('PATCH', documentPath(document.id), { key: owner.key, json: { filename: 'harvest log.txt' } });
    expect(first.status, first.text).toBe(200);
    const second = await server.request('PATCH', documentPath(document.id), { key: owner.key, json: { filename: 'sowing log.txt' } });
    expectError(second, 409, 'document_busy');
    expect(second.body.message).toBe(`document ${document.id} is being indexed under its previous name: it can be renamed again once that is done`);
    await waitForEmbedded(document.id);
    const third = await server.request('PATCH', documentPath(document.id), { key: owner.key, json: { filename: 'sowing log.txt' } });
    expect(third.status, third.text).toBe(200);
    await waitForEmbedded(document.id);
    expect(await keywordHits('sowing')).toContainEqual([document.id, 'sowing log.txt']);
    expect(await keywordHits('harvest')).toEqual([]);
    // The document is embedded three times.
  }, 120_000);

  it('replaces the metadata, which the search filter reads at once; null clears it; {} changes nothing', async () => {
    const document = await uploadReady('lighthouse.txt', 'The lighthouse keeper logs every passing ship.', '{"team":"coast","year":2023}');
    const replaced = await server.request('PATCH', documentPath(document.id), { key: owner.key, json: { metadata: { team: 'harbour' } } });
    expect(replaced.status, replaced.text).toBe(200);
    expect(replaced.body).toMatchObject({ filename: 'lighthouse.txt', metadata: { team: 'harbour' }, embedded_chunks: document.chunk_count });
    expect(await keywordHits('lighthouse keeper', { team: 'harbour' })).toEqual([[document.id, 'lighthouse.txt']]);
    expect(await keywordHits('lighthouse keeper', { team: 'coast' })).toEqual([]);
    const unchanged = await server.request('PATCH', documentPath(document.id), { key: owner.key, json: {} });
    expect(unchanged.body).toMatchObject({ filename: 'lighthouse.txt', metadata: { team: 'harbour' } });
    const sameName = await server.request('PATCH', documentPath(document.id), { key: owner.key, json: { filename: 'lighthouse.txt', metadata: null } });
    expect(sameName.body).toMatchObject({ filename: 'lighthouse.txt', metadata: {}, embedded_chunks: document.chunk_count });
  });

  it('refuses to rename a document being processed (409 document_busy), and takes its metadata', async () => {
    const response = await upload(server, owner.key, workspaceId, [{ name: 'lyft_2021.pdf', bytes: new Uint8Array(await readBenchPdf('lyft_2021.pdf')) }]);
    const [queued] = response.body as DocumentBody[];
    const renamed = await server.request('PATCH', documentPath(queued!.id), { key: owner.key, json: { filename: 'lyft annual report.pdf' } });
    expectError(renamed, 409, 'document_busy');
    expect(renamed.body.message).toMatch(/is (queued|processing): it can be renamed once it is ready or failed/);
    const tagged = await server.request('PATCH', documentPath(queued!.id), { key: owner.key, json: { metadata: { kind: '10-K' } } });
    expect(tagged.status, tagged.text).toBe(200);
    expect(tagged.body).toMatchObject({ filename: 'lyft_2021.pdf', metadata: { kind: '10-K' } });
    expect((await server.request('DELETE', documentPath(queued!.id), { key: owner.key })).status).toBe(204);
  });

  it('answers bad input, other users and read-only keys as the contract says, changing nothing', async () => {
    const document = await uploadReady('kept.txt', 'A note that must stay as it is.', '{"keep":true}');
    const patch = (json: unknown, key = owner.key, id = document.id) => server.request('PATCH', documentPath(id), { key, json });
    const cases: [unknown, string][] = [
      [{ filename: 'a/b.txt' }, 'filename: must be a plain file name without path separators'],
      [{ filename: '   ' }, 'filename: must not be empty'],
      [{ filename: 'x'.repeat(256) }, 'filename: must be at most 255 characters'],
      [{ filename: 42 }, 'filename: must be a string'],
      [{ metadata: [1, 2] }, 'metadata: must be a JSON object'],
      [{ metadata: 'tag' }, 'metadata: must be a JSON object'],
      [{ name: 'other.txt' }, 'name: is not a known field (accepted: filename, metadata)'],
      [[], 'body: must be a JSON object'],
    ];
    for (const [json, message] of cases) {
      const response = await patch(json);
      expectError(response, 400, 'bad_request');
      expect(response.body.message, JSON.stringify(json)).toBe(message);
    }
    const stranger = await server.createUser();
    expectError(await patch({ filename: 'theirs.txt' }, stranger.key), 404, 'not_found');
    expectError(await patch({ filename: 'x.txt' }, owner.key, '00000000-0000-4000-8000-000000000000'), 404, 'not_found');
    expectError(await patch({ filename: 'x.txt' }, owner.key, 'not-an-id'), 404, 'not_found');
    expectError(await patch({ filename: 'read.txt' }, await server.createKey(owner, ['kb:read'])), 403, 'forbidden');
    expectError(await server.request('PATCH', documentPath(document.id), { key: null, json: { filename: 'anon.txt' } }), 401, 'unauthorized');
    const after = (await server.request('GET', documentPath(document.id), { key: owner.key })).body;
    expect(after).toEqual(document);
  });

  it('is the GraphQL mutation updateDocument', async () => {
    const document = await uploadReady('graph.txt', 'Edges and vertices of a small graph.');
    const result = await server.graphql<{ updateDocument: { __typename: string; filename?: string; code?: string } }>(
      owner.key,
      `mutation ($id: ID!, $input: UpdateDocumentInput!) {
        updateDocument(id: $id, input: $input) { __typename ... on Document { filename } ... on AppError { code } }
      }`,
      { id: document.id, input: { filename: 'graph theory.txt' } },
    );
    expect(result.errors).toBeUndefined();
    expect(result.data!.updateDocument).toEqual({ __typename: 'Document', filename: 'graph theory.txt' });
    await waitForEmbedded(document.id);
  });
});
