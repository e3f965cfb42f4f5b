import ExcelJS from 'exceljs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectProtocol, expectVerbatimQuotes, streamAgent } from './support/agent.js';
import {
  makeBlankPdf,
  makeDocx,
  makeDocxWithPicture,
  makePptxWithPicture,
  makeEpub,
  makeOdt,
  makeScannedPdf,
  makeTiff,
  makeTiffFrames,
  makeGeneratedXlsx,
  makeNumberedRowsXlsx,
  makePptx,
  makeRtf,
  makeRepeatedScan,
  newDeck,
  pngHeaderOfSize,
  readBenchPdf,
  renderPdfPage,
  upload,
  waitForDocuments,
  type DocumentBody,
} from './support/documents.js';
import { startTestServer, type TestServer, type TestUser } from './support/server.js';
import { createWorkspace } from './support/fixtures.js';

let server: TestServer;
let user: TestUser;
let workspaceId: string;

async function workbook(build: (book: ExcelJS.Workbook) => void): Promise<Uint8Array> {
  const book = new ExcelJS.Workbook();
  build(book);
  return new Uint8Array(await book.xlsx.writeBuffer());
}

async function ingest(key: string, workspace: string, files: { name: string; bytes: Uint8Array | string }[]): Promise<Record<string, DocumentBody>> {
  const response = await upload(server, key, workspace, files);
  expect(response.status, JSON.stringify(response.body)).toBe(202);
  const documents = await waitForDocuments(server, key, response.body.map((document: DocumentBody) => document.id), 180_000);
  return Object.fromEntries(documents.map((document) => [document.filename, document]));
}

const chunksOf = async (document: DocumentBody) =>
  (await server.request('GET', `/v1/kb/documents/${document.id}/chunks?workspace_id=${document.workspace_id}&limit=1000`, { key: user.key })).body as {
    content: string;
    metadata: { sheet?: string; range?: string; headings: string[]; page: number | null; pages: number[]; ocr?: true; ocrConfidence?: number };
  }[];

beforeAll(async () => {
  // Far below the text of a million-row sheet, so that the limit refuses it early while it is read.
  server = await startTestServer({ KB_MAX_TEXT_CHARACTERS: '1000000' });
  user = await server.createUser({ credits: 100 });
  workspaceId = (await createWorkspace(server, user.key, 'sheets')).id;
}, 120_000);

afterAll(() => server?.close());

