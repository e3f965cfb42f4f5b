import ExcelJS from 'exceljs';
import * as numfmt from 'numfmt';
import { checkUnpackedSize } from './archive.js';
import { CELL_SEPARATOR, ParseError, type ParsedBlock, type ParsedDocument } from './types.js';

/** A header row longer than this is not repeated: it is read as an ordinary row. */
const HEADER_CHARACTERS = 400;

type Cell = ExcelJS.Cell;
type SheetRow = { number: number; cells: Map<number, string> };

/**
 * An XLSX workbook as blocks: each sheet a section headed by its name, its rows in blocks that
 * start with the sheet's header row (its first row with text), cells as Excel shows them (number
 * formats applied, a formula's stored result; nothing is recalculated and no linked file is
 * read). Empty rows and columns are skipped. Each block names its sheet and rows, which the
 * chunker turns into the chunk's `sheet` and `range`.
 */
export async function parseXlsx(bytes: Uint8Array, maxUnpackedBytes: number): Promise<Omit<ParsedDocument, 'text'>> {
  await checkUnpackedSize(bytes, maxUnpackedBytes, 'XLSX');
  const workbook = new ExcelJS.Workbook();
  try {
    await workbook.xlsx.load(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) as unknown as ArrayBuffer);
  } catch (error) {
    throw new ParseError(`not a readable XLSX: ${error instanceof Error ? error.message : String(error)}`);
  }
  const blocks: ParsedBlock[] = [];
  for (const sheet of workbook.worksheets) blocks.push(...sheetBlocks(sheet));
  const title = workbook.title?.trim();
  return { pageCount: null, blocks, metadataTitle: title ? title : null };
}

function sheetBlocks(sheet: ExcelJS.Worksheet): ParsedBlock[] {
  const rows: SheetRow[] = [];
  sheet.eachRow({ includeEmpty: false }, (row, number) => {
    const cells = new Map<number, string>();
    row.eachCell({ includeEmpty: false }, (cell, column) => {
      const text = shownText(cell).replace(/\s+/g, ' ').trim();
      if (text !== '') cells.set(column, text);
    });
    if (cells.size > 0) rows.push({ number, cells });
  });
  if (rows.length === 0) return [];
  // Only columns that hold something anywhere in the sheet.
  const columns = [...new Set(rows.flatMap((row) => [...row.cells.keys()]))].sort((a, b) => a - b);
  const line = (row: SheetRow) => columns.map((column) => row.cells.get(column) ?? '').join(CELL_SEPARATOR);
  const name = sheet.name;
  const heading: ParsedBlock = { kind: 'heading', text: name, page: null, headingPath: [name], level: 1 };
  const location = { name, firstColumn: columnLetters(columns[0]!), lastColumn: columnLetters(columns.at(-1)!) };

  const [first, ...rest] = rows;
  const headerText = line(first!);
  const header = headerText.length <= HEADER_CHARACTERS && rest.length > 0 ? headerText : undefined;
  const body = header === undefined ? rows : rest;
  // The sheet is one table: the chunker cuts it between rows and repeats the header in each chunk.
  const table: ParsedBlock = {
    kind: 'text',
    text: [...(header === undefined ? [] : [header]), ...body.map(line)].join('\n'),
    page: null,
    headingPath: [name],
    ...(header !== undefined && { tableHeader: header }),
    sheet: { ...location, headerRow: header === undefined ? null : first!.number, rows: body.map((row) => row.number) },
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
