import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { documentHelpers, startDocumentBed } from '../../../test/support/document-bed.js';
import { makeBlankPdf, readBenchPdf, upload, waitForDocuments, type DocumentBody } from '../../../test/support/documents.js';
import { expectError, type TestServer, type TestUser } from '../../../test/support/server.js';

// Documents read back (list, preview, context, grep, delete, stats), their original files, and retries of failed ones.
let server: TestServer;
let owner: TestUser;
let workspaceId: string;
const { newWorkspace, ingest } = documentHelpers(() => ({ server, owner, workspaceId }));

beforeAll(async () => {
  ({ server, owner, workspaceId } = await startDocumentBed());
});
afterAll(() => server.close());

describe('document endpoints', () => {
  let document: DocumentBody;

  beforeAll(async () => {
    const paragraphs = Array.from(
      { length: 40 },
      (_, index) => `Paragraph ${index} talks about topic ${index % 7} and the Needle ${index}. ${'Filler words follow here. '.repeat(8)}`,
    );
    [document] = (await ingest([{ name: 'long.txt', bytes: paragraphs.join('\n\n') }])) as [DocumentBody];
    expect(document.chunk_count).toBeGreaterThan(4);
  });

  it('lists documents of a workspace newest first, gets one, hides it from others', async () => {
    const list = await server.request('GET', `/v1/kb/workspaces/${workspaceId}/documents`, { key: owner.key });
    expect(list.status).toBe(200);
    expect(list.body[0].id).toBe(document.id);
    const one = await server.request('GET', `/v1/kb/documents/${document.id}`, { key: owner.key });
    expect(one.body).toEqual(document);
    const stranger = await server.createUser();
    expectError(await server.request('GET', `/v1/kb/documents/${document.id}`, { key: stranger.key }), 404, 'not_found');
    expectError(await server.request('GET', `/v1/kb/workspaces/${workspaceId}/documents`, { key: stranger.key }), 404, 'not_found');
  });

  it('previews the content and the first 10 chunks by default, or N', async () => {
    const preview = await server.request('GET', `/v1/kb/documents/${document.id}/preview?workspace_id=${workspaceId}`, { key: owner.key });
    expect(preview.status).toBe(200);
    expect(preview.body.document).toEqual(document);
    expect(preview.body.content).toContain('Paragraph 0 talks');
    expect(preview.body.chunks.length).toBe(Math.min(10, document.chunk_count));
    expect(preview.body.chunks[0]).toMatchObject({ document_id: document.id, chunk_index: 0 });
    const two = await server.request('GET', `/v1/kb/documents/${document.id}/preview?workspace_id=${workspaceId}&chunks=2`, { key: owner.key });
    expect(two.body.chunks.map((chunk: { chunk_index: number }) => chunk.chunk_index)).toEqual([0, 1]);
    expectError(await server.request('GET', `/v1/kb/documents/${document.id}/preview?workspace_id=${workspaceId}&chunks=-1`, { key: owner.key }), 400, 'bad_request');
  });

  it('requires workspace_id naming the document’s own workspace', async () => {
    for (const suffix of ['preview', 'chunks', 'chunks/0/context', 'grep?pattern=x']) {
      const separator = suffix.includes('?') ? '&' : '?';
      const missing = expectError(await server.request('GET', `/v1/kb/documents/${document.id}/${suffix}`, { key: owner.key }), 400, 'bad_request');
      expect(missing.message).toMatch(/^workspace_id: /);
      const other = await newWorkspace();
      expectError(await server.request('GET', `/v1/kb/documents/${document.id}/${suffix}${separator}workspace_id=${other}`, { key: owner.key }), 404, 'not_found');
    }
  });

  it('gives the context around a chunk, clamped at the edges, 404 past the end', async () => {
    const context = async (index: number | string, query = '') =>
      server.request('GET', `/v1/kb/documents/${document.id}/chunks/${index}/context?workspace_id=${workspaceId}${query}`, { key: owner.key });
    const middle = await context(3);
    expect(middle.status).toBe(200);
    expect(middle.body).toMatchObject({ document_id: document.id, chunk_index: 3 });
    expect(middle.body.chunks.map((chunk: { chunk_index: number }) => chunk.chunk_index)).toEqual([1, 2, 3, 4, 5]);
    expect(middle.body.chunks.filter((chunk: { is_target: boolean }) => chunk.is_target).map((chunk: { chunk_index: number }) => chunk.chunk_index)).toEqual([3]);
    const first = await context(0, '&before=5&after=1');
    expect(first.body.chunks.map((chunk: { chunk_index: number }) => chunk.chunk_index)).toEqual([0, 1]);
    const last = document.chunk_count - 1;
    const end = await context(last);
    expect(end.body.chunks.map((chunk: { chunk_index: number }) => chunk.chunk_index)).toEqual([last - 2, last - 1, last]);
    expectError(await context(document.chunk_count), 404, 'not_found');
    expectError(await context('abc'), 400, 'bad_request');
    expectError(await context(1, '&before=x'), 400, 'bad_request');
  });

  it('greps case-insensitively by default, with highlights and offsets', async () => {
    const grep = async (query: string) => server.request('GET', `/v1/kb/documents/${document.id}/grep?workspace_id=${workspaceId}&${query}`, { key: owner.key });
    const result = await grep('pattern=needle 1[0-2]\\b');
    expect(result.status).toBe(200);
    expect(result.body).toMatchObject({ document_id: document.id, pattern: 'needle 1[0-2]\\b', case_sensitive: false, total_matches: 3 });
    for (const chunk of result.body.chunks) {
      for (const match of chunk.matches) expect(chunk.content.slice(match.start, match.end)).toMatch(/^Needle 1[0-2]$/);
      expect(chunk.highlighted).toMatch(/<mark>Needle 1[0-2]<\/mark>/);
    }
    const sensitive = await grep('pattern=needle&case_sensitive=true');
    expect(sensitive.body.total_matches).toBe(0);
    expect(sensitive.body.chunks).toEqual([]);
    const unclosed = await grep('pattern=(unclosed');
    expectError(unclosed, 400, 'bad_request');
    // The message quotes the pattern as sent, not as compiled for a case-insensitive search.
    expect(unclosed.body.message).toMatch(/^pattern: invalid regular expression: .*missing closing \): `\(unclosed`$/);
    expect(unclosed.body.message).not.toContain('(?i)');
    // 400 comes before 404: a bad pattern is reported even for a document that does not exist.
    expectError(
      await server.request('GET', `/v1/kb/documents/00000000-0000-4000-8000-000000000000/grep?workspace_id=${workspaceId}&pattern=(`, { key: owner.key }),
      400,
      'bad_request',
    );
    expectError(await grep('pattern=x&case_sensitive=maybe'), 400, 'bad_request');
    const started = Date.now();
    const catastrophic = await grep(`pattern=${encodeURIComponent('(a+)+$')}`);
    expect(catastrophic.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('deletes a document with its chunks: 204, then 404', async () => {
    const [doomed] = await ingest([{ name: 'doomed.txt', bytes: 'short lived' }]);
    const deleted = await server.request('DELETE', `/v1/kb/documents/${doomed!.id}`, { key: owner.key });
    expect(deleted.status).toBe(204);
    expectError(await server.request('GET', `/v1/kb/documents/${doomed!.id}`, { key: owner.key }), 404, 'not_found');
    expectError(await server.request('DELETE', `/v1/kb/documents/${doomed!.id}`, { key: owner.key }), 404, 'not_found');
    expect(await server.app.db.prisma.chunk.count({ where: { documentId: doomed!.id } })).toBe(0);
    expect((await server.request('GET', `/v1/kb/documents/${document.id}`, { key: owner.key })).status).toBe(200);
  });

  it('reports real counts in workspace stats and scan', async () => {
    const workspace = await newWorkspace();
    const documents = await ingest([{ name: 's.txt', bytes: 'stats text' }, { name: 'bad.pdf', bytes: '%PDF-1.4 broken' }], workspace);
    const stats = await server.request('GET', `/v1/kb/workspaces/${workspace}/stats`, { key: owner.key });
    expect(stats.body).toMatchObject({ document_count: 2, processing_status: 'failed', documents_by_status: { ready: 1, failed: 1 } });
    expect(stats.body.total_size_bytes).toBe(documents.reduce((sum, document) => sum + document.size_bytes, 0));
  });
});

describe('the original file: GET /v1/kb/documents/{id}/file', () => {
  const fileOf = (document: Pick<DocumentBody, 'id' | 'workspace_id'>, options: { key?: string; method?: string; workspace?: string } = {}) =>
    fetch(new URL(`/v1/kb/documents/${document.id}/file?workspace_id=${options.workspace ?? document.workspace_id}`, server.url), {
      method: options.method ?? 'GET',
      headers: { authorization: `Bearer ${options.key ?? owner.key}` },
    });

  it('answers the uploaded PDF byte for byte, with its type, length and name, as an attachment, sandboxed', async () => {
    const bytes = await readBenchPdf('sample_pdf_3.pdf');
    const response = await upload(server, owner.key, workspaceId, [{ name: 'sample_pdf_3.pdf', bytes }]);
    const [document] = response.body as DocumentBody[];
    const file = await fileOf(document!);
    expect(file.status).toBe(200);
    expect(file.headers.get('content-type')).toBe('application/pdf');
    expect(file.headers.get('content-length')).toBe(String(bytes.byteLength));
    expect(file.headers.get('content-disposition')).toBe(`attachment; filename="sample_pdf_3.pdf"; filename*=UTF-8''sample_pdf_3.pdf`);
    expect(file.headers.get('x-content-type-options')).toBe('nosniff');
    expect(file.headers.get('content-security-policy')).toBe("sandbox; default-src 'none'");
    expect(file.headers.get('x-request-id')).toBeTruthy();
    const received = Buffer.from(await file.arrayBuffer());
    expect(received.byteLength).toBe(bytes.byteLength);
    expect(received.equals(bytes)).toBe(true);

    // HEAD: the same status and headers, no body.
    const head = await fileOf(document!, { method: 'HEAD' });
    expect(head.status).toBe(200);
    for (const name of ['content-type', 'content-length', 'content-disposition', 'x-content-type-options', 'content-security-policy']) {
      expect(head.headers.get(name), name).toBe(file.headers.get(name));
    }
    expect((await head.arrayBuffer()).byteLength).toBe(0);
  });

  it('names a file in UTF-8 with an ASCII fallback, and gives text its charset; HTML is served sandboxed', async () => {
    const name = 'résumé "final" 100% 📄.txt';
    // As JSON: FormData would send the quotes of the name as %22.
    const uploaded = await server.request('POST', `/v1/kb/workspaces/${workspaceId}/documents`, { key: owner.key, json: { filename: name, content: 'Grüße aus Köln, file test.' } });
    const [text] = uploaded.body as DocumentBody[];
    expect(text!.filename).toBe(name);
    const file = await fileOf(text!);
    expect(file.status).toBe(200);
    expect(file.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(file.headers.get('content-disposition')).toBe(
      `inline; filename="r_sum_ _final_ 100_ _.txt"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%22final%22%20100%25%20%F0%9F%93%84.txt`,
    );
    expect(await file.text()).toBe('Grüße aus Köln, file test.');

    const page = '<!doctype html><html><body><h1>Page</h1><script>document.title = "ran"</script></body></html>';
    const [html] = (await upload(server, owner.key, workspaceId, [{ name: 'page-file.html', bytes: page }])).body as DocumentBody[];
    const served = await fileOf(html!);
    expect(served.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(served.headers.get('content-security-policy')).toBe("sandbox; default-src 'none'");
    expect(served.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await served.text()).toBe(page);
  });

  it("is 404 for another user's document and outside the document's workspace, 400 without workspace_id, 403 without kb:read", async () => {
    const [document] = (await upload(server, owner.key, workspaceId, [{ name: 'private-file.txt', bytes: 'only for the owner' }])).body as DocumentBody[];
    const stranger = await server.createUser();
    const strangerWorkspace = await newWorkspace(stranger);
    for (const attempt of [
      await fileOf(document!, { key: stranger.key }),
      await fileOf(document!, { key: stranger.key, workspace: strangerWorkspace }),
      await fileOf(document!, { workspace: await newWorkspace() }),
      await fileOf({ id: '00000000-0000-4000-8000-000000000000', workspace_id: workspaceId }),
      await fileOf({ id: 'not-a-uuid', workspace_id: workspaceId }),
    ]) {
      expect(attempt.status).toBe(404);
      expect(attempt.headers.get('content-type')).toMatch(/^application\/json/);
      expect(((await attempt.json()) as { error: string }).error).toBe('not_found');
    }
    const head = await fileOf(document!, { key: stranger.key, method: 'HEAD' });
    expect(head.status).toBe(404);
    const missing = expectError(await server.request('GET', `/v1/kb/documents/${document!.id}/file`, { key: owner.key }), 400, 'bad_request');
    expect(missing.message).toMatch(/^workspace_id: /);
    const writeOnly = await server.createKey(owner, ['kb:write']);
    const denied = await fileOf(document!, { key: writeOnly });
    expect(denied.status).toBe(403);
    expect(((await denied.json()) as { message: string }).message).toContain('kb:read');
    expect((await fileOf(document!, { key: 'sk_not_a_real_key_at_all_0000000000' })).status).toBe(401);
  });

  it('is a GraphQL field too: Document.file and Query.documentFile, base64, never a page of them', async () => {
    const bytes = await readBenchPdf('sample_pdf_2.pdf');
    const workspace = await newWorkspace();
    const [document] = (await upload(server, owner.key, workspace, [{ name: 'graph-file.pdf', bytes }])).body as DocumentBody[];
    const read = await server.graphql<{ document: { file: { documentId: string; filename: string; contentType: string; sizeBytes: number; sha256: string; base64: string } } }>(
      owner.key,
      'query($id: ID!) { document(id: $id) { file { documentId filename contentType sizeBytes sha256 base64 } } }',
      { id: document!.id },
    );
    expect(read.errors).toBeUndefined();
    expect(read.data!.document.file).toMatchObject({ documentId: document!.id, filename: 'graph-file.pdf', contentType: 'application/pdf', sizeBytes: bytes.byteLength, sha256: document!.sha256 });
    expect(Buffer.from(read.data!.document.file.base64, 'base64').equals(bytes)).toBe(true);
    const root = await server.graphql<{ documentFile: { base64: string } }>(
      owner.key,
      'query($id: ID!, $w: ID!) { documentFile(id: $id, workspaceId: $w) { base64 } }',
      { id: document!.id, w: workspace },
    );
    expect(Buffer.from(root.data!.documentFile.base64, 'base64').equals(bytes)).toBe(true);
    const elsewhere = await server.graphql(owner.key, 'query($id: ID!, $w: ID!) { documentFile(id: $id, workspaceId: $w) { base64 } }', {
      id: document!.id,
      w: await newWorkspace(),
    });
    expect(elsewhere.errors?.[0]?.extensions?.code).toBe('not_found');
    // A page of files would hold a page of uploads in memory: refused by its cost before anything runs.
    const page = await server.graphql(owner.key, 'query($w: ID!) { documents(workspaceId: $w, first: 3) { edges { node { file { base64 } } } } }', { w: workspaceId });
    expect(page.status).toBe(400);
    expect(page.errors?.[0]?.message).toMatch(/^query cost \d+ exceeds the limit of 25000$/);
  });
});

describe('retrying a failed document: POST /v1/kb/documents/{id}/retry', () => {
  const retry = (document: Pick<DocumentBody, 'id' | 'workspace_id'>, options: { key?: string; workspace?: string } = {}) =>
    server.request('POST', `/v1/kb/documents/${document.id}/retry?workspace_id=${options.workspace ?? document.workspace_id}`, { key: options.key ?? owner.key });

  it('queues a failed document again from its kept bytes: 202 with the document, then processed again', async () => {
    const workspace = await newWorkspace();
    const [failed] = await ingest([{ name: 'blank.pdf', bytes: makeBlankPdf() }], workspace);
    expect(failed).toMatchObject({ status: 'failed', stage: 'failed' });
    expect(failed!.error).toMatch(/text layer/);
    const answer = await retry(failed!);
    expect(answer.status, answer.text).toBe(202);
    expect(answer.body).toMatchObject({ id: failed!.id, status: 'queued', stage: 'queued', error: null, chunk_count: 0, embedded_chunks: 0 });
    // The same body GET /v1/kb/documents/{id} writes.
    const got = await server.request('GET', `/v1/kb/documents/${failed!.id}`, { key: owner.key });
    expect(Object.keys(answer.body)).toEqual(Object.keys(got.body));
    const job = await server.app.db.prisma.job.findUnique({ where: { documentId: failed!.id } });
    expect(job?.kind).toBe('parse');
    expect((job!.payload as { reindex?: boolean }).reindex).toBe(true);
    // Processed again: the PDF still has no text, so it fails again with the same reason.
    const [again] = await waitForDocuments(server, owner.key, [failed!.id]);
    expect(again).toMatchObject({ status: 'failed', stage: 'failed', error: failed!.error });
    expect(Date.parse(again!.updated_at)).toBeGreaterThan(Date.parse(failed!.updated_at));
  });

  it('processes a document that failed after parsing from the start, to ready; two retries at once queue it once', async () => {
    const workspace = await newWorkspace();
    const [ready] = await ingest([{ name: 'retry-me.md', bytes: '# Retry\n\nA document that failed at embedding, say.\n\n## More\n\nAnother section.' }], workspace);
    expect(ready).toMatchObject({ status: 'ready', stage: 'ready' });
    // As a permanent failure of the embed stage leaves it: chunks stored, not all embedded.
    await server.app.db.prisma.document.update({ where: { id: ready!.id }, data: { status: 'failed', error: 'the embedding model refused the document', embeddedChunks: 0 } });
    const answers = await Promise.all([retry(ready!), retry(ready!)]);
    expect(answers.map((answer) => answer.status).sort()).toEqual([202, 409]);
    const refused = answers.find((answer) => answer.status === 409)!;
    expect(refused.body.error).toBe('document_not_failed');
    expect(refused.body.message).toMatch(new RegExp(`^document ${ready!.id} is (queued|processing|ready), not failed: only a failed document can be retried$`));
    expect(await server.app.db.prisma.job.count({ where: { documentId: ready!.id } })).toBe(1);
    const [processed] = await waitForDocuments(server, owner.key, [ready!.id]);
    expect(processed).toMatchObject({ status: 'ready', stage: 'ready', error: null, chunk_count: ready!.chunk_count, embedded_chunks: ready!.chunk_count });
    expect(await server.app.db.prisma.chunk.count({ where: { documentId: ready!.id } })).toBe(ready!.chunk_count);
  });

  it('is 409 document_not_failed for a ready document, 404 elsewhere, 400 without workspace_id, 403 without kb:write', async () => {
    const [ready] = await ingest([{ name: 'fine-retry.txt', bytes: 'nothing wrong with this one' }]);
    const refused = expectError(await retry(ready!), 409, 'document_not_failed');
    expect(refused.message).toBe(`document ${ready!.id} is ready, not failed: only a failed document can be retried`);
    expect((await server.request('GET', `/v1/kb/documents/${ready!.id}`, { key: owner.key })).body).toEqual(ready);
    const stranger = await server.createUser();
    expectError(await retry(ready!, { key: stranger.key }), 404, 'not_found');
    expectError(await retry(ready!, { workspace: await newWorkspace() }), 404, 'not_found');
    expectError(await retry({ id: '00000000-0000-4000-8000-000000000000', workspace_id: workspaceId }), 404, 'not_found');
    const missing = expectError(await server.request('POST', `/v1/kb/documents/${ready!.id}/retry`, { key: owner.key }), 400, 'bad_request');
    expect(missing.message).toMatch(/^workspace_id: /);
    const readOnly = await server.createKey(owner, ['kb:read']);
    expect(expectError(await retry(ready!, { key: readOnly }), 403, 'forbidden').message).toContain('kb:write');
    const viaGet = await server.request('GET', `/v1/kb/documents/${ready!.id}/retry?workspace_id=${workspaceId}`, { key: owner.key });
    expect(viaGet.status).toBe(405);
    expect(viaGet.headers.get('allow')).toBe('POST');
  });

  it('is the GraphQL mutation retryDocument, with the refusal as an AppError', async () => {
    const workspace = await newWorkspace();
    const [failed] = await ingest([{ name: 'graph-retry.pdf', bytes: (await readBenchPdf('sample_pdf_1.pdf')).subarray(0, 2000) }], workspace);
    expect(failed!.status).toBe('failed');
    // A credential without kb:read retries, but does not get the file with the answer.
    const writeOnly = await server.createKey(owner, ['kb:write']);
    const withFile = await server.graphql(writeOnly, 'mutation($id: ID!, $w: ID!) { retryDocument(id: $id, workspaceId: $w) { ... on Document { id file { base64 } } } }', {
      id: failed!.id,
      w: workspace,
    });
    expect(withFile.errors?.[0]).toMatchObject({ message: 'this credential lacks the kb:read scope', extensions: { code: 'forbidden' } });
    expect((await waitForDocuments(server, owner.key, [failed!.id]))[0]!.status).toBe('failed');
    const mutation = 'mutation($id: ID!, $w: ID!) { retryDocument(id: $id, workspaceId: $w) { __typename ... on AppError { code message } ... on Document { id status stage error } } }';
    const first = await server.graphql<{ retryDocument: Record<string, unknown> }>(owner.key, mutation, { id: failed!.id, w: workspace });
    expect(first.data!.retryDocument).toEqual({ __typename: 'Document', id: failed!.id, status: 'queued', stage: 'queued', error: null });
    await waitForDocuments(server, owner.key, [failed!.id]);
    const [ready] = await ingest([{ name: 'graph-ready.txt', bytes: 'ready over graphql' }], workspace);
    const second = await server.graphql<{ retryDocument: Record<string, unknown> }>(owner.key, mutation, { id: ready!.id, w: workspace });
    expect(second.data!.retryDocument).toMatchObject({ __typename: 'AppError', code: 'document_not_failed' });
  });
});
