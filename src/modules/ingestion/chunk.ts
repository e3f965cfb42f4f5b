import { countTokens, splitByTokens } from './tokens.js';
import type { ParsedBlock, ParsedDocument, SheetLocation } from './types.js';

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

/** How finely a piece of text has already been cut; each level splits into the next one. */
type Granularity = 'block' | 'line' | 'sentence' | 'token';

/**
 * The unit the chunker packs: a whole block, or a part of a block that was too large.
 * `joiner` is what separates it from the piece before it when both land in the same chunk.
 */
type Piece = {
  text: string;
  joiner: string;
  granularity: Granularity;
  isHeading: boolean;
  page: number | null;
  headingPath: string[];
  /** Copied from the end of the previous chunk, or a table's header repeated. */
  isOverlap: boolean;
  /** The header of the table this piece belongs to (see ParsedBlock.tableHeader). */
  tableHeader: string | null;
  /** This piece is that header. */
  isTableHeader: boolean;
  /** A spreadsheet's piece: its sheet, and the numbers of the rows it holds. */
  sheet: SheetLocation | null;
  rows: readonly number[];
  /** Read by OCR: its words' mean confidence. */
  ocrConfidence: number | null;
};

const BLOCK_SEPARATOR = '\n\n';

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

function blockPiece(block: ParsedBlock, headerLimit: number): Piece {
  const header = block.tableHeader?.trim();
  const isTable = header !== undefined && header !== '' && block.text.trimStart().startsWith(header) && countTokens(header) <= headerLimit;
  return {
    text: block.text,
    joiner: BLOCK_SEPARATOR,
    granularity: 'block',
    isHeading: block.kind === 'heading',
    page: block.page,
    headingPath: block.headingPath,
    isOverlap: false,
    tableHeader: isTable ? header : null,
    isTableHeader: false,
    sheet: block.sheet ?? null,
    rows: block.sheet?.rows ?? [],
    ocrConfidence: block.ocrConfidence ?? null,
  };
}

/** Whether a chunk holds text read by OCR, and the mean confidence of those pieces' words (weighted by length). */
function ocrOf(pieces: Piece[]): Pick<ChunkMetadata, 'ocr' | 'ocrConfidence'> {
  const read = pieces.filter((piece) => piece.ocrConfidence !== null && piece.text.trim() !== '');
  if (read.length === 0) return {};
  const characters = read.reduce((sum, piece) => sum + piece.text.length, 0);
  const confidence = read.reduce((sum, piece) => sum + piece.ocrConfidence! * piece.text.length, 0) / characters;
  return { ocr: true, ocrConfidence: Math.round(confidence * 10) / 10 };
}

/**
 * The sheet of a chunk's spreadsheet rows (those of its first sheet), the cells they span, and
 * where in the content each row begins, so that a quote can name its row.
 */
function cellsOf(pieces: Piece[]): Pick<ChunkMetadata, 'sheet' | 'range' | 'rowStarts'> {
  const sheet = pieces.find((piece) => !piece.isOverlap && piece.sheet !== null && piece.rows.length > 0)?.sheet;
  if (!sheet) return {};
  const offsets = pieceStarts(pieces);
  const rowStarts: RowStart[] = [];
  pieces.forEach((piece, index) => {
    if (piece.isOverlap || piece.sheet?.name !== sheet.name || piece.rows.length === 0) return;
    if (piece.granularity === 'sentence' || piece.granularity === 'token') {
      // A part of a row: its row began before it (in this chunk, or in the one before).
      if (rowStarts.length === 0) rowStarts.push({ row: piece.rows[0]!, offset: 0 });
      return;
    }
    // A whole block is its header line, then one line a row; a line is a row. A row starts where
    // its line does, leading spaces (an empty first cell) included unless the chunk begins there.
    const lead = piece.text.length - piece.text.trimStart().length;
    let offset = Math.max(0, offsets[index]! - lead);
    const lines = piece.text.slice(lead - (offsets[index]! - offset)).split('\n');
    lines.forEach((line, position) => {
      const rows = rowOf(piece, lines, position);
      if (rows.length === 1 && rowStarts.at(-1)?.row !== rows[0]) rowStarts.push({ row: rows[0]!, offset });
      offset += line.length + 1;
    });
  });
  const rows = pieces.filter((piece) => !piece.isOverlap && piece.sheet?.name === sheet.name).flatMap((piece) => piece.rows);
  return { sheet: sheet.name, range: `${sheet.firstColumn}${Math.min(...rows)}:${sheet.lastColumn}${Math.max(...rows)}`, rowStarts };
}

/** A table's header, repeated at the start of a chunk that continues the table. */
function tableHeaderPiece(header: string, row: Piece): Piece {
  return { ...row, text: header, joiner: '', granularity: 'line', isOverlap: true, tableHeader: header, isTableHeader: true, rows: [] };
}

/** Where each piece's text (without its leading whitespace) begins in `joinPieces(pieces)`. */
function pieceStarts(pieces: Piece[]): number[] {
  const parts = pieces.map((piece, index) => (index === 0 ? piece.text : piece.joiner + piece.text));
  const joined = parts.join('');
  const trimmed = joined.length - joined.trimStart().length;
  let offset = 0;
  return pieces.map((piece, index) => {
    const textStart = offset + (index === 0 ? 0 : piece.joiner.length) + (piece.text.length - piece.text.trimStart().length);
    offset += parts[index]!.length;
    return Math.max(0, textStart - trimmed);
  });
}

