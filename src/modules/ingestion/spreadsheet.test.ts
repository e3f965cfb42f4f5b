import { setTimeout } from 'node:timers/promises';
import ExcelJS from 'exceljs';
import { strFromU8, strToU8, unzipSync, zipSync } from 'fflate';
import { describe, expect, it } from 'vitest';
import { chunkDocument } from './chunk.js';
import { detectDocumentType } from './detect.js';
import { parseDocument } from './parse.js';
import { parseError } from '../../../test/support/documents.js';
import { columnLetters } from './spreadsheet.js';
import { XLSX_TYPE } from './types.js';

async function workbookBytes(build: (workbook: ExcelJS.Workbook) => void): Promise<Uint8Array> {
  const workbook = new ExcelJS.Workbook();
  build(workbook);
  return new Uint8Array(await workbook.xlsx.writeBuffer());
}


describe('XLSX', () => {
  it('reads each sheet as a section of rows, cells as Excel shows them', async () => {
    const bytes = await workbookBytes((workbook) => {
      const revenue = workbook.addWorksheet('Revenue');
      revenue.addRow(['Region', 'FY2023', 'FY2024']);
      revenue.addRow(['North', 1200, 1350.25]);
      revenue.addRow([]);
      revenue.addRow(['South', 800, { formula: 'B2*2', result: 2400 }]);
      revenue.getCell('B2').numFmt = '#,##0';
      revenue.getCell('C2').numFmt = '$#,##0.00';
      revenue.getCell('E9').value = null;
      const staff = workbook.addWorksheet('Staff');
      staff.addRow(['Name', 'Started']);
      staff.addRow(['Ada Quill', new Date(Date.UTC(2021, 2, 14))]);
      staff.getCell('B2').numFmt = 'yyyy-mm-dd';
      // A linked workbook's value is its stored result: the other file is never read.
      staff.addRow(['Linked', { formula: "'[budget.xlsx]Sheet1'!A1", result: 7 }]);
    });
    expect(detectDocumentType(bytes, 'book.bin')).toBe(XLSX_TYPE);
    expect(detectDocumentType(bytes, 'book.xlsx')).toBe(XLSX_TYPE);
    const parsed = await parseDocument(bytes, XLSX_TYPE);
    expect(parsed.text).toBe(
      ['Revenue', 'Region | FY2023 | FY2024\nNorth | 1,200 | $1,350.25\nSouth | 800 | 2400', 'Staff', 'Name | Started\nAda Quill | 2021-03-14\nLinked | 7'].join('\n\n'),
    );
    expect(parsed.blocks.filter((block) => block.kind === 'heading').map((block) => block.text)).toEqual(['Revenue', 'Staff']);
    const chunks = chunkDocument(parsed, { chunkTokens: 512, overlapTokens: 32 });
    expect(chunks.map((chunk) => [chunk.metadata.sheet, chunk.metadata.range, chunk.metadata.headings])).toEqual([
      ['Revenue', 'A2:C4', ['Revenue']],
      ['Staff', 'A2:B3', ['Staff']],
    ]);
  });

  it("keeps the tabs' order and the workbook's title, whatever order the archive holds the sheets in", async () => {
    const written = await workbookBytes((workbook) => {
      workbook.title = 'Harbour accounts 2024';
      workbook.addWorksheet('Summary').addRow(['Total fees', 4200]);
      workbook.addWorksheet('Details').addRow(['Berth', 'Fee']);
    });
    // The tabs swapped in xl/workbook.xml: Details (sheet2.xml) is shown first, and read after sheet1.xml.
    const parts = unzipSync(written);
    const book = strFromU8(parts['xl/workbook.xml']!);
    const [summary, details] = book.match(/<sheet [^>]*\/>/g)!;
    parts['xl/workbook.xml'] = strToU8(book.replace(summary!, '\u0000').replace(details!, summary!).replace('\u0000', details!));
    const parsed = await parseDocument(zipSync(parts), XLSX_TYPE);
    expect(parsed.blocks.filter((block) => block.kind === 'heading').map((block) => block.text)).toEqual(['Details', 'Summary']);
    expect(parsed.metadataTitle).toBe('Harbour accounts 2024');
  });

  it("reads every sheet in the tabs' order, whatever order the archive holds its parts in", async () => {
    const written = await workbookBytes((workbook) => {
      for (const name of ['North', 'South', 'East', 'West', 'Centre']) workbook.addWorksheet(name).addRow([`${name} berths`, name.length]);
    });
    const parts = unzipSync(written);
    const sheets = Object.keys(parts).filter((path) => path.startsWith('xl/worksheets/'));
    const metadata = ['xl/_rels/workbook.xml.rels', 'xl/sharedStrings.xml', 'xl/styles.xml'];
    const layouts = {
      // As Excel writes it: the workbook first, the sheets streamed as they come, the document properties last.
      'sheets before the end': ['[Content_Types].xml', '_rels/.rels', 'xl/workbook.xml', ...metadata, ...sheets, 'docProps/core.xml'],
      'sheets last': ['[Content_Types].xml', '_rels/.rels', 'xl/workbook.xml', ...metadata, ...sheets],
      // The shared strings before the sheets and the workbook after them.
      'workbook last': ['[Content_Types].xml', '_rels/.rels', ...metadata, ...sheets, 'xl/workbook.xml'],
    };
    for (const [layout, order] of Object.entries(layouts)) {
      const parsed = await parseDocument(zipSync(Object.fromEntries(order.map((path) => [path, parts[path]!]))), XLSX_TYPE);
      expect(parsed.text, layout).toBe(['North', 'North berths | 5', 'South', 'South berths | 5', 'East', 'East berths | 4', 'West', 'West berths | 4', 'Centre', 'Centre berths | 6'].join('\n\n'));
    }
    const unlisted = Object.fromEntries(Object.entries(parts).filter(([path]) => path !== 'xl/workbook.xml'));
    expect((await parseError(parseDocument(zipSync(unlisted), XLSX_TYPE))).message).toBe('not a readable XLSX: it has no xl/workbook.xml, the part that lists its sheets');
  });

  it('repeats the header row in every chunk of a long sheet, each chunk naming its rows', async () => {
    const bytes = await workbookBytes((workbook) => {
      const sheet = workbook.addWorksheet('Ledger');
      sheet.addRow([]);
      sheet.addRow([undefined, 'Account', 'Quarter', 'Amount']);
      for (let index = 0; index < 300; index++) sheet.addRow([undefined, `Account ${index}`, `Q${(index % 4) + 1}`, index * 10]);
    });
    const chunks = chunkDocument(await parseDocument(bytes, XLSX_TYPE), { chunkTokens: 128, overlapTokens: 16 });
    expect(chunks.length).toBeGreaterThan(5);
    let expectedRow = 3;
    for (const chunk of chunks) {
      expect(chunk.content.replace(/^Ledger\n\n/, '').split('\n')[0]).toBe('Account | Quarter | Amount');
      const [, first, last] = /^B(\d+):D(\d+)$/.exec(chunk.metadata.range!)!;
      expect(Number(first)).toBe(expectedRow);
      const rows = chunk.content.split('\n').filter((line) => /^Account \d/.test(line));
      expect(Number(last) - Number(first) + 1).toBe(rows.length);
      expect(rows[0]).toBe(`Account ${Number(first) - 3} | Q${((Number(first) - 3) % 4) + 1} | ${(Number(first) - 3) * 10}`);
      // Each row's line is where rowStarts says, so a quote can name its row.
      expect(chunk.metadata.rowStarts!.map((start) => start.row)).toEqual(Array.from({ length: rows.length }, (_, index) => Number(first) + index));
      for (const { row, offset } of chunk.metadata.rowStarts!) expect(chunk.content.slice(offset)).toMatch(new RegExp(`^Account ${row - 3} \\|`));
      expectedRow = Number(last) + 1;
    }
    expect(expectedRow).toBe(303);
  });

  it('refuses a workbook whose part headers disagree with its directory, which left the streaming reader waiting', async () => {
    const bytes = await workbookBytes((workbook) => workbook.addWorksheet('Sheet').addRow(['alpha', 'beta']));
    const name = Buffer.from('xl/worksheets/sheet1.xml');
    // The part's local header: its signature, 26 bytes of fields, then its name.
    let header = Buffer.from(bytes).indexOf(name) - 30;
    while (Buffer.from(bytes).readUInt32LE(header) !== 0x04034b50) header = Buffer.from(bytes).indexOf(name, header + 31) - 30;
    const damaged = bytes.slice();
    damaged[header + 19] = 0; // the second byte of its compressed size
    damaged[header + 20] = damaged[header + 20]! ^ 0x10;
    expect((await parseError(parseDocument(damaged, XLSX_TYPE))).message).toBe('not a readable XLSX: the header of xl/worksheets/sheet1.xml gives other sizes than the directory');
  });

  it('refuses a workbook whose directory leaves a part out, which left the streaming reader waiting on its damaged data', async () => {
    const bytes = await workbookBytes((workbook) => workbook.addWorksheet('Sheet').addRow(['alpha', 'beta']));
    const file = Buffer.from(bytes);
    const end = file.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
    const directory = file.readUInt32LE(end + 16);
    // The directory's last entry names the part stored last, just before the directory.
    const lastEntry = file.lastIndexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]), end);
    const lastPart = file.readUInt32LE(lastEntry + 42);
    const damaged = Buffer.from(bytes.slice(0, lastEntry));
    const count = file.readUInt16LE(end + 10) - 1;
    const ending = Buffer.from(file.subarray(end));
    ending.writeUInt16LE(count, 8);
    ending.writeUInt16LE(count, 10);
    ending.writeUInt32LE(lastEntry - directory, 12);
    // Broken deflate data in the unlisted part.
    damaged.fill(0xff, lastPart + 30 + file.readUInt16LE(lastPart + 26) + file.readUInt16LE(lastPart + 28), directory);
    const refusal = await Promise.race([parseError(parseDocument(Buffer.concat([damaged, ending]), XLSX_TYPE)), setTimeout(10_000).then(() => new Error('still waiting after 10 s'))]);
    expect(refusal.message).toBe('not a readable XLSX: it holds data its directory does not list');
  });

  it('refuses a password-protected, truncated or empty workbook with a reason', async () => {
    // Office stores an encrypted workbook inside an OLE compound file.
    const compound = new Uint8Array(4096);
    compound.set([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]);
    expect(detectDocumentType(compound, 'secret.xlsx')).toBe(XLSX_TYPE);
    expect(detectDocumentType(compound, 'secret.bin')).toBeNull();
    expect((await parseError(parseDocument(compound, XLSX_TYPE))).message).toMatch(/^the XLSX is password-protected/);

    const whole = await workbookBytes((workbook) => workbook.addWorksheet('One').addRow(['a', 'b']));
    expect((await parseError(parseDocument(whole.subarray(0, whole.length / 2), XLSX_TYPE))).message).toMatch(/^not a readable XLSX: /);
    const empty = await workbookBytes((workbook) => workbook.addWorksheet('Nothing'));
    expect((await parseError(parseDocument(empty, XLSX_TYPE))).message).toBe('the document contains no text');
  });

  it('reads a row of 16,000 columns without repeating it as a header', async () => {
    const bytes = await workbookBytes((workbook) => {
      const sheet = workbook.addWorksheet('Wide');
      sheet.addRow(Array.from({ length: 16_000 }, (_, index) => `c${index}`));
      sheet.addRow(Array.from({ length: 16_000 }, (_, index) => index));
    });
    const parsed = await parseDocument(bytes, XLSX_TYPE);
    expect(parsed.blocks[1]!.tableHeader).toBeUndefined();
    const chunks = chunkDocument(parsed, { chunkTokens: 512, overlapTokens: 32 });
    for (const chunk of chunks) expect(chunk.tokenCount).toBeLessThanOrEqual(512);
    expect(chunks.map((chunk) => chunk.content).join(' ')).toContain('c15999');
  });

  it('names columns as Excel does', () => {
    expect([1, 26, 27, 52, 702, 703, 16_384].map(columnLetters)).toEqual(['A', 'Z', 'AA', 'AZ', 'ZZ', 'AAA', 'XFD']);
  });
});

describe('TSV', () => {
  it('is read as CSV is, its header row repeated', async () => {
    const bytes = new TextEncoder().encode('name\tscore\nada\t3\nbob\t5\n');
    expect(detectDocumentType(bytes, 'scores.tsv')).toBe('text/tab-separated-values');
    const parsed = await parseDocument(bytes, 'text/tab-separated-values');
    expect(parsed.blocks[0]).toMatchObject({ text: 'name\tscore\nada\t3\nbob\t5', tableHeader: 'name\tscore' });
  });
});
