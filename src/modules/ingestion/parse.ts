import { createHash } from 'node:crypto';
import mammoth from 'mammoth';
import { checkUnpackedSize } from './archive.js';
import { isCompoundFile } from './detect.js';
import { htmlFragmentBlocks, htmlPageBlocks, PICTURE_ATTRIBUTE } from './html.js';
import { markdownBlocks } from './markdown.js';
import { parsePdf } from './pdf.js';
import type { OfficeFormat } from './office.js';
import type { OcrSettings } from './ocr.js';
import { csvBlocks, decodeTextOrThrow, jsonBlocks, plainTextBlocks } from './text.js';
import {
  EPUB_TYPE,
  ODP_TYPE,
  ODS_TYPE,
  ODT_TYPE,
  ParseError,
  PPTX_TYPE,
  readsPictures,
  RTF_TYPE,
  textTooLong,
  type DocumentType,
  type ParsedBlock,
  type ParsedDocument,
  type PictureReading,
} from './types.js';

/**
 * The types read with officeparser (office.ts). Its module, ExcelJS's, and OCR's are loaded by
 * the first document that needs them: a parsing process that reads only text and PDFs keeps its
 * heap for them (KB_PARSE_MEMORY_MB).
 */
const officeFormats: Partial<Record<DocumentType, OfficeFormat>> = { [PPTX_TYPE]: 'pptx', [EPUB_TYPE]: 'epub', [ODT_TYPE]: 'odt', [ODP_TYPE]: 'odp', [ODS_TYPE]: 'ods' };

/** An image's format as its owner knows it, in messages. */
const imageNames = { 'image/png': 'PNG', 'image/jpeg': 'JPEG', 'image/webp': 'WebP' } as const;

export { ParseError } from './types.js';
export type { DocumentType, ParsedBlock, ParsedDocument } from './types.js';

/**
 * Extracts the text of a document as heading and text blocks in reading order. Throws ParseError,
 * whose message is meant for the document's owner, when the file cannot be read or holds no text.
 */
export async function parseDocument(
  bytes: Uint8Array,
  type: DocumentType,
  limits: ParseLimits = defaultParseLimits,
  hooks: ParseHooks = {},
): Promise<ParsedDocument> {
  if (bytes.length === 0) throw new ParseError('the document contains no text');
  const parsed = await parseByType(bytes, type, limits, hooks);
  const blocks = parsed.blocks
    .map((block) => boundedHeadings({ ...block, text: storableText(block.text), headingPath: block.headingPath.map(storableText) }))
    .filter((block) => block.text.trim() !== '');
  if (blocks.length === 0) throw new ParseError('the document contains no text');
  const text = blocks.map((block) => block.text).join('\n\n');
  if (text.length > limits.maxTextCharacters) {
    throw textTooLong(limits.maxTextCharacters);
  }
  return { text, pageCount: parsed.pageCount, blocks, metadataTitle: parsed.metadataTitle ? storableText(parsed.metadataTitle) : null };
}

/**
 * Longest heading kept as a heading. Every chunk carries its heading trail (in its metadata and
 * in what it is indexed with), so a "heading" of a whole paragraph or of a damaged file's
 * hundred thousand characters would be repeated in each of thousands of chunks: gigabytes to
 * write for a 2 MB file. Longer, a heading block is read as text, and a trail names it by its
 * beginning.
 */
export const MAX_HEADING_CHARACTERS = 300;

function boundedHeadings(block: ParsedBlock): ParsedBlock {
  const headingPath = block.headingPath.some((heading) => heading.length > MAX_HEADING_CHARACTERS) ? block.headingPath.map(headingStart) : block.headingPath;
  if (block.kind === 'heading' && block.text.length > MAX_HEADING_CHARACTERS) {
    const { level: _level, ...rest } = block;
    return { ...rest, kind: 'text', headingPath };
  }
  return headingPath === block.headingPath ? block : { ...block, headingPath };
}

/** A heading cut to MAX_HEADING_CHARACTERS: at a word's end when one is near, never inside a surrogate pair, marked by an ellipsis. */
function headingStart(heading: string): string {
  if (heading.length <= MAX_HEADING_CHARACTERS) return heading;
  let start = heading.slice(0, MAX_HEADING_CHARACTERS - 1);
  const space = start.search(/\s\S*$/);
  if (space > MAX_HEADING_CHARACTERS * 0.8) start = start.slice(0, space);
  if (/[\ud800-\udbff]$/.test(start)) start = start.slice(0, -1);
  return `${start.trimEnd()}…`;
}

/**
 * Text PostgreSQL can store: without NUL characters (a PDF whose font maps a glyph to U+0000, a
 * DOCX holding `&#0;`) and without unpaired surrogates (`&#xD800;` in a DOCX), which jsonb
 * refuses in a chunk's headings. Either made the chunk write fail.
 */
export function storableText(text: string): string {
  return text.replaceAll('\u0000', '').replace(UNPAIRED_SURROGATE, '\ufffd');
}

const UNPAIRED_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

export type ParseLimits = {
  /** Largest total the parsed parts of an archive (a DOCX's XML) may unpack to. */
  maxUnpackedBytes: number;
  /** Most characters of text a document may yield. */
  maxTextCharacters: number;
  /** How pages without a text layer are read (null: they are not), and how many one document may have. */
  ocr: OcrSettings;
  maxOcrPages: number;
};

