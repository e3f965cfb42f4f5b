import { readFileSync } from 'node:fs';
import { Document, HeadingLevel, Packer, Paragraph, Table, TableCell, TableRow, TextRun } from 'docx';
import { describe, expect, it } from 'vitest';
import { defaultParseLimits, ParseError, parseDocument, type ParsedDocument } from './parse.js';
import { chunkDocument } from './chunk.js';
import { benchPdfDirectory, parseError } from '../../../test/support/documents.js';

const benchPdfs = benchPdfDirectory;
const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';
const readPdf = (name: string) => new Uint8Array(readFileSync(`${benchPdfs}/${name}`));
const utf8 = (text: string) => new TextEncoder().encode(text);


function expectPagesNonDecreasing(doc: ParsedDocument) {
  const pages = doc.blocks.map((block) => block.page);
  for (const page of pages) {
    expect(page).toBeTypeOf('number');
    expect(page).toBeGreaterThanOrEqual(1);
    expect(page).toBeLessThanOrEqual(doc.pageCount!);
  }
  expect(pages).toEqual([...pages].sort((a, b) => a! - b!));
}

describe('PDF', () => {
  it('reads sample_pdf_1: title, prose with spaces kept, table cells, page 4 after an empty page 3', async () => {
    const doc = await parseDocument(readPdf('sample_pdf_1.pdf'), 'application/pdf');
    expect(doc.pageCount).toBe(4);
    expectPagesNonDecreasing(doc);
    expect(doc.blocks[0]).toMatchObject({ kind: 'heading', text: 'A sample PDF file', page: 1, level: 1 });
    expect(doc.text).toContain('Adobe Systems made the PDF specification available free of charge in 1993.');
    expect(doc.text).toContain('The quick brown fox jumped over the lazy dog.');
    expect(doc.text).toContain('55 million units');
    expect(new Set(doc.blocks.map((block) => block.page))).toEqual(new Set([1, 2, 4]));
    expect(doc.blocks.find((block) => block.text.includes('the page 3 is empty'))?.page).toBe(4);
  });

  it('reads sample_pdf_2 with its running header and footer on every page', async () => {
    const doc = await parseDocument(readPdf('sample_pdf_2.pdf'), 'application/pdf');
    expect(doc.pageCount).toBe(4);
    expectPagesNonDecreasing(doc);
    for (const page of [2, 3, 4]) {
      const pageText = doc.blocks.filter((block) => block.page === page).map((block) => block.text);
      expect(pageText).toContain(`This is a header. Page ${page} of 4`);
      expect(pageText).toContain('This is a footer number 1 This is footer number 2');
    }
    // Paragraphs are separated by their vertical gaps, and lines within them joined with spaces.
    const wikiParagraphs = doc.blocks.filter((block) => block.page === 2 && block.text.length > 200);
    expect(wikiParagraphs.length).toBe(3);
    expect(wikiParagraphs[0]!.text).toContain('collaboratively edited and managed by its own audience');
    expect(wikiParagraphs[1]!.text).toMatch(/^Wiki engines usually allow content/);
    // Ligature glyphs drawn as separate runs are joined without spaces.
    expect(doc.text).toContain('differs from other web-based systems');
  });

  it('reads the table of sample_pdf_3 row by row', async () => {
    const doc = await parseDocument(readPdf('sample_pdf_3.pdf'), 'application/pdf');
    expect(doc.pageCount).toBe(1);
    expect(doc.blocks.map((block) => block.text)).toEqual([
      'Table 1. This is an example table with two multicolumn headers',
      'Header 1',
      'This is a subheader',
      'Value 1 Value 2 Val 3',
    ]);
    expect(doc.blocks.every((block) => block.page === 1)).toBe(true);
  });

  it('reads sample_pdf_4 with headings inferred from type size', async () => {
    const doc = await parseDocument(readPdf('sample_pdf_4.pdf'), 'application/pdf');
    expect(doc.pageCount).toBe(4);
    expectPagesNonDecreasing(doc);
    expect(doc.blocks[0]).toMatchObject({ kind: 'heading', text: 'Lorem ipsum', level: 1, headingPath: ['Lorem ipsum'] });
    const bodyBlock = doc.blocks.find((block) => block.text.startsWith('Vestibulum neque massa'));
    expect(bodyBlock?.headingPath[0]).toBe('Lorem ipsum');
    // Symbol-font bullets (private-use code points) are dropped.
    expect(doc.text).not.toMatch(/[\uE000-\uF8FF]/);
    expect(doc.text).toContain('Maecenas non lorem quis tellus placerat varius.');
  });

  it('reports a scanned PDF without a text layer when OCR is off, and reads it by OCR when it is on', async () => {
    const error = await parseError(parseDocument(readPdf('non_text_searchable.pdf'), 'application/pdf', { ...defaultParseLimits, ocr: null }));
    expect(error.message).toBe('the PDF has no text layer (scanned pages?); OCR is turned off (KB_OCR_LANGUAGE)');
    const read = await parseDocument(readPdf('non_text_searchable.pdf'), 'application/pdf', { ...defaultParseLimits, ocr: { language: 'eng' } });
    expect(read.pageCount).toBe(1);
    expect(read.text).toContain('Because it was created from an image rather than a text document, it cannot be rendered as plain text by the PDF reader.');
    expect(read.blocks.every((block) => block.page === 1 && block.ocrConfidence! > 80)).toBe(true);
  });

  it('rejects a truncated PDF promptly', async () => {
    const truncated = readPdf('sample_pdf_1.pdf').slice(0, 2000);
    const error = await parseError(parseDocument(truncated, 'application/pdf'));
    expect(error.message).toMatch(/^not a readable PDF: /);
  });

  it('rejects random bytes given as a PDF', async () => {
    const junk = Uint8Array.from({ length: 8192 }, (_, index) => (index * 131 + 17) % 256);
    const error = await parseError(parseDocument(junk, 'application/pdf'));
    expect(error.message).toMatch(/^not a readable PDF: /);
    const junkWithHeader = Uint8Array.of(...utf8('%PDF-1.7\n'), ...junk);
    expect((await parseError(parseDocument(junkWithHeader, 'application/pdf'))).message).toMatch(/^not a readable PDF: /);
  });

  it('rejects a PDF with no pages', async () => {
    const noPages = utf8(
      '%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [] /Count 0 >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n',
    );
    await parseError(parseDocument(noPages, 'application/pdf'));
  });

  it('does not detach the caller’s buffer', async () => {
    const bytes = readPdf('sample_pdf_3.pdf');
    await parseDocument(bytes, 'application/pdf');
    expect(bytes.byteLength).toBeGreaterThan(0);
  });
});

