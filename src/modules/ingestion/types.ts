export type DocumentType =
  | 'application/pdf'
  | 'application/vnd.openxmlformats-officedocument.wordprocessingml.document'
  | 'text/html'
  | 'text/markdown'
  | 'text/plain'
  | 'text/csv'
  | 'application/json';

export const documentTypes: readonly DocumentType[] = [
  'application/pdf',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  'text/html',
  'text/markdown',
  'text/plain',
  'text/csv',
  'application/json',
];

export const DOCX_TYPE = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';

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
};

export type ParsedDocument = {
  text: string;
  pageCount: number | null;
  blocks: ParsedBlock[];
  /** The title the file gives itself in its metadata (a PDF's Title), if any. */
  metadataTitle?: string | null;
};

/** A document that cannot be turned into text; the message is shown to users as the document's error. */
export class ParseError extends Error {
  override name = 'ParseError';
}
