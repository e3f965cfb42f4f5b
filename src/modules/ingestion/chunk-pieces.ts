import { countTokens, splitByTokens } from './tokens.js';
import type { ParsedBlock, SheetLocation } from './types.js';

/** How finely a piece of text has already been cut; each level splits into the next one. */
type Granularity = 'block' | 'line' | 'sentence' | 'token';

/**
 * The unit the chunker packs: a whole block, or a part of a block that was too large.
 * `joiner` is what separates it from the piece before it when both land in the same chunk.
 */
export type Piece = {
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

export function blockPiece(block: ParsedBlock, headerLimit: number): Piece {
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

/** A table's header, repeated at the start of a chunk that continues the table. */
export function tableHeaderPiece(header: string, row: Piece): Piece {
  return { ...row, text: header, joiner: '', granularity: 'line', isOverlap: true, tableHeader: header, isTableHeader: true, rows: [] };
}

export function joinPieces(pieces: Piece[]): string {
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
export function splitPiece(piece: Piece, firstBudget: number, limit: number): Piece[] | null {
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
export function rowOf(piece: Piece, lines: readonly string[], index: number): readonly number[] {
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
export function overlapFrom(pieces: Piece[], overlapTokens: number): Piece[] {
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
