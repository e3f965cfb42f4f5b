import { OfficeParser, type OfficeAttachment, type OfficeContentNode } from 'officeparser';
import { maxArchiveEntries } from './archive.js';
import { HeadingTrail } from './heading-trail.js';
import { CELL_SEPARATOR, ParseError, readsPictures, type ParsedBlock, type ParsedDocument, type PictureReading } from './types.js';

/** The formats read with officeparser, by the name its configuration and this service's messages use. */
export type OfficeFormat = 'pptx' | 'epub' | 'odt' | 'odp' | 'ods' | 'rtf';

/** The heading that marks a slide's speaker notes in its chunks' heading trail. */
const speakerNotesHeading = 'Speaker notes';


/**
 * Slides, e-books, OpenDocument and rich-text files as blocks, read with officeparser: a presentation's
 * slides are its pages (the slide's title its heading, text in reading order, tables one row a
 * line under their header row, speaker notes last under "Speaker notes"); an e-book's chapters
 * and an ODT's or RTF's headings make the heading trail. With OCR on, the text of its pictures
 * (a pasted scan, a screenshot) is read where the picture stands (image-text.ts).
 */
export async function parseOffice(
  bytes: Uint8Array,
  format: OfficeFormat,
  maxUnpackedBytes: number,
  images: PictureReading = { ocr: null, maxImages: 0 },
): Promise<Omit<ParsedDocument, 'text'>> {
  let ast;
  const readImages = readsPictures(images);
  try {
    ast = await OfficeParser.parseOffice(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), {
      fileType: format,
      ocr: false,
      extractAttachments: readImages,
      ignoreNotes: false,
      includeRawContent: false,
      decompressionLimits: { maxUncompressedBytes: maxUnpackedBytes, maxZipEntries: maxArchiveEntries },
    });
  } catch (error) {
    throw unreadable(format, error, maxUnpackedBytes);
  }
  const reader = new BlockReader();
  for (const node of ast.content) reader.read(node);
  if (readImages) {
    const attachments = new Map<string, OfficeAttachment>((ast.attachments ?? []).map((attachment) => [attachment.name, attachment]));
    const { readPictures } = await import('./image-text.js');
    const pictures = reader.pictures.flatMap(({ block, attachmentName }) => {
      const attachment = attachments.get(attachmentName);
      return attachment ? [{ block, key: attachmentName, bytes: () => new Uint8Array(Buffer.from(attachment.data, 'base64')) }] : [];
    });
    await readPictures(pictures, images);
  }
  const slides = ast.content.filter((node) => node.type === 'slide').length;
  const title = typeof ast.metadata?.title === 'string' ? ast.metadata.title.trim() : '';
  return { pageCount: slides > 0 ? slides : null, blocks: reader.blocks, metadataTitle: title === '' ? null : title };
}

function unreadable(format: OfficeFormat, error: unknown, maxUnpackedBytes: number): ParseError {
  const what = format.toUpperCase();
  const code = (error as { code?: unknown; type?: unknown } | null)?.type ?? (error as { code?: unknown } | null)?.code;
  // officeparser's own words, less its name and its request to report the file upstream.
  const message = (error instanceof Error ? error.message : String(error)).replace(/^\[OfficeParser\]:?\s*/, '').replace(/\s*If you are sure it is fine[\s\S]*$/, '');
  if (typeof code === 'string' && /UNCOMPRESSED|ZIP_ENTR|XML_ELEMENT/.test(code)) {
    return new ParseError(`the ${what} unpacks to more than the limit of ${Math.round(maxUnpackedBytes / 1024 / 1024)} MB`);
  }
  if (/password|encrypt/i.test(message)) return new ParseError(`the ${what} is password-protected`);
  return new ParseError(`not a readable ${what}: ${message}`);
}

/** Walks officeparser's tree in reading order, keeping the heading trail and the slide being read. */
class BlockReader {
  readonly blocks: ParsedBlock[] = [];
  /** Where each picture stands: an empty block its text, if any, fills (readPictures). */
  readonly pictures: { block: ParsedBlock; attachmentName: string }[] = [];
  private trail = new HeadingTrail();
  private page: number | null = null;

