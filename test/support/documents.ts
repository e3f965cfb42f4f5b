import { readFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import path from 'node:path';
import { Readable } from 'node:stream';
import { Document as DocxDocument, HeadingLevel, ImageRun, Packer, Paragraph } from 'docx';
import { expect } from 'vitest';
import { ParseError } from '../../src/modules/ingestion/types.js';
import type { TestServer } from './server.js';

export const benchPdfDirectory = path.resolve(import.meta.dirname, '../../../shared/bench-data/pdfs');

export const readBenchPdf = (name: string) => readFile(path.join(benchPdfDirectory, name));

export type DocumentBody = {
  id: string;
  workspace_id: string;
  filename: string;
  content_type: string;
  size_bytes: number;
  sha256: string;
  status: 'queued' | 'processing' | 'ready' | 'failed';
  stage: 'queued' | 'parsing' | 'ocr' | 'embedding' | 'ready' | 'failed';
  error: string | null;
  page_count: number | null;
  chunk_count: number;
  embedded_chunks: number;
  metadata: Record<string, unknown>;
  created_at: string;
  updated_at: string;
};

/** The files as multipart/form-data parts named `file`, with an optional metadata part. */
function uploadForm(files: { name: string; bytes: Uint8Array | string }[], metadata?: string): FormData {
  const form = new FormData();
  for (const file of files) form.append('file', new File([file.bytes as BlobPart], file.name));
  if (metadata !== undefined) form.append('metadata', metadata);
  return form;
}

/** Uploads files as multipart/form-data parts named `file`, with an optional metadata part. */
export function upload(
  server: TestServer,
  key: string,
  workspaceId: string,
  files: { name: string; bytes: Uint8Array | string }[],
  metadata?: string,
) {
  return fetch(new URL(`/v1/kb/workspaces/${workspaceId}/documents`, server.url), {
    method: 'POST',
    headers: { authorization: `Bearer ${key}` },
    body: uploadForm(files, metadata),
  }).then(async (response) => ({ status: response.status, body: (await response.json()) as any }));
}

/**
 * As `upload`, over a connection of its own, closed after the answer, not one of fetch's pooled
 * ones: the 413 test's 200 MB upload was reset twice in CI for a reason not found, and a pooled
 * connection that the server closes for idling as an upload starts on it was one suspect (not
 * reproduced). The server must still read the whole body and answer.
 */
export async function uploadOnNewConnection(server: TestServer, key: string, workspaceId: string, files: { name: string; bytes: Uint8Array | string }[]) {
  const encoded = new Response(uploadForm(files));
  const body = await encoded.blob();
  return new Promise<{ status: number; body: any }>((resolve, reject) => {
    const sent = httpRequest(
      new URL(`/v1/kb/workspaces/${workspaceId}/documents`, server.url),
      {
        method: 'POST',
        agent: false,
        headers: { authorization: `Bearer ${key}`, 'content-type': encoded.headers.get('content-type')!, 'content-length': String(body.size) },
      },
      (response) => {
        const parts: Buffer[] = [];
        response.on('data', (part: Buffer) => parts.push(part));
        response.on('end', () => resolve({ status: response.statusCode!, body: JSON.parse(Buffer.concat(parts).toString()) }));
        response.on('error', reject);
      },
    );
    sent.on('error', reject);
    Readable.fromWeb(body.stream() as import('node:stream/web').ReadableStream).pipe(sent);
  });
}

/** Polls until every document is ready or failed (the queue works in the background). */
export async function waitForDocuments(server: TestServer, key: string, ids: string[], timeoutMs = 120_000): Promise<DocumentBody[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const documents = await Promise.all(ids.map(async (id) => (await server.request('GET', `/v1/kb/documents/${id}`, { key })).body as DocumentBody));
    if (documents.every((document) => document.status === 'ready' || document.status === 'failed')) return documents;
    if (Date.now() > deadline) throw new Error(`documents still processing: ${JSON.stringify(documents.map((d) => [d.filename, d.status]))}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}


export async function makeDocx(): Promise<Uint8Array> {
  const document = new DocxDocument({
    sections: [
      {
        children: [
          new Paragraph({ text: 'Annual Report', heading: HeadingLevel.HEADING_1 }),
          new Paragraph('The company grew steadily during the year, opening three new offices.'),
          new Paragraph({ text: 'Revenue', heading: HeadingLevel.HEADING_2 }),
          new Paragraph('Revenue rose by twelve percent, driven by subscriptions.'),
        ],
      },
    ],
  });
  return new Uint8Array(await Packer.toBuffer(document));
}

/** makeDocx's document with its XML edited by `edit` (to put characters in it that docx would escape). */
export async function editedDocx(edit: (documentXml: string) => string): Promise<Uint8Array> {
  const { unzipSync, zipSync, strFromU8, strToU8 } = await import('fflate');
  const parts = unzipSync(await makeDocx());
  parts['word/document.xml'] = strToU8(edit(strFromU8(parts['word/document.xml']!)));
  return zipSync(parts);
}

/**
 * A DOCX that unpacks to about `unpackedBytes` of XML (a zip bomb): a real document whose body
 * paragraph is repeated, deflated as it is written, so the bomb is never whole in memory.
 */
export async function makeZipBombDocx(unpackedBytes: number): Promise<Uint8Array> {
  const { unzipSync, strFromU8 } = await import('fflate');
  const parts = unzipSync(await makeDocx());
  const paragraph = '<w:p><w:r><w:t>' + 'All work and no play makes a zip bomb. '.repeat(20) + '</w:t></w:r></w:p>';
  const repeated = paragraph.repeat(Math.ceil((1024 * 1024) / paragraph.length));
  return withRepeatedPart(parts, 'word/document.xml', strFromU8(parts['word/document.xml']!), '<w:body>', '<w:sectPr', (written) =>
    written < unpackedBytes ? repeated : undefined,
  );
}

/** An XLSX of one sheet whose rows are `rows(written)`'s text until it returns undefined, deflated as they are written. */
export async function makeGeneratedXlsx(rows: (writtenBytes: number) => string | undefined): Promise<Uint8Array> {
  const ExcelJS = (await import('exceljs')).default;
  const { unzipSync, strFromU8 } = await import('fflate');
  const workbook = new ExcelJS.Workbook();
  workbook.addWorksheet('Data').addRow(['placeholder']);
  const parts = unzipSync(new Uint8Array(await workbook.xlsx.writeBuffer()));
  const sheet = strFromU8(parts['xl/worksheets/sheet1.xml']!).replace(/<sheetData>[\s\S]*<\/sheetData>/, '<sheetData></sheetData>');
  return withRepeatedPart(parts, 'xl/worksheets/sheet1.xml', sheet, '<sheetData>', '</sheetData>', rows);
}

/** A sheet of `count` rows, each holding its own number in column A: `count * 40` bytes of XML. */
export function makeNumberedRowsXlsx(count: number): Promise<Uint8Array> {
  let next = 1;
  return makeGeneratedXlsx(() => {
    if (next > count) return undefined;
    const rows: string[] = [];
    for (const end = Math.min(next + 10_000, count + 1); next < end; next++) rows.push(`<row r="${next}"><c r="A${next}"><v>${next}</v></c></row>`);
    return rows.join('');
  });
}

/** A zip of `parts` where `name` is `xml` with `more(written)`'s text inserted between `after` and `before` until it returns undefined. */
async function withRepeatedPart(
  parts: Record<string, Uint8Array>,
  name: string,
  xml: string,
  after: string,
  before: string,
  more: (writtenBytes: number) => string | undefined,
): Promise<Uint8Array> {
  const { Zip, ZipDeflate, strToU8 } = await import('fflate');
  const start = xml.indexOf(after) + after.length;
  const end = xml.indexOf(before, start);
  const output: Uint8Array[] = [];
  const zip = new Zip((error, data) => {
    if (error) throw error;
    output.push(data);
  });
  for (const [partName, bytes] of Object.entries(parts)) {
    const entry = new ZipDeflate(partName, { level: 6 });
    zip.add(entry);
    if (partName !== name) {
      entry.push(bytes, true);
      continue;
    }
    entry.push(strToU8(xml.slice(0, start)));
    let written = 0;
    for (let text = more(written); text !== undefined; text = more(written)) {
      const block = strToU8(text);
      entry.push(block);
      written += block.length;
      // Deflating a hundred megabytes takes seconds: the event loop runs between blocks, so that
      // the test's own server and its HTTP client see their idle keep-alive connections time out
      // in order (held up together, a client sent an upload on a connection the server closed).
      await new Promise((resolve) => setImmediate(resolve));
    }
    entry.push(strToU8(xml.slice(end)), true);
  }
  zip.end();
  return new Uint8Array(Buffer.concat(output));
}

/**
 * A deck of two slides made with pptxgenjs: titles in the master's title placeholder, a text
 * box, a table, and speaker notes on the first.
 */
export async function makePptx(): Promise<Uint8Array> {
  const deck = await newDeck();
  deck.title = 'Kestrel programme review';
  deck.defineSlideMaster({
    title: 'TITLED',
    objects: [{ placeholder: { options: { name: 'title', type: 'title', x: 0.5, y: 0.3, w: 9, h: 1 }, text: '' } }],
  });
  const first = deck.addSlide({ masterName: 'TITLED' });
  first.addText('Launch schedule', { placeholder: 'title' });
  first.addText('The Kestrel-4 probe launches from Port Alder in March.', { x: 0.5, y: 1.6, w: 9, h: 1 });
  first.addNotes('Mention that the magnetometer was built in Tromso.');
  const second = deck.addSlide({ masterName: 'TITLED' });
  second.addText('Budget', { placeholder: 'title' });
  second.addTable(
    [
      [{ text: 'Item' }, { text: 'Cost (EUR)' }],
      [{ text: 'Fuel' }, { text: '4,200' }],
      [{ text: 'Telemetry' }, { text: '1,150' }],
    ],
    { x: 0.5, y: 1.6, w: 6 },
  );
  return new Uint8Array((await deck.write({ outputType: 'uint8array' })) as Uint8Array);
}

/** An empty pptxgenjs deck. The package is CommonJS: under Node's ESM its class is the default export's own default. */
export async function newDeck() {
  const loaded = (await import('pptxgenjs')) as unknown as { default: { default?: unknown } };
  const PptxGenJS = (loaded.default.default ?? loaded.default) as typeof import('pptxgenjs').default;
  return new PptxGenJS();
}

/** A PDF of `pages` pages of text, forty lines each, every line different. */
export async function makeTextPdf(pages: number): Promise<Uint8Array<ArrayBuffer>> {
  const { PDFDocument, StandardFonts } = await import('pdf-lib');
  const document = await PDFDocument.create();
  const font = await document.embedFont(StandardFonts.Helvetica);
  for (let page = 1; page <= pages; page++) {
    const lines = Array.from(
      { length: 40 },
      (_, line) => `Page ${page}, line ${line + 1}: the ledger of region ${(page * 7 + line) % 23} records ${page * 100 + line} units shipped.`,
    );
    document.addPage([612, 792]).drawText(lines.join('\n'), { x: 40, y: 750, size: 10, font, lineHeight: 17 });
  }
  return new Uint8Array(await document.save());
}

/** A scan of `pages` pages: the scanned sample's page (`non_text_searchable.pdf`), repeated. */
export async function makeRepeatedScan(pages: number): Promise<Uint8Array> {
  const { PDFDocument } = await import('pdf-lib');
  const source = await PDFDocument.load(await readBenchPdf('non_text_searchable.pdf'));
  const scan = await PDFDocument.create();
  for (const page of await scan.copyPages(source, Array.from({ length: pages }, () => 0))) scan.addPage(page);
  return scan.save();
}

/** An EPUB 3 of two chapters, built part by part as the format lays it out. */
export async function makeEpub(): Promise<Uint8Array> {
  const { zipSync, strToU8 } = await import('fflate');
  const xhtml = (title: string, body: string) =>
    `<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>${title}</title></head><body><h1>${title}</h1>${body}</body></html>`;
  return zipSync({
    mimetype: [strToU8('application/epub+zip'), { level: 0 }],
    'META-INF/container.xml': strToU8(
      '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>',
    ),
    'OEBPS/content.opf': strToU8(
      '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">urn:kb:lighthouse</dc:identifier><dc:title>The Lighthouse Keeper</dc:title><dc:language>en</dc:language></metadata><manifest><item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/><item id="storm" href="storm.xhtml" media-type="application/xhtml+xml"/><item id="rescue" href="rescue.xhtml" media-type="application/xhtml+xml"/></manifest><spine><itemref idref="storm"/><itemref idref="rescue"/></spine></package>',
    ),
    'OEBPS/nav.xhtml': strToU8(
      '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops"><body><nav epub:type="toc"><ol><li><a href="storm.xhtml">The storm</a></li><li><a href="rescue.xhtml">The rescue</a></li></ol></nav></body></html>',
    ),
    'OEBPS/storm.xhtml': strToU8(xhtml('The storm', '<p>The keeper lit the lamp at dusk.</p><p>Waves broke over the rocks all night.</p>')),
    'OEBPS/rescue.xhtml': strToU8(xhtml('The rescue', '<h2>Morning</h2><p>The lifeboat came from Port Alder at dawn and took the crew ashore.</p>')),
  });
}

/**
 * A PDF of `pages` blank pages: no text layer, and nothing for OCR to read either, so it fails
 * whatever the configuration. Written object by object, with a correct cross-reference table.
 */
export function makeBlankPdf(pages = 1): Uint8Array {
  const kids = Array.from({ length: pages }, (_, index) => `${3 + index * 2} 0 R`).join(' ');
  const objects = ['<< /Type /Catalog /Pages 2 0 R >>', `<< /Type /Pages /Kids [${kids}] /Count ${pages} >>`];
  for (let index = 0; index < pages; index++) {
    objects.push(`<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents ${4 + index * 2} 0 R /Resources << >> >>`);
    objects.push('<< /Length 0 >>\nstream\n\nendstream');
  }
  let body = '%PDF-1.4\n';
  const offsets: number[] = [];
  objects.forEach((object, index) => {
    offsets.push(body.length);
    body += `${index + 1} 0 obj\n${object}\nendobj\n`;
  });
  const xref = body.length;
  body += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map((offset) => `${String(offset).padStart(10, '0')} 00000 n \n`).join('')}`;
  body += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return new TextEncoder().encode(body);
}

/** A page of a PDF rendered to an image (PNG or JPEG) as a scanner or a phone would make one. */
export async function renderPdfPage(pdf: Uint8Array, pageNumber: number, format: 'png' | 'jpeg', scale = 2): Promise<Uint8Array> {
  const { getDocument } = await import('pdfjs-dist/legacy/build/pdf.mjs');
  const { renderedPage } = await import('../../src/modules/ingestion/pdf.js');
  const document = await getDocument({ data: new Uint8Array(pdf), isEvalSupported: false, useSystemFonts: false }).promise;
  try {
    const canvas = await renderedPage(await document.getPage(pageNumber), scale);
    return new Uint8Array(format === 'png' ? await canvas.encode('png') : await canvas.encode('jpeg', 90));
  } finally {
    await document.destroy();
  }
}

/** The first bytes of a PNG that says it is `width` x `height` pixels: what a decompression bomb looks like before it is decoded. */
export function pngHeaderOfSize(width: number, height: number): Uint8Array {
  const header = Buffer.alloc(8 + 25 + 12);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(header, 0);
  header.writeUInt32BE(13, 8);
  header.write('IHDR', 12, 'latin1');
  header.writeUInt32BE(width, 16);
  header.writeUInt32BE(height, 20);
  header.set([8, 6, 0, 0, 0], 24);
  header.writeUInt32BE(0, 33);
  header.write('IEND', 37, 'latin1');
  return new Uint8Array(header);
}

/** A PDF of `pages` pages, each a white image and no text: a scan of blank paper, small however many pages it has (one image, drawn on each). */
export async function makeScannedPdf(pages: number): Promise<Uint8Array> {
  const { PDFDocument } = await import('pdf-lib');
  const { createCanvas } = await import('@napi-rs/canvas');
  const canvas = createCanvas(200, 260);
  const context = canvas.getContext('2d');
  context.fillStyle = '#ffffff';
  context.fillRect(0, 0, 200, 260);
  const document = await PDFDocument.create();
  const image = await document.embedPng(await canvas.encode('png'));
  for (let index = 0; index < pages; index++) document.addPage([612, 792]).drawImage(image, { x: 0, y: 0, width: 612, height: 792 });
  return document.save();
}

/** The ParseError a parse is expected to reject with (a test fails on any other outcome). */
export async function parseError(promise: Promise<unknown>): Promise<ParseError> {
  const error = await promise.then(
    () => null,
    (rejection: unknown) => rejection,
  );
  expect(error).toBeInstanceOf(ParseError);
  return error as ParseError;
}

/** A multi-page TIFF of `pages` (images in any format sharp reads), a frame each, every one fitted onto white paper of the first one's size. */
export async function makeTiff(pages: Uint8Array[]): Promise<Uint8Array> {
  const sharp = (await import('sharp')).default;
  const { width, height } = await sharp(pages[0]!).metadata();
  const fitted = await Promise.all(pages.map((page) => sharp(page).resize(width, height, { fit: 'contain', background: 'white' }).png().toBuffer()));
  const joined = fitted.length === 1 ? sharp(fitted[0]) : sharp(fitted, { join: { animated: true } });
  return new Uint8Array(await joined.tiff({ compression: 'deflate' }).toBuffer());
}

/**
 * A little-endian TIFF of `frames` grey frames that all say they are `width` x `height` and share
 * one strip of 64 white bytes: 10,000 frames take about a megabyte, and a frame can claim to be
 * far larger than the file.
 */
export function makeTiffFrames(frames: number, width = 8, height = 8): Uint8Array {
  const entries: [tag: number, type: number, value: number][] = [
    [256, 4, width], // ImageWidth
    [257, 4, height], // ImageLength
    [258, 3, 8], // BitsPerSample
    [259, 3, 1], // Compression: none
    [262, 3, 1], // PhotometricInterpretation: black is zero
    [273, 4, 8], // StripOffsets: the strip after the header
    [278, 4, height], // RowsPerStrip
    [279, 4, 64], // StripByteCounts
  ];
  const directoryBytes = 2 + entries.length * 12 + 4;
  const first = 8 + 64;
  const bytes = new Uint8Array(first + frames * directoryBytes);
  const view = new DataView(bytes.buffer);
  bytes.set([0x49, 0x49, 0x2a, 0x00]);
  view.setUint32(4, first, true);
  bytes.fill(255, 8, 8 + 64);
  for (let frame = 0; frame < frames; frame++) {
    const at = first + frame * directoryBytes;
    view.setUint16(at, entries.length, true);
    entries.forEach(([tag, type, value], index) => {
      const entry = at + 2 + index * 12;
      view.setUint16(entry, tag, true);
      view.setUint16(entry + 2, type, true);
      view.setUint32(entry + 4, 1, true);
      if (type === 3) view.setUint16(entry + 8, value, true);
      else view.setUint32(entry + 8, value, true);
    });
    view.setUint32(at + 2 + entries.length * 12, frame + 1 < frames ? at + directoryBytes : 0, true);
  }
  return bytes;
}

/** A rich-text file as a word processor saves one: a heading, paragraphs with escaped and 8-bit characters, a table. */
export function makeRtf(): Uint8Array {
  const rtf = [
    '{\\rtf1\\ansi\\ansicpg1252\\deff0{\\fonttbl{\\f0 Times New Roman;}}{\\stylesheet{\\s1 heading 1;}}',
    '{\\pard\\s1\\outlinelevel0\\b\\fs32 Berth fees\\par}',
    '{\\pard The harbour master raised the fee for berth 7 to 42 euros in March.\\par}',
    "{\\pard Caf\\'e9 owners on the quay pay \\u8364? 3 a day.\\par}",
    '\\trowd\\cellx2000\\cellx4000 Berth\\cell Fee\\cell\\row',
    '\\trowd\\cellx2000\\cellx4000 7\\cell 42\\cell\\row',
    '{\\pard Fees are reviewed each spring.\\par}',
    // One raw 8-bit byte, as editors write them: ï in the file's code page (cp1252).
    '{\\pard Na\xefve sailors welcome.\\par}',
    '}',
  ].join('\n');
  return new Uint8Array(Buffer.from(rtf, 'latin1'));
}

/** An ODT of a heading and a paragraph, written by officeparser's generator. */
export async function makeOdt(): Promise<Uint8Array> {
  const { OfficeGenerator, OfficeParser } = await import('officeparser');
  const source = await OfficeParser.parseOffice(Buffer.from('# Field notes\n\nThe heron nests by the weir.\n\n## Spring\n\nThe first eggs hatch in April.\n'), { fileType: 'md' });
  return new Uint8Array((await OfficeGenerator.generate(source, 'odt')).value as Uint8Array);
}

/** A DOCX of a heading, a paragraph, `picture` (a PNG) shown `times` times, and a closing paragraph. */
export async function makeDocxWithPicture(picture: Uint8Array, times = 1): Promise<Uint8Array> {
  const shown = Array.from({ length: times }, () => new Paragraph({ children: [new ImageRun({ type: 'png', data: picture, transformation: { width: 480, height: 620 } })] }));
  const document = new DocxDocument({
    sections: [
      {
        children: [
          new Paragraph({ text: 'Incoming post', heading: HeadingLevel.HEADING_1 }),
          new Paragraph('The letter below arrived on paper and was scanned.'),
          ...shown,
          new Paragraph('Filed by the front desk.'),
        ],
      },
    ],
  });
  return new Uint8Array(await Packer.toBuffer(document));
}

/**
 * "Incoming post" as an EPUB, an ODT and an RTF, each written part by part as its format lays it
 * out: a heading, a paragraph, `picture` (a PNG) and a closing paragraph.
 */
export async function makeFilesWithPicture(picture: Uint8Array): Promise<{ epub: Uint8Array; odt: Uint8Array; rtf: Uint8Array }> {
  const { zipSync, strToU8 } = await import('fflate');
  const epub = zipSync({
    mimetype: [strToU8('application/epub+zip'), { level: 0 }],
    'META-INF/container.xml': strToU8(
      '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>',
    ),
    'OEBPS/content.opf': strToU8(
      '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">urn:kb:post</dc:identifier><dc:title>Incoming post</dc:title><dc:language>en</dc:language></metadata><manifest><item id="post" href="post.xhtml" media-type="application/xhtml+xml"/><item id="scan" href="images/scan.png" media-type="image/png"/></manifest><spine><itemref idref="post"/></spine></package>',
    ),
    'OEBPS/post.xhtml': strToU8(
      '<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>Incoming post</title></head><body><h1>Incoming post</h1><p>The letter below arrived on paper and was scanned.</p><p><img src="images/scan.png" alt=""/></p><p>Filed by the front desk.</p></body></html>',
    ),
    'OEBPS/images/scan.png': picture,
  });
  const odtContent =
    '<?xml version="1.0" encoding="UTF-8"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" office:version="1.3"><office:body><office:text>' +
    '<text:h text:outline-level="1">Incoming post</text:h><text:p>The letter below arrived on paper and was scanned.</text:p>' +
    '<text:p><draw:frame draw:name="scan" svg:width="12cm" svg:height="15cm"><draw:image xlink:href="Pictures/scan.png" xlink:type="simple" xlink:show="embed" xlink:actuate="onLoad"/></draw:frame></text:p>' +
    '<text:p>Filed by the front desk.</text:p></office:text></office:body></office:document-content>';
  const odtManifest =
    '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.3"><manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/><manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/><manifest:file-entry manifest:full-path="Pictures/scan.png" manifest:media-type="image/png"/></manifest:manifest>';
  const odt = zipSync({
    mimetype: [strToU8('application/vnd.oasis.opendocument.text'), { level: 0 }],
    'META-INF/manifest.xml': strToU8(odtManifest),
    'content.xml': strToU8(odtContent),
    'Pictures/scan.png': picture,
  });
  const rtf = [
    '{\\rtf1\\ansi\\deff0{\\fonttbl{\\f0 Times New Roman;}}{\\stylesheet{\\s1 heading 1;}}',
    '{\\pard\\s1\\outlinelevel0\\b Incoming post\\par}',
    '{\\pard The letter below arrived on paper and was scanned.\\par}',
    `{\\pard {\\pict\\pngblip\\picw800\\pich1000 ${Buffer.from(picture).toString('hex')}}\\par}`,
    '{\\pard Filed by the front desk.\\par}',
    '}',
  ].join('\n');
  return { epub, odt, rtf: new Uint8Array(Buffer.from(rtf, 'latin1')) };
}

/** A deck of two slides, each a title and `picture` (a PNG) below it. */
export async function makePptxWithPicture(picture: Uint8Array): Promise<Uint8Array> {
  const deck = await newDeck();
  for (const title of ['Scanned memo', 'The memo again']) {
    const slide = deck.addSlide();
    slide.addText(title, { x: 0.5, y: 0.2, w: 9, h: 0.6 });
    slide.addImage({ data: `image/png;base64,${Buffer.from(picture).toString('base64')}`, x: 0.5, y: 1, w: 6, h: 4 });
  }
  return new Uint8Array((await deck.write({ outputType: 'uint8array' })) as Uint8Array);
}
