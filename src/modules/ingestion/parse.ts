import mammoth from 'mammoth';
import { checkUnpackedSize } from './archive.js';
import { htmlFragmentBlocks, htmlPageBlocks } from './html.js';
import { markdownBlocks } from './markdown.js';
import { parsePdf } from './pdf.js';
import { csvBlocks, decodeTextOrThrow, jsonBlocks, plainTextBlocks } from './text.js';
import { ParseError, type DocumentType, type ParsedBlock, type ParsedDocument } from './types.js';

export { ParseError } from './types.js';
export type { DocumentType, ParsedBlock, ParsedDocument } from './types.js';

/**
 * Extracts the text of a document as heading and text blocks in reading order. Throws ParseError,
 * whose message is meant for the document's owner, when the file cannot be read or holds no text.
 */
export async function parseDocument(bytes: Uint8Array, type: DocumentType, limits: ParseLimits = defaultParseLimits): Promise<ParsedDocument> {
  if (bytes.length === 0) throw new ParseError('the document contains no text');
  const parsed = await parseByType(bytes, type, limits);
  const blocks = parsed.blocks
    .map((block) => ({ ...block, text: storableText(block.text), headingPath: block.headingPath.map(storableText) }))
    .filter((block) => block.text.trim() !== '');
  if (blocks.length === 0) throw new ParseError('the document contains no text');
  const text = blocks.map((block) => block.text).join('\n\n');
  if (text.length > limits.maxTextCharacters) {
    throw new ParseError(`the document's text is longer than the limit of ${limits.maxTextCharacters.toLocaleString('en')} characters`);
  }
  return { text, pageCount: parsed.pageCount, blocks, metadataTitle: parsed.metadataTitle ? storableText(parsed.metadataTitle) : null };
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
};

export const defaultParseLimits: ParseLimits = { maxUnpackedBytes: 64 * 1024 * 1024, maxTextCharacters: 10_000_000 };

async function parseByType(bytes: Uint8Array, type: DocumentType, limits: ParseLimits): Promise<Omit<ParsedDocument, 'text'>> {
  switch (type) {
    case 'application/pdf':
      return parsePdf(bytes);
    case 'application/vnd.openxmlformats-officedocument.wordprocessingml.document':
      await checkUnpackedSize(bytes, limits.maxUnpackedBytes, 'DOCX');
      return { pageCount: null, blocks: await docxBlocks(bytes) };
    case 'text/html':
      return { pageCount: null, blocks: readHtml(decodeTextOrThrow(bytes)) };
    case 'text/markdown':
      return { pageCount: null, blocks: markdownBlocks(decodeTextOrThrow(bytes)) };
    case 'text/csv':
      return { pageCount: null, blocks: csvBlocks(decodeTextOrThrow(bytes)) };
    case 'application/json':
      return { pageCount: null, blocks: jsonBlocks(decodeTextOrThrow(bytes)) };
    case 'text/plain':
      return { pageCount: null, blocks: plainTextBlocks(decodeTextOrThrow(bytes)) };
    default:
      throw new ParseError(`unsupported document type ${String(type)}`);
  }
}

async function docxBlocks(bytes: Uint8Array): Promise<ParsedBlock[]> {
  let html: string;
  try {
    const result = await mammoth.convertToHtml(
      { buffer: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) },
      {
        externalFileAccess: false,
        // Images carry no text; dropping them keeps megabytes of base64 out of the HTML.
        convertImage: mammoth.images.imgElement(async () => ({ src: '' })),
      },
    );
    html = result.value;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new ParseError(`not a readable DOCX: ${message}`);
  }
  return htmlFragmentBlocks(html);
}

function readHtml(html: string): ParsedBlock[] {
  try {
    return htmlPageBlocks(html);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new ParseError(`not a readable HTML document: ${message}`);
  }
}