describe('office formats through HTTP', () => {
  it('makes an XLSX of two sheets, a CSV and a TSV searchable, and answers a question about a cell citing its sheet and row', { timeout: 240_000 }, async () => {
    const book = await workbook((book) => {
      const revenue = book.addWorksheet('Regional revenue');
      revenue.addRow(['Region', 'FY2023 revenue', 'FY2024 revenue']);
      revenue.addRow(['Northern territory', 1200, 1350]);
      revenue.addRow(['Southern coast', 800, 975.5]);
      revenue.addRow(['Western plains', 640, 702]);
      for (const cell of ['B2', 'C2', 'B3', 'C3', 'B4', 'C4']) revenue.getCell(cell).numFmt = '#,##0.0';
      const staff = book.addWorksheet('Staff');
      staff.addRow(['Name', 'Team', 'Started']);
      staff.addRow(['Ada Quill', 'Reactor physics', new Date(Date.UTC(2021, 2, 14))]);
      staff.addRow(['Bo Fenn', 'Launch operations', new Date(Date.UTC(2019, 10, 2))]);
      staff.getColumn(3).numFmt = 'd mmmm yyyy';
    });
    const documents = await ingest(user.key, workspaceId, [
      { name: 'finance.xlsx', bytes: book },
      { name: 'harbours.tsv', bytes: 'harbour\tdepth_m\tberths\nPort Alder\t14.5\t12\nKestrel Bay\t9\t4\n' },
      { name: 'vessels.csv', bytes: 'vessel,crew,home port\nGannet,6,Kestrel Bay\n"Storm Petrel, II",11,Port Alder\n' },
    ]);
    for (const document of Object.values(documents)) expect(document, `${document.filename}: ${document.error}`).toMatchObject({ status: 'ready' });
    expect(documents['finance.xlsx']!.content_type).toBe('application/vnd.openxmlformats-officedocument.spreadsheetml.sheet');
    expect(documents['harbours.tsv']!.content_type).toBe('text/tab-separated-values');
    expect(documents['vessels.csv']!.content_type).toBe('text/csv');

    const chunks = await chunksOf(documents['finance.xlsx']!);
    expect(chunks.map((chunk) => [chunk.metadata.sheet, chunk.metadata.range])).toEqual([
      ['Regional revenue', 'A2:C4'],
      ['Staff', 'A2:C3'],
    ]);
    expect(chunks[0]!.content).toContain('Southern coast | 800.0 | 975.5');
    expect(chunks[1]!.content).toContain('Ada Quill | Reactor physics | 14 March 2021');

    const search = await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'Which team is Ada Quill on?', workspace_id: workspaceId, top_k: 1 } });
    expect(search.body.results[0]).toMatchObject({ document_id: documents['finance.xlsx']!.id, metadata: { sheet: 'Staff', range: 'A2:C3' } });
    const depth = await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'How deep is Port Alder harbour?', workspace_id: workspaceId, top_k: 1 } });
    expect(depth.body.results[0]).toMatchObject({ document_id: documents['harbours.tsv']!.id });
    expect(depth.body.results[0].content).toContain('Port Alder\t14.5\t12');
    const crew = await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'How many crew does the Storm Petrel have?', workspace_id: workspaceId, top_k: 1 } });
    expect(crew.body.results[0]).toMatchObject({ document_id: documents['vessels.csv']!.id });
    expect(crew.body.results[0].content).toContain('Storm Petrel, II');

    const stream = await streamAgent(server, user.key, { message: 'What was the FY2024 revenue of the Southern coast region?', workspaceIds: [workspaceId] });
    const { answer, sources } = expectProtocol(stream);
    expect(answer).toContain('975.5');
    const cited = sources.flatMap((source) => source.passages.map((passage) => ({ ...passage, filename: source.filename })));
    expect(cited).toContainEqual(expect.objectContaining({ filename: 'finance.xlsx', cells: "'Regional revenue'!A3:C3" }));
    expect(cited.find((passage) => passage.cells === "'Regional revenue'!A3:C3")!.quote).toContain('Southern coast | 800.0 | 975.5');
    await expectVerbatimQuotes(server, user.key, [workspaceId], sources);
  });

  it('makes slides, an e-book and rich text searchable: a slide is a page, its notes marked, a chapter a heading', { timeout: 240_000 }, async () => {
    const documents = await ingest(user.key, workspaceId, [
      { name: 'review.pptx', bytes: await makePptx() },
      { name: 'lighthouse.epub', bytes: await makeEpub() },
      { name: 'harbour.rtf', bytes: makeRtf() },
    ]);
    for (const document of Object.values(documents)) expect(document, `${document.filename}: ${document.error}`).toMatchObject({ status: 'ready' });
    expect(documents['review.pptx']).toMatchObject({ page_count: 2, content_type: 'application/vnd.openxmlformats-officedocument.presentationml.presentation' });
    expect(documents['lighthouse.epub']).toMatchObject({ content_type: 'application/epub+zip' });
    expect(documents['harbour.rtf']).toMatchObject({ content_type: 'application/rtf' });

    const notes = await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'Where was the magnetometer built?', workspace_id: workspaceId, top_k: 1 } });
    expect(notes.body.results[0]).toMatchObject({ document_id: documents['review.pptx']!.id, metadata: { page: 1, headings: ['Launch schedule', 'Speaker notes'] } });
    expect(notes.body.results[0].content).toBe('Speaker notes\n\nMention that the magnetometer was built in Tromso.');
    const budget = await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'How much does telemetry cost?', workspace_id: workspaceId, top_k: 1 } });
    expect(budget.body.results[0]).toMatchObject({ document_id: documents['review.pptx']!.id, metadata: { page: 2 } });
    expect(budget.body.results[0].content).toContain('Telemetry | 1,150');
    const rescue = await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'Where did the lifeboat come from?', workspace_id: workspaceId, top_k: 1 } });
    expect(rescue.body.results[0]).toMatchObject({ document_id: documents['lighthouse.epub']!.id, metadata: { headings: ['The rescue'] } });
    expect(rescue.body.results[0].content).toBe('The rescue\n\nMorning\n\nThe lifeboat came from Port Alder at dawn and took the crew ashore.');

    const fees = await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'What do café owners on the quay pay?', workspace_id: workspaceId, top_k: 1 } });
    expect(fees.body.results[0]).toMatchObject({ document_id: documents['harbour.rtf']!.id, metadata: { headings: ['Berth fees'] } });
    expect(fees.body.results[0].content).toContain('Café owners on the quay pay € 3 a day.');

    const stream = await streamAgent(server, user.key, { message: 'When does the Kestrel-4 probe launch?', workspaceIds: [workspaceId] });
    const { answer, sources } = expectProtocol(stream);
    expect(answer).toContain('March');
    expect(sources[0]).toMatchObject({ filename: 'review.pptx', pages: [1] });
  });

  it('fails a password-protected, truncated or zip-bomb file with a reason, bounds a million rows, 16,000 columns and 5,000 slides, reads linked formulas as their results, and keeps serving others', { timeout: 450_000 }, async () => {
    const whole = await workbook((book) => book.addWorksheet('One').addRow(['alpha', 'beta']));
    const compound = new Uint8Array(8192);
    compound.set([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]);
    // 100 MB of rows deflated to well under a megabyte.
    const row = '<row><c t="inlineStr"><is><t>All work and no play makes a zip bomb.</t></is></c></row>'.repeat(10_000);
    const bomb = await makeGeneratedXlsx((written) => (written < 100 * 1024 * 1024 ? row : undefined));
    expect(bomb.byteLength).toBeLessThan(2 * 1024 * 1024);
    // A million numbered rows, 40 MB of XML within the unpacking limit, whose 6.9 million characters pass this server's text limit before a sixth of them is read.
    const millionRows = await makeNumberedRowsXlsx(1_000_000);
    // Formulas that point at other files, one of them on the web: their stored results are read, never the files.
    const linked = await workbook((book) => {
      const sheet = book.addWorksheet('Links');
      sheet.addRow(['Budget line', 'Amount']);
      sheet.addRow(['Linked', { formula: "'[budget.xlsx]Sheet1'!A1", result: 7 }]);
      sheet.addRow(['Remote', { formula: "'https://files.example.com/[data.xlsx]Totals'!B2", result: 12 }]);
    });
    // The shapes at their extremes with little text in them: every chunk is embedded by the real
    // model, and words would add only time.
    const wide = await workbook((book) => book.addWorksheet('Wide').addRow(Array.from({ length: 16_000 }, (_, index) => index + 1)));
    // 5,000 slides: read whole within the limits, each a page.
    const deck = await newDeck();
    for (let index = 1; index <= 5_000; index++) deck.addSlide().addText(String(index), { x: 0.5, y: 0.5, w: 9, h: 1 });
    const longDeck = new Uint8Array((await deck.write({ outputType: 'uint8array' })) as Uint8Array);
    const other = await server.createUser();
    const otherWorkspace = (await createWorkspace(server, other.key, 'notes')).id;

    const uploaded = await upload(server, user.key, workspaceId, [
      { name: 'secret.xlsx', bytes: compound },
      { name: 'truncated.xlsx', bytes: whole.subarray(0, Math.floor(whole.length / 2)) },
      { name: 'bomb.xlsx', bytes: bomb },
      { name: 'million.xlsx', bytes: millionRows },
      { name: 'wide.xlsx', bytes: wide },
      { name: 'linked.xlsx', bytes: linked },
      { name: 'long.pptx', bytes: longDeck },
      { name: 'mislabelled.pptx', bytes: 'This is plain text that someone named as a slide deck.' },
      { name: 'truncated.epub', bytes: (await makeEpub()).subarray(0, 300) },
    ]);
    expect(uploaded.status, JSON.stringify(uploaded.body)).toBe(202);
    const note = await ingest(other.key, otherWorkspace, [{ name: 'note.txt', bytes: 'A note written while the workbooks were processed.' }]);
    expect(note['note.txt']!.status).toBe('ready');

    // ci85 took 254 s of the 280 s it then waited, beside the other files of the pgvector leg.
    const documents = Object.fromEntries(
      (await waitForDocuments(server, user.key, uploaded.body.map((document: DocumentBody) => document.id), 420_000)).map((document) => [document.filename, document]),
    );
    expect(documents['secret.xlsx']).toMatchObject({ status: 'failed' });
    expect(documents['secret.xlsx']!.error).toMatch(/^the XLSX is password-protected or in the older binary format/);
    expect(documents['truncated.xlsx']).toMatchObject({ status: 'failed' });
    expect(documents['truncated.xlsx']!.error).toMatch(/^not a readable XLSX: /);
    expect(documents['bomb.xlsx']).toMatchObject({ status: 'failed', error: 'the XLSX unpacks to more than the limit of 64 MB' });
    // Read a row at a time, the sheet is refused by the text limit as its rows pass it, not by running out of memory.
    expect(documents['million.xlsx']).toMatchObject({ status: 'failed', error: "the document's text is longer than the limit of 1,000,000 characters" });
    expect(documents['wide.xlsx'], documents['wide.xlsx']!.error ?? '').toMatchObject({ status: 'ready' });
    expect(documents['linked.xlsx'], documents['linked.xlsx']!.error ?? '').toMatchObject({ status: 'ready' });
    expect((await chunksOf(documents['linked.xlsx']!)).map((chunk) => chunk.content).join('\n')).toContain('Budget line | Amount\nLinked | 7\nRemote | 12');
    expect(documents['long.pptx'], documents['long.pptx']!.error ?? '').toMatchObject({ status: 'ready', page_count: 5_000 });
    // Content decides the type: text named .pptx is read as the text it is.
    expect(documents['mislabelled.pptx']).toMatchObject({ status: 'ready', content_type: 'text/plain' });
    expect(documents['truncated.epub']).toMatchObject({ status: 'failed' });
    expect(documents['truncated.epub']!.error).toMatch(/^not a readable EPUB: /);
    expect((await chunksOf(documents['wide.xlsx']!)).map((chunk) => chunk.content).join(' ')).toMatch(/\b15999 \| 16000$/);
    // The server still answers.
    expect((await server.request('GET', '/v1/user/me', { key: user.key })).status).toBe(200);
  });
});

