export type DocumentType =
  | 'application/pdf'
  | 'application/vnd.openxmlformats-officedocument.wordprocessingml.document'
  | 'text/html'
  | 'text/markdown'
  | 'text/plain'
  | 'text/csv'
  | 'text/tab-separated-values'
  | 'application/json'
  | 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'
  | 'application/vnd.openxmlformats-officedocument.presentationml.presentation'
  | 'application/epub+zip'
  | 'application/vnd.oasis.opendocument.text'
  | 'application/vnd.oasis.opendocument.presentation'
  | 'application/vnd.oasis.opendocument.spreadsheet'
  | 'image/png'
  | 'image/jpeg'
  | 'image/webp'
  | 'image/tiff'
  | 'application/rtf';

export const documentTypes: readonly DocumentType[] = [
  'application/pdf',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  'text/html',
  'text/markdown',
  'text/plain',
  'text/csv',
  'text/tab-separated-values',
  'application/json',
  'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  'application/epub+zip',
  'application/vnd.oasis.opendocument.text',
  'application/vnd.oasis.opendocument.presentation',
  'application/vnd.oasis.opendocument.spreadsheet',
  'image/png',
  'image/jpeg',
  'image/webp',
  'image/tiff',
  'application/rtf',
];

/** What separates the cells of a table's row on its line, in every format that has tables of cells. */
export const CELL_SEPARATOR = ' | ';

export const DOCX_TYPE = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';
export const XLSX_TYPE = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';
export const PPTX_TYPE = 'application/vnd.openxmlformats-officedocument.presentationml.presentation';
export const EPUB_TYPE = 'application/epub+zip';
export const ODT_TYPE = 'application/vnd.oasis.opendocument.text';
export const RTF_TYPE = 'application/rtf';
export const ODP_TYPE = 'application/vnd.oasis.opendocument.presentation';
export const ODS_TYPE = 'application/vnd.oasis.opendocument.spreadsheet';

/** Where a spreadsheet block's rows are: its sheet, the columns that hold something, and each row's number. */
export type SheetLocation = { name: string; firstColumn: string; lastColumn: string; headerRow: number | null; rows: number[] };

export type ParsedBlock = {
  kind: 'heading' | 'text';
  text: string;
  /** 1-based page number for paginated formats (PDF), otherwise null. */
  page: number | null;
  /** Headings in force at this block, outermost first; a heading block's path ends with itself. */
  headingPath: string[];
  /** Heading level 1..6, only on heading blocks. */
  level?: number;
  /**
   * Set on a table: its text holds one row a line and begins with this header (its caption and
   * column titles, whole lines). A table split across chunks repeats it at the start of each.
   */
  tableHeader?: string;
  /** Set on a spreadsheet's rows: `rows` holds the number of each line after the header, in order. */
  sheet?: SheetLocation;
  /** Set on text read by OCR: the mean confidence of its words, 0 to 100. */
  ocrConfidence?: number;
};

export type ParsedDocument = {
  text: string;
  pageCount: number | null;
  blocks: ParsedBlock[];
  /** The title the file gives itself in its metadata (a PDF's Title), if any. */
  metadataTitle?: string | null;
};

/**
 * Seconds one page or image may take to be read by OCR; a scan that takes longer is not a text
 * page. Each page read so adds as much to its document's parse time allowance (parse-job.ts).
 */
export const ocrPageSeconds = 60;

/** A document that cannot be turned into text; the message is shown to users as the document's error. */
export class ParseError extends Error {
  override name = 'ParseError';
}

/** How the pictures inside a document are read: by OCR in this language (null: they are not), at most `maxImages` of them, each reported as it starts. */
export type PictureReading = { ocr: { language: string } | null; maxImages: number; onImage?: (image: number, images: number) => void };

/** Whether a document's pictures are unpacked and read. */
export const readsPictures = (reading: PictureReading) => reading.ocr !== null && reading.maxImages > 0;

/** A document whose text passes `KB_MAX_TEXT_CHARACTERS`, found once parsed or, for a workbook, at the row that passes it. */
export const textTooLong = (limit: number) => new ParseError(`the document's text is longer than the limit of ${limit.toLocaleString('en')} characters`);
