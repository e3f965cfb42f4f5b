import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { documentHelpers, startDocumentBed } from '../../../test/support/document-bed.js';
import { editedDocx, makeBlankPdf, makeDocx, readBenchPdf, upload, uploadOnNewConnection, waitForDocuments, type DocumentBody } from '../../../test/support/documents.js';
import { expectError, type TestServer, type TestUser } from '../../../test/support/server.js';

// Uploads, accepted and refused, and a document's stages; reading documents back is document-reads.test.ts.
let server: TestServer;
let owner: TestUser;
let workspaceId: string;
const { newWorkspace, ingest, chunksOf } = documentHelpers(() => ({ server, owner, workspaceId }));

beforeAll(async () => {
  ({ server, owner, workspaceId } = await startDocumentBed());
});
afterAll(() => server.close());

describe('upload', () => {
  it('answers 202 with the queued documents, then processes them to ready', async () => {
    const response = await upload(server, owner.key, workspaceId, [{ name: 'notes.txt', bytes: 'First paragraph.\n\nSecond paragraph.' }], '{"source":"test"}');
    expect(response.status).toBe(202);
    const [queued] = response.body as DocumentBody[];
    expect(queued).toMatchObject({
      workspace_id: workspaceId,
      filename: 'notes.txt',
      content_type: 'text/plain',
      size_bytes: 35,
      status: 'queued',
      error: null,
      chunk_count: 0,
      metadata: { source: 'test' },
    });
    expect(queued!.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(queued!.stage).toBe('queued');
    const [ready] = await waitForDocuments(server, owner.key, [queued!.id]);
    expect(ready).toMatchObject({ status: 'ready', stage: 'ready', chunk_count: 1, error: null });
    expect(Object.keys(ready!)).toEqual([
      'id', 'workspace_id', 'filename', 'content_type', 'size_bytes', 'sha256', 'status', 'stage', 'error',
      'page_count', 'chunk_count', 'embedded_chunks', 'ocr_pages_done', 'ocr_pages_total', 'metadata', 'created_at', 'updated_at',
    ]);
    expect(ready!.embedded_chunks).toBe(1);
  });

  it('takes several file parts at once, and JSON text', async () => {
    const multi = await upload(server, owner.key, workspaceId, [
      { name: 'a.md', bytes: '# A\n\nalpha' },
      { name: 'b.md', bytes: '# B\n\nbeta' },
    ]);
    expect(multi.status).toBe(202);
    expect(multi.body.map((document: DocumentBody) => document.filename)).toEqual(['a.md', 'b.md']);
    const json = await server.request('POST', `/v1/kb/workspaces/${workspaceId}/documents`, {
      key: owner.key,
      json: { filename: 'pasted.txt', content: 'pasted text body', metadata: { origin: 'clipboard' } },
    });
    expect(json.status).toBe(202);
    expect(json.body).toHaveLength(1);
    const [ready] = await waitForDocuments(server, owner.key, [json.body[0].id]);
    expect(ready).toMatchObject({ filename: 'pasted.txt', status: 'ready', metadata: { origin: 'clipboard' } });
  });

  it('keeps page numbers of a PDF: sample_pdf_2 has 4 pages, chunks in order with pages spanned', async () => {
    const [document] = await ingest([{ name: 'sample_pdf_2.pdf', bytes: await readBenchPdf('sample_pdf_2.pdf') }]);
    expect(document).toMatchObject({ status: 'ready', content_type: 'application/pdf', page_count: 4 });
    const chunks = await chunksOf(document!);
    expect(chunks.length).toBe(document!.chunk_count);
    expect(chunks.map((chunk) => chunk.chunk_index)).toEqual(chunks.map((_, index) => index));
    const pages = chunks.map((chunk) => chunk.metadata.page!);
    expect(pages[0]).toBe(1);
    expect(pages.at(-1)).toBe(4);
    expect([...pages].sort((a, b) => a - b)).toEqual(pages);
    for (const chunk of chunks) {
      expect(chunk.metadata.pages[0]).toBe(chunk.metadata.page);
      expect(chunk.token_count).toBeGreaterThan(0);
      expect(chunk.token_count).toBeLessThanOrEqual(200);
    }
  });

  it('parses every bench PDF, the scanned one by OCR, and fails one with no text at all with a clear reason', async () => {
    const names = ['sample_pdf_1.pdf', 'sample_pdf_3.pdf', 'sample_pdf_4.pdf', 'non_text_searchable.pdf'];
    const documents = await ingest([
      ...(await Promise.all(names.map(async (name) => ({ name, bytes: await readBenchPdf(name) })))),
      { name: 'blank.pdf', bytes: makeBlankPdf(2) },
    ]);
    const byName = Object.fromEntries(documents.map((document) => [document.filename, document]));
    expect(byName['sample_pdf_1.pdf']).toMatchObject({ status: 'ready', page_count: 4 });
    expect(byName['sample_pdf_3.pdf']).toMatchObject({ status: 'ready', page_count: 1 });
    expect(byName['sample_pdf_4.pdf']).toMatchObject({ status: 'ready', page_count: 4 });
    for (const name of names) expect(byName[name]!.chunk_count).toBeGreaterThan(0);
    // The scan's one page, read by OCR and marked so.
    expect(byName['non_text_searchable.pdf']).toMatchObject({ status: 'ready', page_count: 1 });
    const scanned = await chunksOf(byName['non_text_searchable.pdf']!);
    expect(scanned.every((chunk) => chunk.metadata.page === 1 && chunk.metadata.ocr === true)).toBe(true);
    expect(scanned[0]!.metadata.ocrConfidence).toBeGreaterThan(80);
    expect(byName['blank.pdf']).toMatchObject({ status: 'failed', error: 'the PDF has no text: no text layer, and no scanned page with text for OCR to read' });
  });

  it('parses DOCX, HTML (no scripts or styles), Markdown, CSV and JSON', async () => {
    const documents = await ingest([
      { name: 'report.docx', bytes: await makeDocx() },
      {
        name: 'page.html',
        bytes: '<html><head><style>.x{color:red}</style><script>var secret = 1;</script></head><body><h1>Guide</h1><p>Visible words here.</p><script>alert("no")</script></body></html>',
      },
      { name: 'readme.md', bytes: '# Setup\n\nInstall it.\n\n## Usage\n\n```sh\nkb serve\n```\n' },
      { name: 'table.csv', bytes: 'name,score\nada,3\nbob,5\n' },
      { name: 'data.json', bytes: '{"answer":42,"items":["x","y"]}' },
    ]);
    for (const document of documents) expect(document, document.filename).toMatchObject({ status: 'ready' });
    const text = async (name: string) => (await chunksOf(documents.find((document) => document.filename === name)!)).map((chunk) => chunk.content).join('\n');
    expect(await text('report.docx')).toContain('Revenue rose by twelve percent');
    const html = await text('page.html');
    expect(html).toContain('Visible words here.');
    expect(html).not.toMatch(/secret|alert|color:red/);
    expect(await text('readme.md')).toContain('kb serve');
    expect(await text('table.csv')).toContain('ada,3');
    expect(await text('data.json')).toContain('42');
    const docxChunks = await chunksOf(documents.find((document) => document.filename === 'report.docx')!);
    expect(docxChunks.flatMap((chunk) => chunk.metadata.headings)).toContain('Annual Report');
  });

  it('returns the existing document for the same content in the same workspace', async () => {
    const bytes = 'duplicate me, please';
    const first = await upload(server, owner.key, workspaceId, [{ name: 'one.txt', bytes }]);
    const second = await upload(server, owner.key, workspaceId, [{ name: 'two.txt', bytes }]);
    expect(second.status).toBe(202);
    expect(second.body[0].id).toBe(first.body[0].id);
    expect(second.body[0].filename).toBe('one.txt');
    const elsewhere = await upload(server, owner.key, await newWorkspace(), [{ name: 'two.txt', bytes }]);
    expect(elsewhere.body[0].id).not.toBe(first.body[0].id);
  });

  it('stores the same new content once when ten uploads of it arrive at once', async () => {
    const workspace = await newWorkspace();
    const bytes = `raced content ${workspace}`;
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => upload(server, owner.key, workspace, [{ name: `race-${i}.txt`, bytes }])));
    for (const answer of answers) expect(answer.status).toBe(202);
    expect(new Set(answers.map((answer) => answer.body[0].id)).size).toBe(1);
    const listed = await server.request('GET', `/v1/kb/workspaces/${workspace}/documents`, { key: owner.key });
    expect(listed.body).toHaveLength(1);
  });

  it('stores an upload of new, repeated and known files in file order, each content once', async () => {
    const workspace = await newWorkspace();
    const known = await ingest([{ name: 'known.txt', bytes: 'stored before this upload' }], workspace);
    const response = await upload(server, owner.key, workspace, [
      { name: 'a.txt', bytes: 'the first new text' },
      { name: 'again.txt', bytes: 'the first new text' },
      { name: 'known-again.txt', bytes: 'stored before this upload' },
      { name: 'b.txt', bytes: 'the second new text' },
    ]);
    expect(response.status).toBe(202);
    const [a, again, knownAgain, b] = response.body as DocumentBody[];
    expect([a!.filename, again!.filename, knownAgain!.filename, b!.filename]).toEqual(['a.txt', 'a.txt', 'known.txt', 'b.txt']);
    expect(again!.id).toBe(a!.id);
    expect(knownAgain!.id).toBe(known[0]!.id);
    expect(new Set([a!.id, b!.id, known[0]!.id]).size).toBe(3);
    // Both in one statement: the same millisecond, perhaps, but in file order (the list below, newest first, shows it).
    expect(Date.parse(a!.created_at)).toBeLessThanOrEqual(Date.parse(b!.created_at));
    // Each new document got its bytes and its job: both are processed.
    const processed = await waitForDocuments(server, owner.key, [a!.id, b!.id]);
    expect(processed.map((document) => [document.filename, document.status, document.chunk_count])).toEqual([
      ['a.txt', 'ready', 1],
      ['b.txt', 'ready', 1],
    ]);
    const listed = await server.request('GET', `/v1/kb/workspaces/${workspace}/documents`, { key: owner.key });
    expect((listed.body as DocumentBody[]).map((document) => document.filename)).toEqual(['b.txt', 'a.txt', 'known.txt']);
  });
});

