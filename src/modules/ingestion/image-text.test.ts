import { beforeAll, describe, expect, it } from 'vitest';
import { unzipSync, zipSync } from 'fflate';
import { makeDocxWithPicture, makeFilesWithPicture, makePptxWithPicture, parseError, readBenchPdf, renderPdfPage } from '../../../test/support/documents.js';
import { chunkDocument } from './chunk.js';
import { defaultParseLimits, parseDocument } from './parse.js';
import { DOCX_TYPE, EPUB_TYPE, ODT_TYPE, PPTX_TYPE, RTF_TYPE, type DocumentType } from './types.js';

const withOcr = { ...defaultParseLimits, ocr: { language: 'eng' } };
const scannedSentence = 'it cannot be rendered as plain text by the PDF reader';
let scan: Uint8Array;
let logo: Uint8Array;

beforeAll(async () => {
  scan = await renderPdfPage(await readBenchPdf('non_text_searchable.pdf'), 1, 'png', 1.5);
  const sharp = (await import('sharp')).default;
  logo = new Uint8Array(await sharp({ create: { width: 40, height: 40, channels: 3, background: '#2a6' } }).png().toBuffer());
});

describe('the text of pictures in office files, read by OCR', () => {
  it('reads a scan pasted into a DOCX where it stands, marked as recognised; once however often it is shown', async () => {
    const bytes = await makeDocxWithPicture(scan, 2);
    const read: number[][] = [];
    const parsed = await parseDocument(bytes, DOCX_TYPE, withOcr, { onOcrPage: (image, images) => read.push([image, images]) });
    expect(read).toEqual([[1, 1]]);
    const texts = parsed.blocks.map((block) => block.text);
    expect(texts[0]).toBe('Incoming post');
    expect(texts[1]).toBe('The letter below arrived on paper and was scanned.');
    expect(texts[2]).toContain(scannedSentence);
    expect(texts[3]).toBe(texts[2]);
    expect(texts[4]).toBe('Filed by the front desk.');
    expect(parsed.blocks[2]).toMatchObject({ headingPath: ['Incoming post'], ocrConfidence: expect.any(Number) });
    expect(parsed.blocks[2]!.ocrConfidence).toBeGreaterThan(80);
    const chunks = chunkDocument(parsed, { chunkTokens: 512, overlapTokens: 32 });
    expect(chunks.find((chunk) => chunk.content.includes(scannedSentence))!.metadata).toMatchObject({ ocr: true });

    // OCR off: the pictures are left out, the text stays.
    const plain = await parseDocument(bytes, DOCX_TYPE, defaultParseLimits);
    expect(plain.blocks.map((block) => block.text)).toEqual(['Incoming post', 'The letter below arrived on paper and was scanned.', 'Filed by the front desk.']);
  });

  it('reads the picture of an EPUB, an ODT and an RTF where it stands', async () => {
    const files = await makeFilesWithPicture(scan);
    const types: [keyof typeof files, DocumentType][] = [
      ['epub', EPUB_TYPE],
      ['odt', ODT_TYPE],
      ['rtf', RTF_TYPE],
    ];
    for (const [format, type] of types) {
      const parsed = await parseDocument(files[format], type, withOcr);
      const texts = parsed.blocks.map((block) => block.text);
      expect(texts.slice(0, 2), format).toEqual(['Incoming post', 'The letter below arrived on paper and was scanned.']);
      expect(texts[2], format).toContain(scannedSentence);
      expect(parsed.blocks[2]!.ocrConfidence, format).toBeGreaterThan(80);
      expect(texts.slice(3), format).toEqual(['Filed by the front desk.']);
      const plain = await parseDocument(files[format], type, defaultParseLimits);
      expect(plain.blocks.map((block) => block.text), format).toEqual(['Incoming post', 'The letter below arrived on paper and was scanned.', 'Filed by the front desk.']);
    }
  });

  it("reads a slide's picture on the slide's page", async () => {
    const parsed = await parseDocument(await makePptxWithPicture(scan), PPTX_TYPE, withOcr);
    const recognised = parsed.blocks.filter((block) => block.text.includes(scannedSentence));
    expect(recognised.map((block) => block.page)).toEqual([1, 2]);
    for (const block of recognised) expect(block.ocrConfidence).toBeGreaterThan(80);
  });

  it('leaves a logo-sized picture unread, and reads no more pictures than OCR may read in one document', async () => {
    const read: number[] = [];
    const small = await parseDocument(await makeDocxWithPicture(logo), DOCX_TYPE, withOcr, { onOcrPage: (image) => read.push(image) });
    expect(read).toEqual([]);
    expect(small.blocks.map((block) => block.text)).toEqual(['Incoming post', 'The letter below arrived on paper and was scanned.', 'Filed by the front desk.']);
    const none = await parseDocument(await makePptxWithPicture(scan), PPTX_TYPE, { ...withOcr, maxOcrPages: 0 });
    expect(none.blocks.some((block) => block.text.includes(scannedSentence))).toBe(false);
  });

  it('refuses a picture that unpacks past the limit when pictures are read, and never unpacks it when they are not', async () => {
    // The picture's part swapped for 100 MB of zeros: a fraction of a megabyte packed.
    const parts = unzipSync(await makeDocxWithPicture(logo));
    const media = Object.keys(parts).find((name) => name.startsWith('word/media/'))!;
    parts[media] = new Uint8Array(100 * 1024 * 1024);
    const bomb = zipSync(parts, { level: 9 });
    expect(bomb.length).toBeLessThan(1024 * 1024);
    expect((await parseError(parseDocument(bomb, DOCX_TYPE, withOcr))).message).toBe('the DOCX unpacks to more than the limit of 64 MB');
    expect((await parseDocument(bomb, DOCX_TYPE, defaultParseLimits)).blocks.map((block) => block.text)).toEqual([
      'Incoming post',
      'The letter below arrived on paper and was scanned.',
      'Filed by the front desk.',
    ]);
  });
});