describe('damaged and misnamed files of every format, through HTTP', () => {
  it('fails a file of each format cut in half with the reason its reader gives, and reads a misnamed file as what it is', { timeout: 300_000 }, async () => {
    const sharp = (await import('sharp')).default;
    const scan = await readBenchPdf('non_text_searchable.pdf');
    const page = await renderPdfPage(scan, 1, 'png');
    const whole: Record<string, Uint8Array> = {
      'report.pdf': new Uint8Array(await readBenchPdf('sample_pdf_1.pdf')),
      'report.docx': await makeDocx(),
      'book.xlsx': await workbook((book) => book.addWorksheet('One').addRow(['alpha', 'beta'])),
      'review.pptx': await makePptx(),
      'lighthouse.epub': await makeEpub(),
      'notes.odt': await makeOdt(),
      'page.png': page,
      'photo.jpg': await renderPdfPage(scan, 1, 'jpeg'),
      'page.webp': new Uint8Array(await sharp(page).webp().toBuffer()),
      'scans.tiff': await makeTiff([page]),
    };
    const reasons: Record<string, RegExp> = {
      'report.pdf': /^not a readable PDF: /,
      'report.docx': /^not a readable DOCX: /,
      'book.xlsx': /^not a readable XLSX: /,
      'review.pptx': /^not a readable PPTX: /,
      'lighthouse.epub': /^not a readable EPUB: /,
      'notes.odt': /^not a readable ODT: /,
      'page.png': /^not a readable PNG: /,
      'photo.jpg': /^not a readable JPEG: /,
      'page.webp': /^not a readable WebP: /,
      'scans.tiff': /^not a readable TIFF: /,
    };
    const cut = Object.entries(whole).map(([name, bytes]) => ({ name: `cut-${name}`, bytes: bytes.slice(0, Math.floor(bytes.length / 2)) }));
    // Content decides: each of these is read as what it is, whatever its name says.
    const misnamed = [
      { name: 'pdf-as.docx', bytes: whole['report.pdf']!, type: 'application/pdf' },
      { name: 'png-as.pdf', bytes: page, type: 'image/png' },
      { name: 'docx-as.xlsx', bytes: whole['report.docx']!, type: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document' },
      { name: 'rtf-as.txt', bytes: makeRtf(), type: 'application/rtf' },
      { name: 'text-as.png', bytes: new TextEncoder().encode('Plain words in a file named as a picture.'), type: 'text/plain' },
    ];
    // A workspace of its own: the same bytes uploaded again to one workspace are the document already there, under its first name.
    const damaged = (await createWorkspace(server, user.key, 'damaged and misnamed')).id;
    const uploaded = await upload(server, user.key, damaged, [...cut, ...misnamed]);
    expect(uploaded.status, JSON.stringify(uploaded.body)).toBe(202);
    const documents = Object.fromEntries(
      (await waitForDocuments(server, user.key, uploaded.body.map((document: DocumentBody) => document.id), 240_000)).map((document) => [document.filename, document]),
    );
    for (const [name, reason] of Object.entries(reasons)) {
      const document = documents[`cut-${name}`]!;
      expect(document, name).toMatchObject({ status: 'failed' });
      expect(document.error, name).toMatch(reason);
    }
    for (const { name, type } of misnamed) expect(documents[name], `${name}: ${documents[name]!.error}`).toMatchObject({ status: 'ready', content_type: type });
    expect((await chunksOf(documents['png-as.pdf']!)).map((chunk) => chunk.content).join(' ')).toContain('it cannot be rendered as plain text by the PDF reader');
    expect((await server.request('GET', '/v1/user/me', { key: user.key })).status).toBe(200);
  });
});

describe('scans and photos of pages, read by OCR', () => {
  it('makes the scanned PDF, a mixed PDF, a PNG and a JPEG of a page, a two-page TIFF and scans pasted into a DOCX and a deck searchable, cited with their page', { timeout: 300_000 }, async () => {
    const scan = await readBenchPdf('non_text_searchable.pdf');
    const typeset = await readBenchPdf('sample_pdf_1.pdf');
    // A mixed PDF: typeset pages with the scanned page between them.
    const { PDFDocument } = await import('pdf-lib');
    const mixedPdf = await PDFDocument.create();
    const [first, second] = await mixedPdf.copyPages(await PDFDocument.load(typeset), [0, 1]);
    const [scanned] = await mixedPdf.copyPages(await PDFDocument.load(scan), [0]);
    mixedPdf.addPage(first!);
    mixedPdf.addPage(scanned!);
    mixedPdf.addPage(second!);
    const mixed = new Uint8Array(await mixedPdf.save());
    const documents = await ingest(user.key, workspaceId, [
      { name: 'scan.pdf', bytes: scan },
      { name: 'mixed.pdf', bytes: mixed },
      { name: 'page.png', bytes: await renderPdfPage(scan, 1, 'png') },
      { name: 'photo.jpg', bytes: await renderPdfPage(scan, 1, 'jpeg') },
      // A scanner's file: a typeset page, then the scanned one.
      { name: 'scans.tiff', bytes: await makeTiff([await renderPdfPage(typeset, 1, 'png'), await renderPdfPage(scan, 1, 'png')]) },
      { name: 'letter.docx', bytes: await makeDocxWithPicture(await renderPdfPage(scan, 1, 'png', 1.5)) },
      { name: 'memo.pptx', bytes: await makePptxWithPicture(await renderPdfPage(scan, 1, 'png', 1.5)) },
    ]);
    for (const document of Object.values(documents)) expect(document, `${document.filename}: ${document.error}`).toMatchObject({ status: 'ready' });
    expect(documents['page.png']).toMatchObject({ content_type: 'image/png', page_count: 1 });
    expect(documents['photo.jpg']).toMatchObject({ content_type: 'image/jpeg', page_count: 1 });
    expect(documents['mixed.pdf']).toMatchObject({ page_count: 3 });
    expect(documents['scans.tiff']).toMatchObject({ content_type: 'image/tiff', page_count: 2, ocr_pages_done: 2, ocr_pages_total: 2 });

    for (const name of ['scan.pdf', 'page.png', 'photo.jpg']) {
      const chunks = await chunksOf(documents[name]!);
      const text = chunks.map((chunk) => chunk.content).join(' ');
      expect(text, name).toContain('it cannot be rendered as plain text by the PDF reader');
      for (const chunk of chunks) expect(chunk.metadata, name).toMatchObject({ page: 1, ocr: true });
      expect(chunks[0]!.metadata.ocrConfidence, name).toBeGreaterThan(80);
    }
    // Every page of the mixed PDF, in order; only the scanned one is marked as recognised.
    const mixedChunks = await chunksOf(documents['mixed.pdf']!);
    expect([...new Set(mixedChunks.flatMap((chunk) => chunk.metadata.pages))].sort()).toEqual([1, 2, 3]);
    for (const chunk of mixedChunks) expect(chunk.metadata.ocr === true, JSON.stringify(chunk.metadata)).toBe(chunk.metadata.pages.includes(2));
    expect(mixedChunks.map((chunk) => chunk.content).join(' ')).toContain('it cannot be rendered as plain text by the PDF reader');
    // Each frame of the TIFF is its page, in order, all of it recognised.
    const tiffChunks = await chunksOf(documents['scans.tiff']!);
    expect([...new Set(tiffChunks.flatMap((chunk) => chunk.metadata.pages))].sort()).toEqual([1, 2]);
    for (const chunk of tiffChunks) expect(chunk.metadata).toMatchObject({ ocr: true });
    const scannedFrame = tiffChunks.filter((chunk) => chunk.content.includes('it cannot be rendered as plain text by the PDF reader'));
    expect(scannedFrame.length).toBeGreaterThan(0);
    for (const chunk of scannedFrame) expect(chunk.metadata.pages).toContain(2);
    // A scan pasted into a document is read where it stands: after the letter's opening line, on each slide's page.
    const letter = (await chunksOf(documents['letter.docx']!)).map((chunk) => chunk.content).join('\n');
    expect(letter.indexOf('The letter below arrived on paper and was scanned.')).toBeLessThan(letter.indexOf('it cannot be rendered as plain text by the PDF reader'));
    expect(letter.indexOf('it cannot be rendered as plain text by the PDF reader')).toBeLessThan(letter.indexOf('Filed by the front desk.'));
    const memo = await chunksOf(documents['memo.pptx']!);
    expect(memo.filter((chunk) => chunk.content.includes('it cannot be rendered as plain text by the PDF reader')).flatMap((chunk) => chunk.metadata.pages)).toEqual([1, 2]);
    for (const chunk of memo) expect(chunk.metadata).toMatchObject({ ocr: true });

    const stream = await streamAgent(server, user.key, { message: 'Why can the non-text-searchable PDF not be rendered as plain text?', workspaceIds: [workspaceId] });
    const { sources } = expectProtocol(stream);
    // Each file that holds the scan's text cites the page it is on (a DOCX has none; a slide is a page).
    const scanPages: Record<string, number[][]> = {
      'scan.pdf': [[1]],
      'page.png': [[1]],
      'photo.jpg': [[1]],
      'mixed.pdf': [[2]],
      'scans.tiff': [[2]],
      'letter.docx': [[]],
      'memo.pptx': [[1], [2], [1, 2]],
    };
    const cited = sources.filter((source) => source.filename in scanPages);
    expect(cited.length, JSON.stringify(sources.map((source) => source.filename))).toBeGreaterThan(0);
    for (const source of cited) expect(scanPages[source.filename], `${source.filename}: ${JSON.stringify(source.pages)}`).toContainEqual(source.pages);
    await expectVerbatimQuotes(server, user.key, [workspaceId], sources);
  });

  it('shows OCR progress while it reads: stage ocr with pages done of total, in the document, the workspace stats and /metrics', { timeout: 180_000 }, async () => {
    const reading = await startTestServer();
    try {
      const owner = await reading.createUser();
      const workspace = (await createWorkspace(reading, owner.key, 'scans')).id;
      const uploaded = await upload(reading, owner.key, workspace, [{ name: 'scan.pdf', bytes: await makeRepeatedScan(5) }]);
      expect(uploaded.status, JSON.stringify(uploaded.body)).toBe(202);
      const id = uploaded.body[0].id as string;
      // Every page takes OCR a second or more here: the document is seen between its pages.
      const seen: number[] = [];
      let midway: { stats: Record<string, unknown>; metrics: string } | undefined;
      for (const deadline = Date.now() + 150_000; Date.now() < deadline; ) {
        const document = (await reading.request('GET', `/v1/kb/documents/${id}?workspace_id=${workspace}`, { key: owner.key })).body;
        if (document.status === 'ready' || document.status === 'failed') break;
        if (document.stage === 'ocr') {
          expect(document).toMatchObject({ status: 'processing', chunk_count: 0, ocr_pages_total: 5 });
          seen.push(document.ocr_pages_done);
          if (midway === undefined && document.ocr_pages_done >= 1 && document.ocr_pages_done <= 3) {
            midway = {
              stats: (await reading.request('GET', `/v1/kb/workspaces/${workspace}/stats`, { key: owner.key })).body,
              metrics: (await reading.request('GET', '/metrics')).text,
            };
          }
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      // Pages done only grows, and was seen part of the way through.
      expect(seen.length).toBeGreaterThan(0);
      expect(seen).toEqual([...seen].sort((a, b) => a - b));
      expect(midway, `pages done seen: ${seen.join(', ')}`).toBeDefined();
      expect(midway!.stats.ocr).toMatchObject({ documents: 1, pages_total: 5 });
      expect((midway!.stats.ocr as { pages_done: number }).pages_done).toBeGreaterThanOrEqual(1);
      expect(midway!.metrics).toMatch(/^kb_ingestion_ocr_pages\{state="total",kb_instance="[^"]+"\} 5$/m);
      expect(midway!.metrics).toMatch(/^kb_ingestion_ocr_pages\{state="done",kb_instance="[^"]+"\} [1-4]$/m);

      const [scan] = await waitForDocuments(reading, owner.key, [id], 150_000);
      expect(scan, scan!.error ?? '').toMatchObject({ status: 'ready', page_count: 5, ocr_pages_done: 5, ocr_pages_total: 5 });
      expect((await reading.request('GET', `/v1/kb/workspaces/${workspace}/stats`, { key: owner.key })).body.ocr).toEqual({ documents: 0, pages_done: 0, pages_total: 0 });
      expect((await reading.request('GET', '/metrics')).text).toMatch(/^kb_ingestion_ocr_pages\{state="total",kb_instance="[^"]+"\} 0$/m);
    } finally {
      await reading.close();
    }
  });

  it('gives each page read by OCR time of its own, beyond the allowance for the file size', { timeout: 300_000 }, async () => {
    // Eight seconds for any file: a parse thread started cold under CI's load still reaches the
    // first page within it (with four seconds it did not, once, in ci83). Thirty-two pages take
    // OCR far longer: 1.75 s a page on a quiet machine here, and 0.5 s on the fastest one seen,
    // where six pages once fitted the eight seconds, and fourteen (6.4-7.5 s) did in ci110.
    const baseSeconds = 8;
    const strict = await startTestServer({ KB_PARSE_TIMEOUT_SECONDS: String(baseSeconds), KB_PARSE_TIMEOUT_SECONDS_PER_MB: '0' });
    try {
      const owner = await strict.createUser();
      const workspace = (await createWorkspace(strict, owner.key, 'scans')).id;
      const started = Date.now();
      const uploaded = await upload(strict, owner.key, workspace, [{ name: 'scan.pdf', bytes: await makeRepeatedScan(32) }]);
      const [scan] = await waitForDocuments(strict, owner.key, [uploaded.body[0].id], 240_000);
      expect(scan, scan!.error ?? '').toMatchObject({ status: 'ready', page_count: 32 });
      // Otherwise the scan fitted the file's allowance, and the pages' own time was not needed.
      expect(Date.now() - started, 'the scan was read within the allowance for any file: this test shows nothing here').toBeGreaterThan(baseSeconds * 1000);
    } finally {
      await strict.close();
    }
  });

  it('refuses images too large to decode, TIFFs and PDFs with more pages to read than the limit, with a reason', { timeout: 300_000 }, async () => {
    const limited = await startTestServer({ KB_OCR_MAX_PAGES: '3' });
    try {
      const owner = await limited.createUser();
      const workspace = (await createWorkspace(limited, owner.key, 'scans')).id;
      const uploaded = await upload(limited, owner.key, workspace, [
        { name: 'huge.png', bytes: pngHeaderOfSize(30_000, 30_000) },
        { name: 'frames.tiff', bytes: makeTiffFrames(10_000) },
        { name: 'huge.tiff', bytes: makeTiffFrames(2, 30_000, 30_000) },
        { name: 'truncated.tif', bytes: (await makeTiff([await renderPdfPage(await readBenchPdf('non_text_searchable.pdf'), 1, 'png')])).subarray(0, 3000) },
        { name: 'thousands.pdf', bytes: await makeScannedPdf(2_000) },
        { name: 'blank.pdf', bytes: makeBlankPdf(2) },
        { name: 'truncated.jpg', bytes: (await renderPdfPage(await readBenchPdf('non_text_searchable.pdf'), 1, 'jpeg')).subarray(0, 200) },
      ]);
      expect(uploaded.status, JSON.stringify(uploaded.body)).toBe(202);
      const documents = Object.fromEntries(
        (await waitForDocuments(limited, owner.key, uploaded.body.map((document: DocumentBody) => document.id), 240_000)).map((document) => [document.filename, document]),
      );
      expect(documents['huge.png']).toMatchObject({
        status: 'failed',
        error: 'the PNG is 30,000 x 30,000 pixels, more than OCR reads (20,000 on a side, 50 megapixels)',
      });
      expect(documents['frames.tiff']).toMatchObject({ status: 'failed', error: 'the TIFF has 10,000 pages, more than the 3 read by OCR in one document' });
      expect(documents['huge.tiff']).toMatchObject({
        status: 'failed',
        error: 'page 1 of the TIFF is 30,000 x 30,000 pixels, more than OCR reads (20,000 on a side, 50 megapixels)',
      });
      expect(documents['truncated.tif']).toMatchObject({ status: 'failed' });
      expect(documents['truncated.tif']!.error).toMatch(/^not a readable TIFF: /);
      expect(documents['thousands.pdf']).toMatchObject({
        status: 'failed',
        error: 'the PDF has more than 3 pages without a text layer, the most read by OCR in one document',
      });
      expect(documents['blank.pdf']).toMatchObject({ status: 'failed', error: 'the PDF has no text: no text layer, and no scanned page with text for OCR to read' });
      expect(documents['truncated.jpg']).toMatchObject({ status: 'failed' });
      expect(documents['truncated.jpg']!.error).toMatch(/^(not a readable JPEG: |the document contains no text)/);
      expect((await limited.request('GET', '/v1/user/me', { key: owner.key })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});