describe('DOCX', () => {
  async function sampleDocx(): Promise<Uint8Array> {
    const document = new Document({
      sections: [
        {
          children: [
            new Paragraph({ text: 'Handbook', heading: HeadingLevel.HEADING_1 }),
            new Paragraph({ children: [new TextRun('Welcome to the '), new TextRun({ text: 'team', bold: true }), new TextRun('.')] }),
            new Paragraph({ text: 'Getting started', heading: HeadingLevel.HEADING_2 }),
            new Paragraph('Install the tools first.'),
            new Paragraph({ text: 'Accounts', heading: HeadingLevel.HEADING_3 }),
            new Paragraph('Ask for an account on day one.'),
            new Table({
              rows: [
                new TableRow({ children: [new TableCell({ children: [new Paragraph('System')] }), new TableCell({ children: [new Paragraph('Owner')] })] }),
                new TableRow({ children: [new TableCell({ children: [new Paragraph('Mail')] }), new TableCell({ children: [new Paragraph('IT')] })] }),
              ],
            }),
            new Paragraph({ text: 'Policies', heading: HeadingLevel.HEADING_2 }),
            new Paragraph('Be kind.'),
          ],
        },
      ],
    });
    return new Uint8Array(await Packer.toBuffer(document));
  }

  it('turns headings into heading blocks with heading paths', async () => {
    const doc = await parseDocument(await sampleDocx(), DOCX);
    expect(doc.pageCount).toBeNull();
    expect(doc.blocks).toEqual([
      { kind: 'heading', text: 'Handbook', page: null, headingPath: ['Handbook'], level: 1 },
      { kind: 'text', text: 'Welcome to the team.', page: null, headingPath: ['Handbook'] },
      { kind: 'heading', text: 'Getting started', page: null, headingPath: ['Handbook', 'Getting started'], level: 2 },
      { kind: 'text', text: 'Install the tools first.', page: null, headingPath: ['Handbook', 'Getting started'] },
      { kind: 'heading', text: 'Accounts', page: null, headingPath: ['Handbook', 'Getting started', 'Accounts'], level: 3 },
      { kind: 'text', text: 'Ask for an account on day one.', page: null, headingPath: ['Handbook', 'Getting started', 'Accounts'] },
      { kind: 'text', text: 'System | Owner\nMail | IT', page: null, headingPath: ['Handbook', 'Getting started', 'Accounts'] },
      { kind: 'heading', text: 'Policies', page: null, headingPath: ['Handbook', 'Policies'], level: 2 },
      { kind: 'text', text: 'Be kind.', page: null, headingPath: ['Handbook', 'Policies'] },
    ]);
    expect(doc.text.startsWith('Handbook\n\nWelcome to the team.\n\nGetting started')).toBe(true);
  });

  it('rejects a zip that is not a DOCX', async () => {
    // A stored (uncompressed) zip holding one file, hello.txt.
    const name = utf8('hello.txt');
    const content = utf8('hi');
    const local = [0x50, 0x4b, 0x03, 0x04, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, ...crcBytes(content), ...u32(content.length), ...u32(content.length), ...u16(name.length), 0, 0];
    const central = [0x50, 0x4b, 0x01, 0x02, 20, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, ...crcBytes(content), ...u32(content.length), ...u32(content.length), ...u16(name.length), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, ...u32(0)];
    const localLength = local.length + name.length + content.length;
    const centralLength = central.length + name.length;
    const end = [0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0, 1, 0, 1, 0, ...u32(centralLength), ...u32(localLength), 0, 0];
    const zip = Uint8Array.of(...local, ...name, ...content, ...central, ...name, ...end);
    const error = await parseError(parseDocument(zip, DOCX));
    expect(error.message).toMatch(/^not a readable DOCX: /);
  });

  it('rejects a truncated DOCX', async () => {
    const truncated = (await sampleDocx()).slice(0, 1500);
    const error = await parseError(parseDocument(truncated, DOCX));
    expect(error.message).toMatch(/^not a readable DOCX: /);
  });
});

