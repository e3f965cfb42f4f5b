import ExcelJS from 'exceljs';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { makeEpub, makePptx, makeRtf, makeTiff, makeTiffFrames } from '../../../test/support/documents.js';
import { chunkDocument } from './chunk.js';
import { detectDocumentType } from './detect.js';
import { defaultParseLimits, parseDocument, ParseError } from './parse.js';
import { EPUB_TYPE, PPTX_TYPE, RTF_TYPE, XLSX_TYPE, type DocumentType } from './types.js';

async function workbook(rows: string[][]): Promise<Uint8Array> {
  const book = new ExcelJS.Workbook();
  const sheet = book.addWorksheet('Fuzz');
  for (const row of rows) sheet.addRow(row);
  return new Uint8Array(await book.xlsx.writeBuffer());
}

/** A parse of a damaged file either reads something or fails with a reason for the owner: never another error. */
async function parsedOrRefused(bytes: Uint8Array, type: DocumentType, limits = defaultParseLimits): Promise<void> {
  try {
    await parseDocument(bytes, type, limits);
  } catch (error) {
    expect(error, String(error)).toBeInstanceOf(ParseError);
  }
}

const damage = (length: number) =>
  fc.oneof(
    fc.record({ kind: fc.constant('flip' as const), edits: fc.array(fc.tuple(fc.nat({ max: length - 1 }), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 24 }) }),
    fc.record({ kind: fc.constant('cut' as const), at: fc.nat({ max: length - 1 }) }),
  );

function damaged(bytes: Uint8Array, change: { kind: 'flip'; edits: [number, number][] } | { kind: 'cut'; at: number }): Uint8Array {
  if (change.kind === 'cut') return bytes.slice(0, change.at);
  const copy = bytes.slice();
  for (const [position, value] of change.edits) copy[position] = value;
  return copy;
}

describe('the office parsers under damaged files', () => {
  const fixtures: Partial<Record<DocumentType, Uint8Array>> = {};
  beforeAll(async () => {
    fixtures[XLSX_TYPE] = await workbook([
      ['Name', 'Amount'],
      ['alpha', '1'],
      ['beta', '2'],
    ]);
    fixtures[PPTX_TYPE] = await makePptx();
    fixtures[EPUB_TYPE] = await makeEpub();
    fixtures[RTF_TYPE] = makeRtf();
  });

  for (const type of [XLSX_TYPE, PPTX_TYPE, EPUB_TYPE, RTF_TYPE] as DocumentType[]) {
    it(`reads or refuses with a reason every damaged ${type.split(/[/.]/).at(-1)}`, { timeout: 120_000 }, async () => {
      const bytes = fixtures[type]!;
      await fc.assert(
        fc.asyncProperty(damage(bytes.length), async (change) => {
          const file = damaged(bytes, change);
          // Detection must not throw either, whatever it makes of the bytes.
          detectDocumentType(file, 'damaged');
          await parsedOrRefused(file, type);
        }),
        { numRuns: 200 },
      );
    });
  }
});

describe('the TIFF reader under damaged files', () => {
  // OCR on: a damaged frame is decoded and read, or refused with a reason.
  const limits = { ...defaultParseLimits, ocr: { language: 'eng' }, maxOcrPages: 4 };
  const fixtures: Record<string, Uint8Array> = {};
  beforeAll(async () => {
    const sharp = (await import('sharp')).default;
    const page = await sharp({ create: { width: 48, height: 24, channels: 3, background: 'white' } }).png().toBuffer();
    fixtures.deflated = await makeTiff([page, page]);
    fixtures.uncompressed = makeTiffFrames(3, 16, 16);
  });

  for (const name of ['deflated', 'uncompressed']) {
    it(`reads or refuses with a reason every damaged ${name} TIFF`, { timeout: 180_000 }, async () => {
      const bytes = fixtures[name]!;
      await fc.assert(
        fc.asyncProperty(damage(bytes.length), async (change) => {
          const file = damaged(bytes, change);
          detectDocumentType(file, 'damaged');
          await parsedOrRefused(file, 'image/tiff', limits);
        }),
        { numRuns: 60 },
      );
    });
  }
});

describe('spreadsheet cells of any text', () => {
  const cell = fc.oneof(
    fc.string({ unit: 'grapheme', maxLength: 40 }),
    fc.constantFrom('', ' ', '\n', 'a\nb', '|', ' | ', '\t', '=1+1', '#REF!', '数据', '🙂', '\u200b'),
  );
  it('keeps every chunk within budget and every row where rowStarts says', { timeout: 120_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(cell, { minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 40 }), fc.integer({ min: 16, max: 300 }), async (rows, chunkTokens) => {
        let parsed;
        try {
          parsed = await parseDocument(await workbook(rows), XLSX_TYPE);
        } catch (error) {
          expect(error).toBeInstanceOf(ParseError);
          return;
        }
        for (const chunk of chunkDocument(parsed, { chunkTokens, overlapTokens: Math.floor(chunkTokens / 8) })) {
          expect(chunk.tokenCount).toBeLessThanOrEqual(chunkTokens);
          for (const { offset } of chunk.metadata.rowStarts ?? []) {
            expect(offset === 0 || chunk.content[offset - 1] === '\n', JSON.stringify(chunk)).toBe(true);
          }
        }
      }),
      { numRuns: 150 },
    );
  });
});
