import type { ChunkMetadata, PageStart, RowStart } from './chunk.js';
import { rowOf, type Piece } from './chunk-pieces.js';

/** Whether a chunk holds text read by OCR, and the mean confidence of those pieces' words (weighted by length). */
export function ocrOf(pieces: Piece[]): Pick<ChunkMetadata, 'ocr' | 'ocrConfidence'> {
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
export function cellsOf(pieces: Piece[]): Pick<ChunkMetadata, 'sheet' | 'range' | 'rowStarts'> {
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
export function pageStartsOf(pieces: Piece[]): PageStart[] {
  const offsets = pieceStarts(pieces);
  const starts: PageStart[] = [];
  pieces.forEach((piece, index) => {
    if (piece.page === null || piece.page === starts.at(-1)?.page) return;
    starts.push({ page: piece.page, offset: offsets[index]! });
  });
  return starts;
}