function u16(value: number): number[] {
  return [value & 0xff, (value >>> 8) & 0xff];
}
function u32(value: number): number[] {
  return [value & 0xff, (value >>> 8) & 0xff, (value >>> 16) & 0xff, (value >>> 24) & 0xff];
}
function crcBytes(bytes: Uint8Array): number[] {
  let crc = 0xffffffff;
  for (const byte of bytes) {
    crc ^= byte;
    for (let bit = 0; bit < 8; bit++) crc = crc & 1 ? (crc >>> 1) ^ 0xedb88320 : crc >>> 1;
  }
  return u32((crc ^ 0xffffffff) >>> 0);
}

describe('HTML', () => {
  const page = `<!doctype html>
<html><head><title>Release notes</title>
<style>body { color: red } .secret-style {}</style>
<script>var secretScript = "do not index";</script>
</head>
<body>
  <nav><a href="/">Home</a> <a href="/docs">Docs</a></nav>
  <noscript>secret noscript text</noscript>
  <template><p>secret template text</p></template>
  <main>
    <article>
      <h1>Release notes</h1>
      <p>Version 2 brings a faster importer, a new search page and many small fixes that users asked for over the last year.</p>
      <h2>Importer</h2>
      <p>The importer now reads PDF, DOCX, HTML and Markdown files, and it reports files it cannot read with a clear message.</p>
      <script>console.log("secret inline script")</script>
      <ul><li>Faster parsing</li><li>Better errors<ul><li>Clear messages</li></ul></li></ul>
      <h2>Search</h2>
      <p>Search results show the page and the heading where each match was found, so long documents are easier to navigate.</p>
      <pre>kb import ./docs
kb search "importer"</pre>
    </article>
  </main>
</body></html>`;

  it('keeps the article text, headings and structure without script, style, noscript or template content', async () => {
    const doc = await parseDocument(utf8(page), 'text/html');
    expect(doc.text).not.toMatch(/secret|color: red/);
    expect(doc.text).toContain('Version 2 brings a faster importer');
    const headings = doc.blocks.filter((block) => block.kind === 'heading').map((block) => block.text);
    expect(headings).toContain('Importer');
    expect(headings).toContain('Search');
    const list = doc.blocks.find((block) => block.text.startsWith('- Faster parsing'));
    expect(list?.text).toBe('- Faster parsing\n- Better errors\n  - Clear messages');
    expect(list?.headingPath.at(-1)).toBe('Importer');
    expect(doc.text).toContain('kb import ./docs\nkb search "importer"');
    expect(doc.pageCount).toBeNull();
  });

  it('falls back to the body text when there is no article', async () => {
    const doc = await parseDocument(utf8('<p>Short note.</p><script>secret()</script><h3>Later</h3><div>More</div>'), 'text/html');
    expect(doc.text).not.toContain('secret');
    expect(doc.text).toContain('Short note.');
    expect(doc.blocks.find((block) => block.text === 'More')?.headingPath).toEqual(['Later']);
  });

  it('treats a page with only scripts and styles as empty', async () => {
    const error = await parseError(parseDocument(utf8('<html><head><style>p{}</style></head><body><script>x()</script></body></html>'), 'text/html'));
    expect(error.message).toBe('the document contains no text');
  });
});