/** Where each page's text begins in `joinPieces(pieces)`: an entry wherever the page changes. */
function pageStartsOf(pieces: Piece[]): PageStart[] {
  const offsets = pieceStarts(pieces);
  const starts: PageStart[] = [];
  pieces.forEach((piece, index) => {
    if (piece.page === null || piece.page === starts.at(-1)?.page) return;
    starts.push({ page: piece.page, offset: offsets[index]! });
  });
  return starts;
}

function joinPieces(pieces: Piece[]): string {
  return pieces
    .map((piece, index) => (index === 0 ? piece.text : piece.joiner + piece.text))
    .join('')
    .trim();
}

/**
 * Splits a piece one level finer: lines, then sentences, then token runs. The first part is
 * made to fit `firstBudget` tokens where the split is by tokens; other parts fit `limit`.
 * Returns null when the piece cannot be split any further.
 */
function splitPiece(piece: Piece, firstBudget: number, limit: number): Piece[] | null {
  const derive = (text: string, index: number, granularity: Granularity): Piece => ({
    ...piece,
    text,
    granularity,
    joiner: index === 0 ? piece.joiner : granularity === 'line' ? '\n' : granularity === 'sentence' ? ' ' : '',
  });

  if (piece.granularity === 'block' && piece.tableHeader !== null) {
    // Whole rows, the header kept as one part: it is what a continuing chunk repeats.
    const rows = piece.text.trimStart().slice(piece.tableHeader.length).split('\n').filter((line) => line.trim() !== '');
    if (rows.length > 0) {
      return [{ ...derive(piece.tableHeader, 0, 'line'), isTableHeader: true, rows: [] }, ...rows.map((row, index) => ({ ...derive(row, index + 1, 'line'), rows: rowOf(piece, rows, index) }))];
    }
  }
  if (piece.granularity === 'block') {
    const lines = piece.text.split('\n').filter((line) => line.trim() !== '');
    if (lines.length > 1) return lines.map((line, index) => ({ ...derive(line, index, 'line'), rows: rowOf(piece, lines, index) }));
  }
  if (piece.granularity !== 'sentence' && piece.granularity !== 'token') {
    const sentences = splitSentences(piece.text);
    if (sentences.length > 1) return sentences.map((sentence, index) => derive(sentence, index, 'sentence'));
  }
  if (firstBudget < 1) return null;
  const runs = splitByTokens(piece.text, firstBudget, limit);
  if (runs.length <= 1 && countTokens(piece.text) <= firstBudget) return null;
  if (runs.length === 0) return null;
  return runs.map((run, index) => derive(run, index, 'token'));
}

/**
 * The spreadsheet rows of a piece's `index`th line of `lines`: one row a line, after the sheet's
 * header line when the piece starts with it; the piece's rows for every line when they do not
 * pair up so.
 */
function rowOf(piece: Piece, lines: readonly string[], index: number): readonly number[] {
  const skip = piece.sheet?.headerRow != null && lines.length === piece.rows.length + 1 ? 1 : 0;
  if (lines.length - skip !== piece.rows.length) return piece.rows;
  return index < skip ? [] : [piece.rows[index - skip]!];
}

const SENTENCE_END = /[.!?…][)\]"'”’»]*\s+(?=\S)|[。！？][)\]」』”’]*\s*(?=\S)|\n+(?=\S)/g;

/** Offsets where a sentence or a line begins, after the first one. */
function sentenceStarts(text: string): number[] {
  const starts: number[] = [];
  for (const match of text.matchAll(SENTENCE_END)) starts.push(match.index + match[0].length);
  return starts;
}

function splitSentences(text: string): string[] {
  const sentences: string[] = [];
  let start = 0;
  for (const end of [...sentenceStarts(text), text.length]) {
    const sentence = text.slice(start, end).trim();
    if (sentence !== '') sentences.push(sentence);
    start = end;
  }
  return sentences;
}

/**
 * The trailing whole sentences (or lines, or blocks) of a chunk, at most `overlapTokens` tokens,
 * as pieces for the start of the next chunk; none after a table.
 */
function overlapFrom(pieces: Piece[], overlapTokens: number): Piece[] {
  // Rows carried on would be out of place after a table, and inside one its header takes their place.
  if (pieces.at(-1)?.tableHeader != null) return [];
  let best: Piece[] = [];
  const tail: Piece[] = [];
  for (let index = pieces.length - 1; index >= 0; index--) {
    const piece = pieces[index]!;
    const starts = piece.isHeading || piece.granularity === 'token' ? [] : sentenceStarts(piece.text);
    for (const start of [...starts.reverse(), 0]) {
      const candidate: Piece[] = [{ ...piece, text: piece.text.slice(start), isOverlap: true }, ...tail];
      if (countTokens(joinPieces(candidate)) > overlapTokens) return best;
      best = candidate;
    }
    tail.unshift({ ...piece, isOverlap: true });
  }
  return best;
}
