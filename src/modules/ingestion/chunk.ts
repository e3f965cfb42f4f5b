import { blockPiece, joinPieces, overlapFrom, splitPiece, tableHeaderPiece, type Piece } from './chunk-pieces.js';
import { cellsOf, ocrOf, pageStartsOf } from './chunk-metadata.js';
import { countTokens } from './tokens.js';
import type { ParsedDocument } from './types.js';

export type ChunkOptions = { chunkTokens: number; overlapTokens: number };

export type DocumentChunk = {
  chunkIndex: number;
  content: string;
  tokenCount: number;
  metadata: ChunkMetadata;
};

/**
 * Where a chunk comes from. `pageStarts`, for a chunk that spans pages, says where in `content`
 * each page's text begins (in reading order), so a quote can be given its own page.
 */
export type ChunkMetadata = {
  page: number | null;
  pages: number[];
  headings: string[];
  pageStarts?: PageStart[];
  /** Text read by OCR (a scanned page): `ocr` is true and `ocrConfidence` the mean confidence of its words, 0 to 100. */
  ocr?: true;
  ocrConfidence?: number;
  /** A spreadsheet's chunk: its sheet, the cells its rows span (`B4:F19`), and where each row begins in `content`. */
  sheet?: string;
  range?: string;
  rowStarts?: RowStart[];
};
export type PageStart = { page: number; offset: number };
export type RowStart = { row: number; offset: number };

export const defaultChunkOptions: ChunkOptions = { chunkTokens: 512, overlapTokens: 64 };

/** Smallest chunk size accepted; below it headings alone would not fit. */
export const MINIMUM_CHUNK_TOKENS = 16;

/**
 * Cuts a parsed document into chunks of at most `chunkTokens` tokens (o200k_base, as counted by
 * gpt-tokenizer). Whole blocks are packed in reading order; a block is only split when it is
 * larger than a chunk by itself (at line ends, then sentence ends, then between tokens). A heading
 * closes the chunk before it and stays with the text that follows. Within a section, each chunk
 * after the first starts with the last whole sentences of the previous chunk, at most
 * `overlapTokens` tokens of them; a chunk that starts at a heading has no overlap.
 */