describe('tables in HTML and Markdown', () => {
  it('marks an HTML table with its caption and title rows as its header', async () => {
    const html = '<table><caption>Revenue by segment</caption><thead><tr><th>Segment</th><th>2022</th></tr></thead><tbody><tr><td>Cloud</td><td>12</td></tr><tr><td>Devices</td><td>7</td></tr></tbody></table>';
    const doc = await parseDocument(utf8(html), 'text/html');
    expect(doc.blocks).toEqual([
      { kind: 'text', text: 'Revenue by segment\nSegment | 2022\nCloud | 12\nDevices | 7', page: null, headingPath: [], tableHeader: 'Revenue by segment\nSegment | 2022' },
    ]);
  });

  it('marks a Markdown pipe table with its title and delimiter rows as its header', async () => {
    const doc = await parseDocument(utf8('| Segment | 2022 |\n|---|--:|\n| Cloud | 12 |\n| Devices | 7 |'), 'text/markdown');
    expect(doc.blocks[0]!.tableHeader).toBe('| Segment | 2022 |\n|---|--:|');
    const prose = await parseDocument(utf8('A paragraph\nwith two lines.'), 'text/markdown');
    expect(prose.blocks[0]!.tableHeader).toBeUndefined();
  });
});

describe('Markdown', () => {
  const markdown = [
    '---',
    'title: Guide',
    '---',
    '# Guide',
    '',
    'Intro paragraph',
    'continues here.',
    '',
    'Setup',
    '-----',
    '',
    '```bash',
    'npm test',
    '',
    '# not a heading inside code',
    '```',
    '',
    '### Details ###',
    '',
    'Last paragraph.',
    '',
    '***',
    '',
    'Appendix',
    '========',
    'Tail text.',
  ].join('\n');

  it('makes ATX and setext headings, keeps fenced code intact and splits paragraphs on blank lines', async () => {
    const doc = await parseDocument(utf8(markdown), 'text/markdown');
    expect(doc.blocks).toEqual([
      { kind: 'text', text: '---\ntitle: Guide\n---', page: null, headingPath: [] },
      { kind: 'heading', text: 'Guide', page: null, headingPath: ['Guide'], level: 1 },
      { kind: 'text', text: 'Intro paragraph\ncontinues here.', page: null, headingPath: ['Guide'] },
      { kind: 'heading', text: 'Setup', page: null, headingPath: ['Guide', 'Setup'], level: 2 },
      { kind: 'text', text: '```bash\nnpm test\n\n# not a heading inside code\n```', page: null, headingPath: ['Guide', 'Setup'] },
      { kind: 'heading', text: 'Details', page: null, headingPath: ['Guide', 'Setup', 'Details'], level: 3 },
      { kind: 'text', text: 'Last paragraph.', page: null, headingPath: ['Guide', 'Setup', 'Details'] },
      { kind: 'heading', text: 'Appendix', page: null, headingPath: ['Appendix'], level: 1 },
      { kind: 'text', text: 'Tail text.', page: null, headingPath: ['Appendix'] },
    ]);
  });

  it('keeps an unclosed fence to the end of the file', async () => {
    const doc = await parseDocument(utf8('Before\n\n~~~\ncode\n\nmore code'), 'text/markdown');
    expect(doc.blocks.map((block) => block.text)).toEqual(['Before', '~~~\ncode\n\nmore code']);
  });
});

