import type { TextItem, TextMarkedContent } from 'pdfjs-dist/types/src/display/api.js';
import { HeadingTrail } from './heading-trail.js';
import { joinLines } from './text.js';
import { isTableRow, isYearsRow } from './table-rows.js';
import type { ParsedBlock } from './types.js';

type PositionedText = { text: string; x: number; y: number; width: number; size: number; endsLine: boolean };
type Line = { text: string; y: number; size: number };
/**
 * A table's paragraph has one row a line; its first `headerLines` lines are its caption and
 * column titles. A paragraph read by OCR has `ocrConfidence`, its words' mean confidence.
 */
export type Paragraph = { lines: Line[]; size: number; page: number; headerLines?: number; ocrConfidence?: number };

function isTextItem(item: TextItem | TextMarkedContent): item is TextItem {
  return 'str' in item;
}

export function pageParagraphs(items: (TextItem | TextMarkedContent)[], page: number): Paragraph[] {
  const pieces: PositionedText[] = [];
  for (const item of items) {
    if (!isTextItem(item)) continue;
    const [scaleX = 0, skewY = 0, skewX = 0, scaleY = 0, x = 0, y = 0] = item.transform as number[];
    const size = item.height > 0 ? item.height : Math.hypot(skewX, scaleY) || Math.hypot(scaleX, skewY);
    // Private-use code points are symbol-font glyphs (list bullets, dingbats) with no meaning as text.
    const text = item.str.replace(/[\uE000-\uF8FF]/g, '');
    pieces.push({ text, x, y, width: item.width, size, endsLine: item.hasEOL });
  }
  const lines = piecesToLines(pieces);
  const paragraphs: Paragraph[] = [];
  let proseStart = 0;
  for (const table of findTables(lines)) {
    paragraphs.push(...linesToParagraphs(lines.slice(proseStart, table.start), page));
    const rows = lines.slice(table.start, table.end);
    paragraphs.push({ lines: rows, size: rows[table.headerLines]?.size ?? rows[0]!.size, page, headerLines: table.headerLines });
    proseStart = table.end;
  }
  paragraphs.push(...linesToParagraphs(lines.slice(proseStart), page));
  return paragraphs;
}

/** A short line without figures inside a table: a section's label ("Current assets:"). */
const isRowLabel = (line: Line) => line.text.length <= 120 && /\p{L}/u.test(line.text) && !/[.!?]$/.test(line.text);

/** A short line that can title a table: not a sentence (which ends a paragraph and has many words). */
const isCaptionLine = (line: Line) => line.text.length <= 200 && !(/[.!?]$/.test(line.text) && line.text.split(' ').length > 8);

/**
 * Tables of a page, as line ranges: runs of at least three rows (section labels between rows
 * belong to them), with up to six caption lines before them and a row of years at their top
 * counted as the header.
 */
function findTables(lines: readonly Line[]): { start: number; end: number; headerLines: number }[] {
  const tables: { start: number; end: number; headerLines: number }[] = [];
  let index = 0;
  while (index < lines.length) {
    if (!isTableRow(lines[index]!.text)) {
      index++;
      continue;
    }
    const first = index;
    let last = index;
    let rows = 0;
    let next = index;
    while (next < lines.length) {
      if (isTableRow(lines[next]!.text)) {
        rows++;
        last = next;
        next++;
      } else if (isRowLabel(lines[next]!) && lines.slice(next + 1, next + 3).some((line) => isTableRow(line.text))) {
        next++;
      } else break;
    }
    index = last + 1;
    if (rows < 3) continue;
    const previousEnd = tables.at(-1)?.end ?? 0;
    let start = first;
    while (start > previousEnd && first - start < 6 && !isTableRow(lines[start - 1]!.text) && isCaptionLine(lines[start - 1]!)) start--;
    let headerLines = first - start;
    if (isYearsRow(lines[first]!.text)) headerLines++;
    tables.push({ start, end: last + 1, headerLines });
  }
  return tables;
}

/**
 * Groups text runs into lines. A run starts a new line when the previous run ended one (hasEOL)
 * or when it sits at a clearly different height. Inside a line, runs are ordered left to right
 * and a space is inserted where the horizontal gap between them is wider than a thin space.
 */
