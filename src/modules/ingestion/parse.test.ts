import { readFileSync } from 'node:fs';
import { Document, HeadingLevel, Packer, Paragraph, Table, TableCell, TableRow, TextRun } from 'docx';
import { describe, expect, it } from 'vitest';
import { defaultParseLimits, parseDocument, type ParsedDocument } from './parse.js';
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