describe('plain text, CSV and JSON', () => {
  it('splits plain text on blank lines and normalises line endings', async () => {
    const doc = await parseDocument(utf8('First line\r\nsecond line\r\n\r\n  \r\nNext paragraph\n'), 'text/plain');
    expect(doc.blocks.map((block) => block.text)).toEqual(['First line\nsecond line', 'Next paragraph']);
    expect(doc.text).toBe('First line\nsecond line\n\nNext paragraph');
    expect(doc.pageCount).toBeNull();
  });

  it('keeps CSV rows whole, including quoted fields with line breaks', async () => {
    const rows = ['name,comment', 'alice,"likes\nnewlines"', 'bob,"says ""hi"""'];
    const doc = await parseDocument(utf8(`${rows.join('\n')}\n`), 'text/csv');
    expect(doc.blocks).toEqual([{ kind: 'text', text: rows.join('\n'), page: null, headingPath: [], tableHeader: 'name,comment' }]);
  });

  it('groups a long CSV into blocks of whole rows, each starting with the header row', async () => {
    const rows = Array.from({ length: 300 }, (_, index) => `${index},item number ${index},${index * 3}`);
    const doc = await parseDocument(utf8(['id,name,value', ...rows].join('\n')), 'text/csv');
    expect(doc.blocks.length).toBeGreaterThan(1);
    for (const block of doc.blocks) {
      expect(block.tableHeader).toBe('id,name,value');
      expect(block.text.split('\n')[0]).toBe('id,name,value');
    }
    expect(doc.blocks.flatMap((block) => block.text.split('\n').slice(1))).toEqual(rows);
  });

  it('repeats no header row too long to repeat: a megabyte of columns is stored once', async () => {
    const header = 'column,'.repeat(150_000);
    const rows = Array.from({ length: 200 }, (_, index) => `${index},value ${index}`);
    const doc = await parseDocument(utf8([header, ...rows].join('\n')), 'text/csv');
    expect(doc.blocks.every((block) => block.tableHeader === undefined)).toBe(true);
    expect(doc.blocks.reduce((total, block) => total + block.text.length, 0)).toBeLessThan(header.length + 10_000);
    expect(doc.blocks.flatMap((block) => block.text.split('\n'))).toEqual([header.trimEnd(), ...rows]);
  });

  it('pretty-prints JSON', async () => {
    const doc = await parseDocument(utf8('{"name":"kb","tags":["a","b"],"nested":{"ok":true}}'), 'application/json');
    expect(doc.text).toBe(JSON.stringify({ name: 'kb', tags: ['a', 'b'], nested: { ok: true } }, null, 2));
  });

  it('reads JSON that does not parse as plain text', async () => {
    const doc = await parseDocument(utf8('{"broken": '), 'application/json');
    expect(doc.text).toBe('{"broken":');
  });

  it('rejects invalid UTF-8', async () => {
    const error = await parseError(parseDocument(Uint8Array.of(0x61, 0xff, 0xfe, 0x62), 'text/plain'));
    expect(error.message).toBe('the file is not valid UTF-8 text');
  });
});

describe('empty documents', () => {
  const types = ['application/pdf', DOCX, 'text/html', 'text/markdown', 'text/plain', 'text/csv', 'application/json'] as const;

  it.each(types)('rejects an empty %s file', async (type) => {
    const error = await parseError(parseDocument(new Uint8Array(0), type));
    expect(error.message).toBe('the document contains no text');
  });

  it.each(['text/plain', 'text/markdown', 'text/csv', 'text/html'] as const)('rejects whitespace-only %s content', async (type) => {
    const error = await parseError(parseDocument(utf8('  \n\t\n  \n'), type));
    expect(error.message).toBe('the document contains no text');
  });

  it('rejects a DOCX without text', async () => {
    const empty = new Uint8Array(await Packer.toBuffer(new Document({ sections: [{ children: [new Paragraph('')] }] })));
    const error = await parseError(parseDocument(empty, DOCX));
    expect(error.message).toBe('the document contains no text');
  });
});

describe('headings of any length', () => {
  it('reads a "heading" over 300 characters as text, and names it in the trails below by its beginning', async () => {
    const long = `${'A whole paragraph styled as a heading '.repeat(3_000)}ends here`;
    const markdown = `# ${long}\n\n${'A sentence under the long heading. '.repeat(2_000)}\n\n## Short heading\n\nThe last words.`;
    const parsed = await parseDocument(new TextEncoder().encode(markdown), 'text/markdown');
    expect(parsed.blocks[0]).toMatchObject({ kind: 'text', text: long });
    expect(parsed.blocks[0]).not.toHaveProperty('level');
    const trail = parsed.blocks.at(-1)!.headingPath;
    expect(trail).toHaveLength(2);
    expect(trail[0]!.length).toBeLessThanOrEqual(300);
    // Cut at a word's end, marked.
    expect(trail[0]!).toMatch(/^(A whole paragraph styled as a heading )+[A-Za-z]+( [A-Za-z]+)*…$/);
    expect(long.startsWith(trail[0]!.slice(0, -1))).toBe(true);
    expect(trail[1]).toBe('Short heading');
    // Every chunk's trail stays short, however many chunks the text makes.
    const chunks = chunkDocument(parsed, { chunkTokens: 128, overlapTokens: 16 });
    expect(chunks.length).toBeGreaterThan(100);
    for (const chunk of chunks) for (const heading of chunk.metadata.headings) expect(heading.length).toBeLessThanOrEqual(300);
  });
});
