import { decodeText, isPlausibleText } from './text.js';
import { DOCX_TYPE, type DocumentType } from './types.js';

export type { DocumentType } from './types.js';

const PDF_SIGNATURE = asciiBytes('%PDF-');
const ZIP_LOCAL_FILE_SIGNATURE = Uint8Array.of(0x50, 0x4b, 0x03, 0x04);
const DOCX_MAIN_PART = asciiBytes('word/document.xml');
/** Readers accept a PDF header preceded by junk within the first kilobyte. */
const PDF_HEADER_SEARCH_BYTES = 1024;

const TYPE_BY_EXTENSION: Record<string, DocumentType> = {
  pdf: 'application/pdf',
  docx: DOCX_TYPE,
  md: 'text/markdown',
  markdown: 'text/markdown',
  mdown: 'text/markdown',
  mkd: 'text/markdown',
  html: 'text/html',
  htm: 'text/html',
  xhtml: 'text/html',
  csv: 'text/csv',
  json: 'application/json',
  txt: 'text/plain',
  text: 'text/plain',
};

/**
 * The type of an uploaded file, or null when it is not a supported document.
 *
 * Content decides first: a PDF or DOCX is recognised by its signature whatever it is called, and
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

  const pdfHeaderAt = indexOfBytes(bytes.subarray(0, PDF_HEADER_SEARCH_BYTES + PDF_SIGNATURE.length), PDF_SIGNATURE);
  if (pdfHeaderAt === 0) return 'application/pdf';
  if (startsWith(bytes, ZIP_LOCAL_FILE_SIGNATURE)) {
    // Zip entry names are stored uncompressed, so a DOCX names its main part in plain bytes. A zip
    // named .docx without it is still passed on as DOCX so that the parser can say what is wrong.
    if (indexOfBytes(bytes, DOCX_MAIN_PART) >= 0 || typeFromName === DOCX_TYPE) return DOCX_TYPE;
    return null;
  }

  const text = decodeText(bytes);
  const isText = text !== null && isPlausibleText(text);
  // A header after leading junk counts only in a binary file, not in text that mentions "%PDF-".
  if (pdfHeaderAt > 0 && !isText) return 'application/pdf';
  if (!isText) return null;

  switch (typeFromName) {
    case 'text/markdown':
    case 'text/html':
    case 'text/csv':
      return typeFromName;
    case 'application/json':
      return parsesAsJson(text) ? 'application/json' : 'text/plain';
    default:
      return looksLikeHtmlPage(text) ? 'text/html' : 'text/plain';
  }
}

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