  read(node: OfficeContentNode): void {
    switch (node.type) {
      case 'slide':
        return this.slide(node);
      case 'heading': {
        const text = textOf(node);
        if (text === '') return;
        const level = Math.min(6, Math.max(1, Number((node.metadata as { level?: unknown } | undefined)?.level) || 1));
        this.blocks.push({ kind: 'heading', text, page: this.page, headingPath: this.trail.enter(level, text), level });
        return;
      }
      case 'table':
        return this.table(node);
      case 'list':
        return this.text((node.children ?? []).map(textOf).filter((item) => item !== '').join('\n'));
      case 'note':
        return this.text(textOf(node));
      case 'sheet':
        return this.sheet(node);
      case 'image': {
        const attachmentName = (node.metadata as { attachmentName?: unknown } | undefined)?.attachmentName;
        if (typeof attachmentName !== 'string') return;
        const block: ParsedBlock = { kind: 'text', text: '', page: this.page, headingPath: this.trail.path() };
        this.blocks.push(block);
        this.pictures.push({ block, attachmentName });
        return;
      }
      case 'chart':
      case 'drawing':
      case 'break':
      case 'comment':
      case 'header':
      case 'footer':
      case 'slideMaster':
        return;
      default:
        if (node.children && node.children.some((child) => child.type !== 'text')) {
          for (const child of node.children) this.read(child);
          return;
        }
        return this.text(textOf(node));
    }
  }

  private text(text: string): void {
    if (text.trim() === '') return;
    this.blocks.push({ kind: 'text', text, page: this.page, headingPath: this.trail.path() });
  }

  /** A slide is a page: its title opens the trail afresh, and its speaker notes come last, marked. */
  private slide(node: OfficeContentNode): void {
    const number = Number((node.metadata as { slideNumber?: unknown } | undefined)?.slideNumber);
    this.page = Number.isInteger(number) && number > 0 ? number : (this.page ?? 0) + 1;
    this.trail = new HeadingTrail();
    const notes = new Set([...(node.children ?? []).filter((child) => child.type === 'note'), ...((node as { notes?: OfficeContentNode[] }).notes ?? [])]);
    for (const child of node.children ?? []) if (child.type !== 'note') this.read(child);
    // A notes page shows its slide's number in a placeholder of its own: that is no note.
    const spoken = [...notes]
      .flatMap((note) => textOf(note).split('\n'))
      .filter((line) => line !== '' && line !== String(this.page));
    if (spoken.length > 0) {
      // Under a heading of their own, below the slide's title: a chunk of their own, marked in its text and trail.
      const headingPath = this.trail.enter(2, speakerNotesHeading);
      this.blocks.push({ kind: 'heading', text: speakerNotesHeading, page: this.page, headingPath, level: 2 });
      this.blocks.push({ kind: 'text', text: spoken.join('\n'), page: this.page, headingPath });
    }
  }

  /** A table: one row a line, cells apart, under its first row as the header each chunk repeats. */
  private table(node: OfficeContentNode): void {
    const rows = (node.children ?? []).filter((row) => row.type === 'row').map((row) => (row.children ?? []).map(textOf).join(CELL_SEPARATOR));
    const lines = rows.filter((row) => row.replaceAll(CELL_SEPARATOR, '').trim() !== '');
    if (lines.length === 0) return;
    const [header, ...rest] = lines;
    this.blocks.push({ kind: 'text', text: lines.join('\n'), page: this.page, headingPath: this.trail.path(), ...(rest.length > 0 && { tableHeader: header }) });
  }

  /** An ODS sheet: its name as a heading, its rows as a table. */
  private sheet(node: OfficeContentNode): void {
    const name = String((node.metadata as { sheetName?: unknown } | undefined)?.sheetName ?? '').trim();
    if (name !== '') this.blocks.push({ kind: 'heading', text: name, page: null, headingPath: this.trail.enter(1, name), level: 1 });
    this.table(node);
  }
}

/** A node's text: its own, or its children's joined as the format lays them out (runs together, blocks a line each). */
function textOf(node: OfficeContentNode): string {
  return rawText(node).replace(/[ \t\f\v\u00a0]+/g, ' ').replace(/ *\n[\s]*/g, '\n').trim();
}

function rawText(node: OfficeContentNode): string {
  if (typeof node.text === 'string' && node.text.trim() !== '') return node.text;
  const children = node.children ?? [];
  const runs = children.every((child) => child.type === 'text');
  return children.map((child) => (runs ? (child.text ?? '') : textOf(child))).join(runs ? '' : '\n');
}