export function chunkDocument(doc: ParsedDocument, options: ChunkOptions = defaultChunkOptions): DocumentChunk[] {
  validateOptions(options);
  const { chunkTokens, overlapTokens } = options;
  const chunks: DocumentChunk[] = [];

  const queue: Piece[] = [];
  // A header that would take much of a chunk is not worth repeating: such a block is cut as text.
  const headerLimit = Math.floor(chunkTokens / 4);
  for (let index = doc.blocks.length - 1; index >= 0; index--) queue.push(blockPiece(doc.blocks[index]!, headerLimit));
  // `queue` is a stack: the next piece is at the end, so splitting a piece pushes its parts back.
  const pushFront = (pieces: Piece[]) => {
    for (let index = pieces.length - 1; index >= 0; index--) queue.push(pieces[index]!);
  };

  let current: Piece[] = [];
  let currentTokens = 0;
  const hasNewText = () => current.some((piece) => !piece.isOverlap && !piece.isHeading);
  const hasNewContent = () => current.some((piece) => !piece.isOverlap);
  const recount = () => {
    currentTokens = current.length === 0 ? 0 : countTokens(joinPieces(current));
  };

  const finishChunk = (withOverlap: boolean) => {
    if (!hasNewContent()) {
      current = [];
      currentTokens = 0;
      return;
    }
    // The running count is an estimate made piece by piece; the exact count of the joined text
    // decides. Overlap goes first, then trailing pieces go back to the queue for the next chunk.
    let content = joinPieces(current);
    let tokenCount = countTokens(content);
    const returned: Piece[] = [];
    while (tokenCount > chunkTokens && current.length > 1) {
      if (current[0]!.isOverlap) current.shift();
      else returned.unshift(current.pop()!);
      content = joinPieces(current);
      tokenCount = countTokens(content);
    }
    if (content === '') {
      // Whitespace alone (a run of carriage returns cut by tokens) makes no chunk.
      current = [];
      recount();
      pushFront(returned);
      return;
    }
    const pages = [...new Set(current.map((piece) => piece.page).filter((page) => page !== null))].sort((a, b) => a - b);
    const metadata: ChunkMetadata = { page: pages[0] ?? null, pages, headings: [...current[0]!.headingPath], ...ocrOf(current), ...cellsOf(current) };
    if (pages.length > 1) metadata.pageStarts = pageStartsOf(current);
    chunks.push({ chunkIndex: chunks.length, content, tokenCount, metadata });
    current = withOverlap && overlapTokens > 0 ? overlapFrom(current, overlapTokens) : [];
    recount();
    pushFront(returned);
  };

  for (;;) {
    if (queue.length === 0) {
      // Finishing may hand pieces back: the joined text can count more tokens than its parts did.
      finishChunk(false);
      if (queue.length === 0) break;
    }
    let piece = queue.pop()!;
    if (piece.isHeading && piece.granularity === 'block') {
      if (hasNewText()) finishChunk(false);
      else if (!hasNewContent()) {
        current = [];
        currentTokens = 0;
      }
    }

    if (piece.tableHeader !== null && piece.granularity === 'block' && countTokens(piece.text) >= chunkTokens / 2) {
      // A large table (a financial statement) starts a chunk of its own, without overlap; only
      // the headings just before it stay with it.
      if (hasNewText()) finishChunk(false);
      else if (!hasNewContent()) {
        current = [];
        currentTokens = 0;
      }
    }
    if (piece.tableHeader !== null && piece.granularity !== 'block' && !piece.isTableHeader && !hasNewContent()) {
      // A chunk that starts inside a table starts with the table's header instead of overlap.
      const header = tableHeaderPiece(piece.tableHeader, piece);
      // Counted as the check below counts, so that the row is then taken and the header kept.
      const fits = countTokens(header.text) + countTokens(piece.joiner + piece.text) <= chunkTokens;
      if (fits && !current.some((held) => held.isTableHeader && held.tableHeader === piece.tableHeader)) {
        current = [header];
        recount();
        // A row cut by sentences or tokens goes on under the header, on a line of its own.
        piece = { ...piece, joiner: '\n' };
      }
    }

    const cost = current.length === 0 ? countTokens(piece.text.trimStart()) : countTokens(piece.joiner + piece.text);
    if (currentTokens + cost <= chunkTokens) {
      current.push(piece);
      currentTokens += cost;
      continue;
    }

    if (current.length > 0 && !hasNewContent()) {
      // Only overlap so far: give up overlap, oldest first, to make room for new text.
      current.shift();
      recount();
      queue.push(piece);
      continue;
    }
    if (current.length > 0 && !hasNewText()) {
      // Only headings so far: cut this piece so that its beginning stays with them.
      const budget = chunkTokens - currentTokens - countTokens(piece.joiner);
      const parts = splitPiece(piece, budget, chunkTokens);
      if (parts && countTokens(parts[0]!.joiner + parts[0]!.text) + currentTokens <= chunkTokens) {
        pushFront(parts);
        continue;
      }
      if (parts && parts[0]!.granularity !== 'token') {
        // The first part is still too large; the next round splits it further.
        pushFront(parts);
        continue;
      }
      queue.push(piece);
      finishChunk(false);
      continue;
    }
    if (current.length === 0) {
      // Larger than a chunk on its own. It was measured without its leading whitespace, as a chunk
      // starts, so it is split that way too: measured with it, it could fit and not be split at all.
      pushFront(splitPiece({ ...piece, text: piece.text.trimStart() }, chunkTokens, chunkTokens) ?? []);
      continue;
    }
    queue.push(piece);
    finishChunk(true);
  }
  return chunks;
}

function validateOptions({ chunkTokens, overlapTokens }: ChunkOptions): void {
  if (!Number.isInteger(chunkTokens) || chunkTokens < MINIMUM_CHUNK_TOKENS) {
    throw new RangeError(`chunkTokens must be an integer of at least ${MINIMUM_CHUNK_TOKENS}, got ${chunkTokens}`);
  }
  if (!Number.isInteger(overlapTokens) || overlapTokens < 0 || overlapTokens >= chunkTokens) {
    throw new RangeError(`overlapTokens must be an integer from 0 to chunkTokens - 1, got ${overlapTokens}`);
  }
}
