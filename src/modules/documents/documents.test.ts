import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { editedDocx, makeBlankPdf, makeDocx, readBenchPdf, upload, waitForDocuments, type DocumentBody } from '../../../test/support/documents.js';
import { expectError, startTestServer, type TestServer, type TestUser } from '../../../test/support/server.js';

let server: TestServer;
let owner: TestUser;
let workspaceId: string;

async function newWorkspace(user = owner) {
  const response = await server.request('POST', '/v1/kb/workspaces', { key: user.key, json: { name: `docs ${Math.random()}` } });
  return response.body.id as string;
}

async function ingest(files: { name: string; bytes: Uint8Array | string }[], workspace = workspaceId) {
  const response = await upload(server, owner.key, workspace, files);
  expect(response.status, JSON.stringify(response.body)).toBe(202);
  return waitForDocuments(server, owner.key, (response.body as DocumentBody[]).map((document) => document.id));
}

async function chunksOf(document: DocumentBody) {
  const response = await server.request('GET', `/v1/kb/documents/${document.id}/chunks?workspace_id=${document.workspace_id}&limit=1000`, {
    key: owner.key,
  });
  expect(response.status).toBe(200);
  return response.body as { document_id: string; chunk_index: number; content: string; token_count: number; metadata: { page: number | null; pages: number[]; headings: string[]; ocr?: true; ocrConfidence?: number } }[];
}

beforeAll(async () => {
  server = await startTestServer({ KB_MAX_UPLOAD_BYTES: String(2 * 1024 * 1024), KB_CHUNK_TOKENS: '200', KB_CHUNK_OVERLAP_TOKENS: '20' });
  owner = await server.createUser();
  workspaceId = await newWorkspace();
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
    const huge = await upload(server, owner.key, workspaceId, [{ name: 'huge.pdf', bytes: new Uint8Array(200 * 1024 * 1024) }]);
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
