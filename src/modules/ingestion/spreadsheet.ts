import { Readable } from 'node:stream';
import ExcelJS from 'exceljs';
import * as numfmt from 'numfmt';
import { SaxesParser } from 'saxes';
import { checkUnpackedSize, readArchivePart } from './archive.js';
import { CELL_SEPARATOR, ParseError, textTooLong, type ParsedBlock, type ParsedDocument } from './types.js';

/** A header row longer than this is not repeated: it is read as an ordinary row. */
const HEADER_CHARACTERS = 400;

type Cell = ExcelJS.Cell;
/**
 * The rows of a sheet that hold text, kept flat (a million rows are a few arrays, not a million
 * objects): row `r` has number `numbers[r]` and cells `firstCell[r]` up to `firstCell[r + 1]`,
 * each with its column in `columns` and its text in `texts`.
 */
type SheetRows = { name: string; position: number; numbers: number[]; firstCell: number[]; columns: number[]; texts: string[] };

/**
 * An XLSX workbook as blocks: each sheet a section headed by its name, its rows in blocks that
 * start with the sheet's header row (its first row with text), cells as Excel shows them (number
 * formats applied, a formula's stored result; nothing is recalculated and no linked file is
 * read). Empty rows and columns are skipped. Each block names its sheet and rows, which the
 * chunker turns into the chunk's `sheet` and `range`.
 *
 * The workbook is read as a stream, a row at a time, keeping only the text of the cells: a sheet
 * of a million rows needs memory in proportion to its text, which `maxTextCharacters` bounds,
 * and is refused by that limit as soon as it is passed.
 */