describe('bad uploads', () => {
  it('fails a corrupt or truncated PDF and a corrupt DOCX with a reason, without affecting others', async () => {
    const pdf = await readBenchPdf('sample_pdf_1.pdf');
    const docx = await makeDocx();
    const documents = await ingest([
      { name: 'truncated.pdf', bytes: pdf.subarray(0, 2000) },
      { name: 'garbage.pdf', bytes: `%PDF-1.7\n${'obj garbage '.repeat(500)}` },
      { name: 'broken.docx', bytes: docx.subarray(0, Math.floor(docx.length / 2)) },
      { name: 'fine.txt', bytes: 'this one is fine' },
    ]);
    const byName = Object.fromEntries(documents.map((document) => [document.filename, document]));
    expect(byName['fine.txt']!.status).toBe('ready');
    for (const name of ['truncated.pdf', 'broken.docx']) {
      expect(byName[name], name).toMatchObject({ status: 'failed' });
      expect(byName[name]!.error, name).toBeTruthy();
    }
    expect(byName['garbage.pdf']).toMatchObject({ status: 'failed' });
    expect((await server.request('GET', '/healthz')).status).toBe(200);
  });

  it('stores text holding NUL characters or unpaired surrogates without them, and the files parsed with it too', async () => {
    // Found by a hostile probe: a chunk with U+0000 (PostgreSQL text refuses it) or a heading with
    // a lone surrogate (jsonb refuses it) failed its write, and with it every document parsed in
    // the same batch.
    const docx = await editedDocx((xml) => xml.replace('Annual Report', 'Annual &#0;Report &#xD800;').replace('opening three new offices', 'opening&#0; three new offices'));
    const documents = await ingest([
      { name: 'before.txt', bytes: 'A note written before the odd report.' },
      { name: 'odd.docx', bytes: docx },
      { name: 'after.md', bytes: '# After\n\nA note written after the odd report.' },
    ]);
    for (const document of documents) expect(document, document.filename).toMatchObject({ status: 'ready', error: null });
    const odd = documents.find((document) => document.filename === 'odd.docx')!;
    const chunks = await chunksOf(odd);
    const stored = JSON.stringify(chunks);
    expect(stored).not.toContain('\\u0000');
    expect(chunks.some((chunk) => chunk.content.includes('opening three new offices'))).toBe(true);
    expect(chunks.flatMap((chunk) => chunk.metadata.headings)).toContain('Annual Report \ufffd');
  });

  it('rejects an empty file, binary junk named .txt and unsafe filenames; nothing is stored', async () => {
    const workspace = await newWorkspace();
    expectError(await asResponse(upload(server, owner.key, workspace, [{ name: 'empty.txt', bytes: '' }])), 400, 'bad_request');
    const junk = Uint8Array.from({ length: 4096 }, (_, index) => (index * 31) % 256);
    expectError(await asResponse(upload(server, owner.key, workspace, [{ name: 'junk.txt', bytes: junk }])), 415, 'unsupported_media_type');
    const randomPdf = Uint8Array.from({ length: 5000 }, (_, index) => (index * 7919) % 251);
    expectError(await asResponse(upload(server, owner.key, workspace, [{ name: 'random.pdf', bytes: randomPdf }])), 415, 'unsupported_media_type');
    const gif = Uint8Array.from([0x47, 0x49, 0x46, 0x38, 0x39, 0x61, ...new Array(64).fill(0)]);
    expectError(await asResponse(upload(server, owner.key, workspace, [{ name: 'image.gif', bytes: gif }])), 415, 'unsupported_media_type');
    for (const name of ['../etc/passwd', 'dir\\file.txt', 'bell\u0007.txt', '..']) {
      const viaMultipart = await upload(server, owner.key, workspace, [{ name, bytes: 'x' }]);
      expect(viaMultipart.status, name).toBe(400);
      // A control character makes the multipart header itself malformed.
      expect(viaMultipart.body.message).toMatch(/[\u0000-\u001f]/.test(name) ? /^(filename|body): / : /^filename: /);
      const body = expectError(
        await server.request('POST', `/v1/kb/workspaces/${workspace}/documents`, { key: owner.key, json: { filename: name, content: 'x' } }),
        400,
        'bad_request',
      );
      expect(body.message).toMatch(/^filename: /);
    }
    const list = await server.request('GET', `/v1/kb/workspaces/${workspace}/documents`, { key: owner.key });
    expect(list.body).toEqual([]);
  });

  it('rejects a metadata part that is not a JSON object with 400 naming metadata', async () => {
    for (const metadata of ['not json', '[1,2]', '"text"']) {
      const response = await upload(server, owner.key, workspaceId, [{ name: 'm.txt', bytes: 'metadata test' }], metadata);
      expect(response.status, metadata).toBe(400);
      expect(response.body.message).toMatch(/^metadata: /);
    }
  });

  it('takes a full upload, every file allowed and the metadata part, and refuses one file or part more', async () => {
    const workspace = await newWorkspace();
    const files = (count: number) => Array.from({ length: count }, (_, i) => ({ name: `full-${i}.txt`, bytes: `full upload file ${i}` }));
    const full = await upload(server, owner.key, workspace, files(20), '{"batch": "full"}');
    expect(full.status, JSON.stringify(full.body)).toBe(202);
    expect(full.body).toHaveLength(20);
    expect(full.body.every((document: DocumentBody) => (document.metadata as { batch?: string }).batch === 'full')).toBe(true);
    const tooMany = await upload(server, owner.key, workspace, files(21), '{"batch": "over"}');
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.message).toBe('file: at most 20 files per upload');
    const form = new FormData();
    for (const file of files(20)) form.append('file', new File([file.bytes], file.name));
    form.append('metadata', '{}');
    form.append('metadata', '{}');
    const twoMetadata = await fetch(new URL(`/v1/kb/workspaces/${workspace}/documents`, server.url), { method: 'POST', headers: { authorization: `Bearer ${owner.key}` }, body: form });
    expect(twoMetadata.status).toBe(400);
    expect(((await twoMetadata.json()) as { message: string }).message).toBe('body: only one metadata part is accepted');
    const listed = await server.request('GET', `/v1/kb/workspaces/${workspace}/documents?limit=100`, { key: owner.key });
    expect(listed.body).toHaveLength(20);
  });

  it('answers 413 for a file over the limit and keeps serving', async () => {
    const response = await upload(server, owner.key, workspaceId, [{ name: 'big.txt', bytes: 'x'.repeat(3 * 1024 * 1024) }]);
    expect(response.status).toBe(413);
    expect(response.body.error).toBe('payload_too_large');
    const huge = await uploadOnNewConnection(server, owner.key, workspaceId, [{ name: 'huge.pdf', bytes: new Uint8Array(200 * 1024 * 1024) }]);
    expect(huge.status).toBe(413);
    expect((await server.request('GET', '/healthz')).status).toBe(200);
    const list = await server.request('GET', `/v1/kb/workspaces/${workspaceId}/documents?limit=1000`, { key: owner.key });
    expect(list.body.map((document: DocumentBody) => document.filename)).not.toContain('huge.pdf');
  });

  it('answers 415 for a body that is neither multipart nor JSON, 400 for missing files', async () => {
    expectError(
      await server.request('POST', `/v1/kb/workspaces/${workspaceId}/documents`, { key: owner.key, body: 'x', headers: { 'content-type': 'text/plain' } }),
      415,
      'unsupported_media_type',
    );
    const form = new FormData();
    form.append('metadata', '{}');
    const response = await fetch(new URL(`/v1/kb/workspaces/${workspaceId}/documents`, server.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${owner.key}` },
      body: form,
    });
    expect(response.status).toBe(400);
  });

  it('needs kb:write, and the workspace must be the caller’s own', async () => {
    const readOnly = await server.createKey(owner, ['kb:read']);
    const denied = await upload(server, readOnly, workspaceId, [{ name: 'x.txt', bytes: 'x' }]);
    expect(denied.status).toBe(403);
    expect(denied.body.message).toContain('kb:write');
    const stranger = await server.createUser();
    const hidden = await upload(server, stranger.key, workspaceId, [{ name: 'x.txt', bytes: 'x' }]);
    expect(hidden.status).toBe(404);
  });
});

describe('stage', () => {
  it('tells parsing from embedding while a document is processing', async () => {
    const [document] = await ingest([{ name: 'stages.txt', bytes: 'A document whose stages are looked at.' }]);
    const stageOf = async () => ((await server.request('GET', `/v1/kb/documents/${document!.id}`, { key: owner.key })).body as DocumentBody).stage;
    expect(await stageOf()).toBe('ready');
    const prisma = server.app.db.prisma;
    // The states the worker moves a document through (it has no job now, so none moves it on).
    await prisma.document.update({ where: { id: document!.id }, data: { status: 'processing', chunkCount: 0, embeddedChunks: 0 } });
    expect(await stageOf()).toBe('parsing');
    await prisma.document.update({ where: { id: document!.id }, data: { status: 'processing', chunkCount: 1, embeddedChunks: 0 } });
    expect(await stageOf()).toBe('embedding');
    await prisma.document.update({ where: { id: document!.id }, data: { status: 'queued' } });
    expect(await stageOf()).toBe('queued');
    await prisma.document.update({ where: { id: document!.id }, data: { status: 'failed', error: 'x' } });
    expect(await stageOf()).toBe('failed');
    const graph = await server.graphql<{ document: { stage: string } }>(owner.key, 'query($id: ID!) { document(id: $id) { stage } }', { id: document!.id });
    expect(graph.data!.document.stage).toBe('failed');
  });
});

describe('documents over GraphQL', () => {
  it('uploads with the multipart request spec and reads chunks through nested fields', async () => {
    const form = new FormData();
    form.set('operations', JSON.stringify({
      query: 'mutation($workspaceId: ID!, $file: File!) { uploadDocument(workspaceId: $workspaceId, file: $file) { id status } }',
      variables: { workspaceId, file: null },
    }));
    form.set('map', JSON.stringify({ 0: ['variables.file'] }));
    form.set('0', new File(['graph text for graphql'], 'graph.txt'));
    const response = await fetch(new URL('/graphql', server.url), { method: 'POST', headers: { authorization: `Bearer ${owner.key}` }, body: form });
    const result = (await response.json()) as { data: { uploadDocument: { id: string; status: string } } };
    expect(result.data.uploadDocument.status).toBe('queued');
    await waitForDocuments(server, owner.key, [result.data.uploadDocument.id]);
    const read = await server.graphql<{ workspace: { documents: { edges: { node: { id: string; chunks: { edges: { node: { content: string } }[] } } }[] } } }>(
      owner.key,
      'query($id: ID!) { workspace(id: $id) { documents(first: 50) { edges { node { id chunks { edges { node { content } } } } } } } }',
      { id: workspaceId },
    );
    const node = read.data!.workspace.documents.edges.find((edge) => edge.node.id === result.data.uploadDocument.id)!.node;
    expect(node.chunks.edges[0]!.node.content).toContain('graph text');
  });
});

async function asResponse(pending: Promise<{ status: number; body: any }>) {
  const { status, body } = await pending;
  return { status, body, headers: new Headers(), text: JSON.stringify(body) };
}