export const defaultParseLimits: ParseLimits = { maxUnpackedBytes: 64 * 1024 * 1024, maxTextCharacters: 10_000_000, ocr: null, maxOcrPages: 500 };

/** `onOcrPage` is told of each page (of a PDF, or an image's one) about to be read by OCR, and how many pages the document has. */
export type ParseHooks = { onOcrPage?: (page: number, pageCount: number) => void };

async function parseByType(bytes: Uint8Array, type: DocumentType, limits: ParseLimits, hooks: ParseHooks): Promise<Omit<ParsedDocument, 'text'>> {
  switch (type) {
    case 'application/pdf':
      return parsePdf(bytes, { ocr: limits.ocr, maxOcrPages: limits.maxOcrPages, onOcrPage: hooks.onOcrPage });
    case 'image/png':
    case 'image/jpeg':
    case 'image/webp':
      return (await import('./image.js')).parseImage(bytes, imageNames[type], limits.ocr, hooks.onOcrPage);
    case 'image/tiff':
      return (await import('./image.js')).parseTiff(bytes, limits.ocr, limits.maxOcrPages, hooks.onOcrPage);
    case 'application/vnd.openxmlformats-officedocument.wordprocessingml.document':
      if (isCompoundFile(bytes)) throw encrypted('DOCX');
      await checkUnpackedSize(bytes, limits.maxUnpackedBytes, 'DOCX', { media: readsPictures(pictureReading(limits)) });
      return { pageCount: null, blocks: await docxBlocks(bytes, pictureReading(limits, hooks)) };
    case 'text/html':
      return { pageCount: null, blocks: readHtml(decodeTextOrThrow(bytes)) };
    case 'text/markdown':
      return { pageCount: null, blocks: markdownBlocks(decodeTextOrThrow(bytes)) };
    case 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet':
      if (isCompoundFile(bytes)) throw encrypted('XLSX');
      return (await import('./spreadsheet.js')).parseXlsx(bytes, limits);
    case 'text/csv':
    case 'text/tab-separated-values':
      return { pageCount: null, blocks: csvBlocks(decodeTextOrThrow(bytes)) };
    case 'application/json':
      return { pageCount: null, blocks: jsonBlocks(decodeTextOrThrow(bytes)) };
    case 'text/plain':
      return { pageCount: null, blocks: plainTextBlocks(decodeTextOrThrow(bytes)) };
    case RTF_TYPE:
      return (await import('./office.js')).parseOffice(bytes, 'rtf', limits.maxUnpackedBytes, pictureReading(limits, hooks));
    default: {
      const format = officeFormats[type];
      if (!format) throw new ParseError(`unsupported document type ${String(type)}`);
      const what = format.toUpperCase();
      if (isCompoundFile(bytes)) throw encrypted(what);
      await checkUnpackedSize(bytes, limits.maxUnpackedBytes, what, { media: readsPictures(pictureReading(limits)) });
      return (await import('./office.js')).parseOffice(bytes, format, limits.maxUnpackedBytes, pictureReading(limits, hooks));
    }
  }
}

/** A file's pictures are read by OCR as a scan's pages are: as many at most, each reported as it starts. */
const pictureReading = (limits: ParseLimits, hooks: ParseHooks = {}): PictureReading => ({ ocr: limits.ocr, maxImages: limits.maxOcrPages, onImage: hooks.onOcrPage });

/** Office encrypts a file with a password by wrapping it in an OLE compound file (as it stores the old .doc and .xls). */
const encrypted = (what: string) =>
  new ParseError(`the ${what} is password-protected or in the older binary format; save it as a ${what} without a password and upload it again`);

/**
 * A DOCX through mammoth's HTML. Its pictures stay out of the HTML (megabytes of base64); with
 * OCR on, each is numbered there and its bytes kept aside, up to as many as OCR may read, and
 * their text is read where they stand (image-text.ts).
 */
async function docxBlocks(bytes: Uint8Array, images: PictureReading): Promise<ParsedBlock[]> {
  const readImages = readsPictures(images);
  const pictureBytes: Buffer[] = [];
  // A picture shown several times (a letterhead's logo) is one picture, read once.
  const pictureByHash = new Map<string, number>();
  let html: string;
  try {
    const result = await mammoth.convertToHtml(
      { buffer: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) },
      {
        externalFileAccess: false,
        convertImage: mammoth.images.imgElement(async (image) => {
          if (!readImages) return { src: '' };
          const picture = await image.readAsBuffer();
          const hash = createHash('sha256').update(picture).digest('hex');
          let number = pictureByHash.get(hash);
          if (number === undefined) {
            if (pictureBytes.length >= images.maxImages) return { src: '' };
            number = pictureBytes.push(picture) - 1;
            pictureByHash.set(hash, number);
          }
          return { src: '', [PICTURE_ATTRIBUTE]: String(number) };
        }),
      },
    );
    html = result.value;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new ParseError(`not a readable DOCX: ${message}`);
  }
  const pictures = new Map<ParsedBlock, string>();
  const blocks = htmlFragmentBlocks(html, pictures);
  if (pictures.size > 0) {
    const { readPictures } = await import('./image-text.js');
    const found = [...pictures].map(([block, key]) => ({ block, key, bytes: () => new Uint8Array(pictureBytes[Number(key)]!) }));
    await readPictures(found, images);
  }
  return blocks;
}

function readHtml(html: string): ParsedBlock[] {
  try {
    return htmlPageBlocks(html);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new ParseError(`not a readable HTML document: ${message}`);
  }
}
