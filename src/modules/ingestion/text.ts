import { ParseError, type ParsedBlock } from './types.js';

/**
 * Decodes a text file: UTF-8 (with or without a byte-order mark), or UTF-16 when it starts with
 * a UTF-16 byte-order mark. Returns null when the bytes are not valid text in those encodings.
 */
export function decodeText(bytes: Uint8Array): string | null {
  let encoding = 'utf-8';
  if (bytes[0] === 0xff && bytes[1] === 0xfe) encoding = 'utf-16le';
  else if (bytes[0] === 0xfe && bytes[1] === 0xff) encoding = 'utf-16be';
  try {
    // TextDecoder drops the byte-order mark of the chosen encoding by default.
    return new TextDecoder(encoding, { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

// C0 controls other than tab, line feed, vertical tab, form feed, carriage return and escape.
const BINARY_CONTROL_CHARACTERS = /[\u0000-\u0008\u000e-\u001a\u001c-\u001f\u007f]/g;

/** True for decoded text that a person could have written: no NULs and almost no control characters. */
export function isPlausibleText(text: string): boolean {
  if (text.includes('\u0000')) return false;
  const controlCount = text.match(BINARY_CONTROL_CHARACTERS)?.length ?? 0;
  return controlCount <= text.length / 1000;
}

export function decodeTextOrThrow(bytes: Uint8Array): string {
  const text = decodeText(bytes);
  if (text === null) throw new ParseError('the file is not valid UTF-8 text');
  if (!isPlausibleText(text)) throw new ParseError('the file contains binary data, not text');
  return text.replace(/\r\n?/g, '\n');
}

export function plainTextBlocks(text: string): ParsedBlock[] {
  return text
    .split(/\n[ \t]*\n/)
    .map((paragraph) => trimLines(paragraph))
    .filter((paragraph) => paragraph.length > 0)
    .map((paragraph) => ({ kind: 'text', text: paragraph, page: null, headingPath: [] }));
}

/** Trims trailing spaces on every line and blank lines around the paragraph, keeping indentation. */
function trimLines(paragraph: string): string {
  return paragraph
    .split('\n')
    .map((line) => line.trimEnd())
    .join('\n')
    .replace(/^\n+|\n+$/g, '');
}

/** Rows per block: small enough that a block rarely needs splitting, large enough to keep rows together. */
const CSV_BLOCK_CHARACTERS = 1200;
/** Longest header row repeated in each block: a quarter of one, so repeating it at most adds a third. */
const CSV_HEADER_CHARACTERS = CSV_BLOCK_CHARACTERS / 4;

/**
 * CSV is kept row by row: records (which may span lines inside quoted fields) are grouped into
 * blocks of whole records, so no chunk boundary falls inside a record unless one record alone is
 * larger than a chunk.
 */
export function csvBlocks(text: string): ParsedBlock[] {
  const blocks: ParsedBlock[] = [];
  // The first record is the header row: each block starts with it, so each chunk names its
  // columns. One too long to repeat (a hostile file's megabyte of columns) is an ordinary record.
  let header: string | undefined;
  let first = true;
  let pending: string[] = [];
  let pendingLength = 0;
  const flush = () => {
    if (pending.length > 0) {
      blocks.push(
        header === undefined
          ? { kind: 'text', text: pending.join('\n'), page: null, headingPath: [] }
          : { kind: 'text', text: [header, ...pending].join('\n'), page: null, headingPath: [], tableHeader: header },
      );
    } else if (blocks.length === 0 && header !== undefined) blocks.push({ kind: 'text', text: header, page: null, headingPath: [] });
    pending = [];
    pendingLength = header === undefined ? 0 : header.length + 1;
  };
  for (const record of splitCsvRecords(text)) {
    if (record.trim() === '') continue;
    if (first) {
      first = false;
      if (record.length <= CSV_HEADER_CHARACTERS) {
        header = record;
        pendingLength = record.length + 1;
        continue;
      }
    }
    if (pending.length > 0 && pendingLength + record.length > CSV_BLOCK_CHARACTERS) flush();
    pending.push(record);
    pendingLength += record.length + 1;
  }
  flush();
  return blocks;
}

function splitCsvRecords(text: string): string[] {
  const records: string[] = [];
  let insideQuotes = false;
  let start = 0;
  for (let index = 0; index < text.length; index++) {
    const character = text[index];
    // A doubled quote inside a quoted field toggles twice, which leaves the state unchanged.
    if (character === '"') insideQuotes = !insideQuotes;
    else if (character === '\n' && !insideQuotes) {
      records.push(text.slice(start, index).trimEnd());
      start = index + 1;
    }
  }
  records.push(text.slice(start).trimEnd());
  return records;
}

/**
 * JSON is re-indented so that the chunker sees one member per line. Text that does not parse is
 * treated as plain text rather than rejected: detection only labels files JSON when they parse,
 * so this only happens when a caller forces the type.
 */
export function jsonBlocks(text: string): ParsedBlock[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return plainTextBlocks(text);
  }
  return plainTextBlocks(JSON.stringify(value, null, 2));
}

/** A paragraph's lines as one text: a line ending in a hyphen after a letter continues its word on the next line. */
export function joinLines(lines: readonly string[]): string {
  let text = '';
  for (const line of lines) {
    if (text === '' || /\p{L}-$/u.test(text)) text += line;
    else text += ` ${line}`;
  }
  return text;
}