function piecesToLines(pieces: PositionedText[]): Line[] {
  const lines: Line[] = [];
  let current: PositionedText[] = [];
  let lineBreakPending = false;

  const finishLine = () => {
    const visible = current.filter((piece) => piece.text.trim() !== '');
    if (visible.length > 0) {
      const ordered = [...current].sort((a, b) => a.x - b.x);
      let text = '';
      let previousEnd: number | null = null;
      for (const piece of ordered) {
        const isBlank = piece.text.trim() === '';
        if (isBlank) {
          if (text !== '' && !text.endsWith(' ')) text += ' ';
        } else {
          const gap = previousEnd === null ? 0 : piece.x - previousEnd;
          if (text !== '' && !text.endsWith(' ') && !/^\s/.test(piece.text) && gap > piece.size * 0.15) text += ' ';
          text += piece.text;
        }
        previousEnd = Math.max(previousEnd ?? -Infinity, piece.x + piece.width);
      }
      const size = Math.max(...visible.map((piece) => piece.size));
      lines.push({ text: text.replace(/\s+/g, ' ').trim(), y: visible[0]!.y, size });
    }
    current = [];
  };

  for (const piece of pieces) {
    const anchor = current.find((candidate) => candidate.text.trim() !== '') ?? current[0];
    const tolerance = Math.max(piece.size, anchor?.size ?? 0) * 0.5;
    if (anchor && (lineBreakPending || Math.abs(piece.y - anchor.y) > tolerance)) finishLine();
    lineBreakPending = piece.endsLine;
    // Empty runs only mark positions (pdf.js puts one with hasEOL before a new line's first run).
    if (piece.text !== '') current.push(piece);
  }
  finishLine();
  return lines;
}

/**
 * Splits a page's lines into paragraphs on vertical gaps clearly larger than the paragraph's own
 * line spacing, on jumps back up the page (next column, table cell) and on font size changes.
 */
function linesToParagraphs(lines: Line[], page: number): Paragraph[] {
  const paragraphs: Paragraph[] = [];
  let current: Paragraph | null = null;
  let lineSpacing: number | null = null;

  for (const line of lines) {
    if (current) {
      const previous = current.lines[current.lines.length - 1]!;
      const gap = previous.y - line.y;
      const size = Math.max(previous.size, line.size);
      const sizeChanged = Math.max(previous.size, line.size) / Math.min(previous.size, line.size) > 1.2;
      const normalGap = lineSpacing === null ? size * 1.75 : Math.max(lineSpacing * 1.4, size * 1.1);
      const startsNew = sizeChanged || gap < -size * 0.5 || gap > normalGap;
      if (!startsNew) {
        if (gap > size * 0.5) lineSpacing = lineSpacing === null ? gap : Math.min(lineSpacing, gap);
        current.lines.push(line);
        continue;
      }
      paragraphs.push(current);
    }
    current = { lines: [line], size: line.size, page };
    lineSpacing = null;
  }
  if (current) paragraphs.push(current);
  return paragraphs;
}

function paragraphText(paragraph: Paragraph): string {
  if (paragraph.headerLines !== undefined) return paragraph.lines.map((line) => line.text).join('\n');
  return joinLines(paragraph.lines.map((line) => line.text));
}

/**
 * Headings are inferred from type size: short paragraphs set clearly larger than the body text
 * (the size carrying the most characters) become headings, the largest size being level 1.
 */
export function paragraphsToBlocks(paragraphs: Paragraph[]): ParsedBlock[] {
  const charactersBySize = new Map<number, number>();
  for (const paragraph of paragraphs) {
    const size = Math.round(paragraph.size);
    const characters = paragraph.lines.reduce((total, line) => total + line.text.length, 0);
    charactersBySize.set(size, (charactersBySize.get(size) ?? 0) + characters);
  }
  const bodySize = [...charactersBySize.entries()].sort((a, b) => b[1] - a[1])[0]?.[0] ?? 0;

  const isHeading = (paragraph: Paragraph, text: string) =>
    paragraph.headerLines === undefined &&
    Math.round(paragraph.size) >= bodySize * 1.25 && paragraph.lines.length <= 3 && text.length <= 200 && /\p{L}/u.test(text);

  const headingSizes = [
    ...new Set(paragraphs.filter((p) => isHeading(p, paragraphText(p))).map((p) => Math.round(p.size))),
  ].sort((a, b) => b - a);

  const headings = new HeadingTrail();
  let headingPath: string[] = [];
  const blocks: ParsedBlock[] = [];
  for (const paragraph of paragraphs) {
    const text = paragraphText(paragraph);
    if (isHeading(paragraph, text)) {
      const level = Math.min(headingSizes.indexOf(Math.round(paragraph.size)) + 1, 6);
      headingPath = headings.enter(level, text);
      blocks.push({ kind: 'heading', text, page: paragraph.page, headingPath, level, ...(paragraph.ocrConfidence !== undefined && { ocrConfidence: paragraph.ocrConfidence }) });
    } else if (paragraph.headerLines) {
      const tableHeader = paragraph.lines.slice(0, paragraph.headerLines).map((line) => line.text).join('\n');
      blocks.push({ kind: 'text', text, page: paragraph.page, headingPath, tableHeader });
    } else {
      blocks.push({ kind: 'text', text, page: paragraph.page, headingPath, ...(paragraph.ocrConfidence !== undefined && { ocrConfidence: paragraph.ocrConfidence }) });
    }
  }
  return blocks;
}
