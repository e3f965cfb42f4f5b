import { decodeText, isPlausibleText } from './text.js';
import { DOCX_TYPE, EPUB_TYPE, ODP_TYPE, ODS_TYPE, ODT_TYPE, PPTX_TYPE, RTF_TYPE, XLSX_TYPE, type DocumentType } from './types.js';

export type { DocumentType } from './types.js';

const PDF_SIGNATURE = asciiBytes('%PDF-');
const ZIP_LOCAL_FILE_SIGNATURE = Uint8Array.of(0x50, 0x4b, 0x03, 0x04);
/**
 * The main part of each Office format. Zip entry names are stored uncompressed, so a file names
 * its parts in plain bytes; a deck or a report that embeds a workbook (a chart's data) holds the
 * workbook's names too, so the workbook comes last.
 */
const OFFICE_MAIN_PARTS: readonly { type: DocumentType; part: Uint8Array }[] = [
  { type: DOCX_TYPE, part: asciiBytes('word/document.xml') },
  { type: PPTX_TYPE, part: asciiBytes('ppt/presentation.xml') },
  { type: XLSX_TYPE, part: asciiBytes('xl/workbook.xml') },
];
/** E-books and OpenDocument files start with an uncompressed `mimetype` entry naming their type. */
const MIMETYPE_ENTRY = asciiBytes('mimetype');
const ZIP_TYPES_BY_MIMETYPE: readonly DocumentType[] = [EPUB_TYPE, ODT_TYPE, ODP_TYPE, ODS_TYPE];
/** Zip-based formats: recognised by their parts, or passed on by name so that the parser can say what is wrong. */
const ZIP_TYPES: readonly DocumentType[] = [DOCX_TYPE, XLSX_TYPE, PPTX_TYPE, ...ZIP_TYPES_BY_MIMETYPE];
/** Images are read by OCR; each is recognised by its signature, whatever its name. */
const IMAGE_SIGNATURES: readonly { type: DocumentType; matches: (bytes: Uint8Array) => boolean }[] = [
  { type: 'image/png', matches: (bytes) => startsWith(bytes, Uint8Array.of(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) },
  { type: 'image/jpeg', matches: (bytes) => startsWith(bytes, Uint8Array.of(0xff, 0xd8, 0xff)) },
  { type: 'image/webp', matches: (bytes) => startsWith(bytes, asciiBytes('RIFF')) && indexOfBytes(bytes.subarray(8, 12), asciiBytes('WEBP')) === 0 },
  // Little- and big-endian TIFF: a scanner's multi-page scan.
  { type: 'image/tiff', matches: (bytes) => startsWith(bytes, Uint8Array.of(0x49, 0x49, 0x2a, 0x00)) || startsWith(bytes, Uint8Array.of(0x4d, 0x4d, 0x00, 0x2a)) },
];
const RTF_SIGNATURE = asciiBytes('{\\rtf');
/** An OLE compound file: how Office stores a password-protected DOCX, XLSX or PPTX (and the old .doc, .xls and .ppt). */
const COMPOUND_FILE_SIGNATURE = Uint8Array.of(0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1);
/** Readers accept a PDF header preceded by junk within the first kilobyte. */
const PDF_HEADER_SEARCH_BYTES = 1024;

const TYPE_BY_EXTENSION: Record<string, DocumentType> = {
  pdf: 'application/pdf',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
  tif: 'image/tiff',
  tiff: 'image/tiff',
  docx: DOCX_TYPE,
  md: 'text/markdown',
  markdown: 'text/markdown',
  mdown: 'text/markdown',
  mkd: 'text/markdown',
  html: 'text/html',
  htm: 'text/html',
  xhtml: 'text/html',
  csv: 'text/csv',
  tsv: 'text/tab-separated-values',
  tab: 'text/tab-separated-values',
  xlsx: XLSX_TYPE,
  pptx: PPTX_TYPE,
  epub: EPUB_TYPE,
  odt: ODT_TYPE,
  odp: ODP_TYPE,
  ods: ODS_TYPE,
  rtf: RTF_TYPE,
  json: 'application/json',
  txt: 'text/plain',
  text: 'text/plain',
};

/**
 * The type of an uploaded file, or null when it is not a supported document.
 *
 * Content decides first: a PDF, an image of pages (PNG, JPEG, WebP, TIFF), rich text (RTF) or an office file (DOCX,
 * XLSX, PPTX, EPUB, ODT, ODP, ODS) is recognised by its signature whatever it is called, and
 * anything else must be valid UTF-8 (or UTF-16 with a byte-order mark) without binary control
 * characters, or it is unsupported even when named `.txt`. Text is then classified by extension;
 * text with an unknown extension or none is plain text, or HTML when it starts like an HTML page.
 * A `.json` file that does not parse is plain text, so that it is still indexed rather than
 * rejected. An empty file gets the type its name implies (plain text without an extension); the
 * parser reports it as empty.
 *
 * This is synchronous on purpose (callers validate uploads inline), which is why the few
 * signatures that matter are checked here rather than with the asynchronous `file-type`.
 */
export function detectDocumentType(bytes: Uint8Array, filename: string): DocumentType | null {
  const extension = extensionOf(filename);
  const typeFromName = extension === '' ? 'text/plain' : (TYPE_BY_EXTENSION[extension] ?? null);
  if (bytes.length === 0) return typeFromName;

  const image = IMAGE_SIGNATURES.find((candidate) => candidate.matches(bytes));
  if (image) return image.type;
  // Rich text is 7-bit text of control words, with 8-bit or binary runs allowed: its header decides, not whether it decodes as text.
  if (startsWith(bytes, RTF_SIGNATURE)) return RTF_TYPE;
  const pdfHeaderAt = indexOfBytes(bytes.subarray(0, PDF_HEADER_SEARCH_BYTES + PDF_SIGNATURE.length), PDF_SIGNATURE);
  if (pdfHeaderAt === 0) return 'application/pdf';
  if (startsWith(bytes, ZIP_LOCAL_FILE_SIGNATURE)) {
    // The type its name gives when its main part is there; else the first whose main part is. A
    // zip named for a format without its main part is still passed on as that format, so that the
    // parser can say what is wrong.
    const named = zipMimetype(bytes);
    if (named) return named;
    const found = OFFICE_MAIN_PARTS.filter(({ part }) => indexOfBytes(bytes, part) >= 0).map(({ type }) => type);
    if (typeFromName !== null && found.includes(typeFromName)) return typeFromName;
    if (found.length > 0) return found[0]!;
    return typeFromName !== null && ZIP_TYPES.includes(typeFromName) ? typeFromName : null;
  }
  // Passed on so that the parser can say the file is encrypted, rather than refusing its type.
  if (isCompoundFile(bytes)) return typeFromName !== null && ZIP_TYPES.includes(typeFromName) ? typeFromName : null;

  const text = decodeText(bytes);
  const isText = text !== null && isPlausibleText(text);
  // A header after leading junk counts only in a binary file, not in text that mentions "%PDF-".
  if (pdfHeaderAt > 0 && !isText) return 'application/pdf';
  if (!isText) return null;

  switch (typeFromName) {
    case 'text/markdown':
    case 'text/html':
    case 'text/csv':
    case 'text/tab-separated-values':
      return typeFromName;
    case 'application/json':
      return parsesAsJson(text) ? 'application/json' : 'text/plain';
    default:
      return looksLikeHtmlPage(text) ? 'text/html' : 'text/plain';
  }
}

/** The type a zip's leading `mimetype` entry names (stored uncompressed), if it is one of the formats read. */
function zipMimetype(bytes: Uint8Array): DocumentType | null {
  if (bytes.length < 30) return null;
  // The local file header: name length at 26, extra field length at 28, then the name, the extra field and the data.
  const nameLength = bytes[26]! | (bytes[27]! << 8);
  const extraLength = bytes[28]! | (bytes[29]! << 8);
  if (nameLength !== MIMETYPE_ENTRY.length || indexOfBytes(bytes.subarray(30, 30 + nameLength), MIMETYPE_ENTRY) !== 0) return null;
  // The entry's size is at 18; its data is the type's name and nothing more.
  const size = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).readUInt32LE(18);
  const dataStart = 30 + nameLength + extraLength;
  const declared = Buffer.from(bytes.subarray(dataStart, dataStart + Math.min(size, 100))).toString('latin1').trim();
  return ZIP_TYPES_BY_MIMETYPE.find((type) => declared === type) ?? null;
}

export const isCompoundFile = (bytes: Uint8Array) => startsWith(bytes, COMPOUND_FILE_SIGNATURE);

function extensionOf(filename: string): string {
  const basename = filename.split(/[\\/]/).pop() ?? '';
  const dot = basename.lastIndexOf('.');
  return dot > 0 ? basename.slice(dot + 1).toLowerCase() : '';
}

function looksLikeHtmlPage(text: string): boolean {
  return /^\s*(<!--[\s\S]*?-->\s*)*<(!doctype\s+html|html)[\s>]/i.test(text.replace(/^\ufeff/, ''));
}

function parsesAsJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

function asciiBytes(text: string): Uint8Array {
  return Uint8Array.from(text, (character) => character.charCodeAt(0));
}

function startsWith(bytes: Uint8Array, prefix: Uint8Array): boolean {
  return bytes.length >= prefix.length && prefix.every((byte, index) => bytes[index] === byte);
}

function indexOfBytes(haystack: Uint8Array, needle: Uint8Array): number {
  return Buffer.from(haystack.buffer, haystack.byteOffset, haystack.byteLength).indexOf(needle);
}