export async function parseXlsx(bytes: Uint8Array, limits: { maxUnpackedBytes: number; maxTextCharacters: number }): Promise<Omit<ParsedDocument, 'text'>> {
  await checkUnpackedSize(bytes, limits.maxUnpackedBytes, 'XLSX');
  // The part that names the sheets: without it the reader fails on the first sheet it meets.
  if ((await readArchivePart(bytes, 'xl/workbook.xml', limits.maxUnpackedBytes)) === null) {
    throw new ParseError('not a readable XLSX: it has no xl/workbook.xml, the part that lists its sheets');
  }
  const reader = new ExcelJS.stream.xlsx.WorkbookReader(Readable.from([Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)]), {
    worksheets: 'emit',
    sharedStrings: 'cache',
    styles: 'cache',
    hyperlinks: 'ignore',
    entries: 'ignore',
  });
  const sheets: SheetRows[] = [];
  let characters = 0;
  try {
    for await (const sheet of reader) {
      const rows: SheetRows = { name: '', position: 0, numbers: [], firstCell: [0], columns: [], texts: [] };
      for await (const row of sheet as AsyncIterable<ExcelJS.Row>) {
        row.eachCell({ includeEmpty: false }, (cell, column) => {
          const text = shownText(cell).replace(/\s+/g, ' ').trim();
          if (text === '') return;
          rows.columns.push(column);
          rows.texts.push(text);
          characters += text.length + CELL_SEPARATOR.length;
        });
        if (rows.texts.length > rows.firstCell.at(-1)!) {
          rows.numbers.push(row.number);
          rows.firstCell.push(rows.texts.length);
        }
        if (characters > limits.maxTextCharacters) throw textTooLong(limits.maxTextCharacters);
      }
      const { id, name } = sheet as unknown as SheetIdentity;
      const order = (reader as unknown as WorkbookModel).model?.sheets?.findIndex((entry) => entry.id === id) ?? -1;
      rows.name = name || `Sheet${id}`;
      rows.position = order === -1 ? Number.MAX_SAFE_INTEGER : order;
      sheets.push(rows);
    }
  } catch (error) {
    if (error instanceof ParseError) throw error;
    throw new ParseError(`not a readable XLSX: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (sheets.length === 0) throw new ParseError('not a readable XLSX: it has no worksheet');
  // A stream meets the sheets in the archive's order; the workbook's own order is the tabs'.
  sheets.sort((a, b) => a.position - b.position);
  const blocks = sheets.flatMap(sheetBlocks);
  const title = await workbookTitle(bytes);
  return { pageCount: null, blocks, metadataTitle: title };
}

/** What the stream reader learns from `xl/workbook.xml` (each sheet's id, in the tabs' order), and gives each sheet. */
type WorkbookModel = { model?: { sheets?: { id: number }[] } };
type SheetIdentity = { id: number; name?: string };

/** The title in the workbook's document properties (`docProps/core.xml`), if it has one. */
async function workbookTitle(bytes: Uint8Array): Promise<string | null> {
  const part = await readArchivePart(bytes, 'docProps/core.xml', 1024 * 1024).catch(() => null);
  if (part === null) return null;
  const parser = new SaxesParser({ xmlns: true });
  let inTitle = false;
  let title = '';
  parser.on('opentag', (tag) => {
    inTitle = tag.local === 'title' && tag.uri === 'http://purl.org/dc/elements/1.1/';
  });
  parser.on('text', (text) => {
    if (inTitle) title += text;
  });
  parser.on('closetag', () => {
    inTitle = false;
  });
  try {
    parser.write(part.toString('utf8')).close();
  } catch {
    return null;
  }
  const trimmed = title.trim();
  return trimmed === '' ? null : trimmed;
}

function sheetBlocks({ name, numbers, firstCell, columns: cellColumns, texts }: SheetRows): ParsedBlock[] {
  if (numbers.length === 0) return [];
  // Only columns that hold something anywhere in the sheet.
  const columns = [...new Set(cellColumns)].sort((a, b) => a - b);
  const slot = new Map(columns.map((column, index) => [column, index]));
  const line = (row: number) => {
    const cells = new Array<string>(columns.length).fill('');
    for (let cell = firstCell[row]!; cell < firstCell[row + 1]!; cell++) cells[slot.get(cellColumns[cell]!)!] = texts[cell]!;
    return cells.join(CELL_SEPARATOR);
  };
  const heading: ParsedBlock = { kind: 'heading', text: name, page: null, headingPath: [name], level: 1 };
  const location = { name, firstColumn: columnLetters(columns[0]!), lastColumn: columnLetters(columns.at(-1)!) };

  const headerText = line(0);
  const header = headerText.length <= HEADER_CHARACTERS && numbers.length > 1 ? headerText : undefined;
  const firstBodyRow = header === undefined ? 0 : 1;
  const lines = header === undefined ? [] : [header];
  for (let row = firstBodyRow; row < numbers.length; row++) lines.push(line(row));
  // The sheet is one table: the chunker cuts it between rows and repeats the header in each chunk.
  const table: ParsedBlock = {
    kind: 'text',
    text: lines.join('\n'),
    page: null,
    headingPath: [name],
    ...(header !== undefined && { tableHeader: header }),
    sheet: { ...location, headerRow: header === undefined ? null : numbers[0]!, rows: numbers.slice(firstBodyRow) },
  };
  return [heading, table];
}

/** A cell's text as Excel shows it: its number format applied to numbers and dates. */
function shownText(cell: Cell): string {
  let value: unknown = cell.value;
  if (value !== null && typeof value === 'object' && !(value instanceof Date)) {
    if ('result' in value) value = (value as { result?: unknown }).result;
    else if ('error' in value) return String((value as { error: unknown }).error);
    else return cell.text;
  }
  if (value === null || value === undefined) return '';
  if (value instanceof Date) value = numfmt.dateToSerial(value);
  if (typeof value === 'number') {
    try {
      return numfmt.format(cell.numFmt || 'General', value);
    } catch {
      return String(value);
    }
  }
  if (value !== null && typeof value === 'object' && 'error' in value) return String((value as { error: unknown }).error);
  return String(value);
}

/** 1 → A, 27 → AA. */
export function columnLetters(column: number): string {
  let letters = '';
  for (let rest = column; rest > 0; rest = Math.floor((rest - 1) / 26)) letters = String.fromCharCode(65 + ((rest - 1) % 26)) + letters;
  return letters;
}
