import { HeadingTrail } from './heading-trail.js';
import type { ParsedBlock } from './types.js';

const FENCE_OPENING = /^ {0,3}(`{3,}|~{3,})/;
const ATX_HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const SETEXT_LEVEL_1 = /^ {0,3}=+[ \t]*$/;
const SETEXT_LEVEL_2 = /^ {0,3}-+[ \t]*$/;
const TABLE_DELIMITER_ROW = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;
const THEMATIC_BREAK = /^ {0,3}([-*_])([ \t]*\1){2,}[ \t]*$/;

/**
 * Splits Markdown into heading and text blocks. Only block structure is interpreted: paragraphs
 * keep their Markdown source (lists, tables, emphasis), fenced code stays one block including its
 * fences, and YAML front matter at the very start becomes an ordinary text block.
 */
export function markdownBlocks(source: string): ParsedBlock[] {
  const lines = source.split('\n');
  const blocks: ParsedBlock[] = [];
  const headings = new HeadingTrail();
  let headingPath: string[] = [];
  let paragraph: string[] = [];

  const pushText = (text: string, tableHeader?: string) => {
    if (text.trim() !== '') blocks.push({ kind: 'text', text, page: null, headingPath, ...(tableHeader !== undefined && { tableHeader }) });
  };
  const flushParagraph = () => {
    const text = paragraph.join('\n').replace(/^\n+|\n+$/g, '');
    // A pipe table: its header is the title row and the delimiter row under it.
    const [titles, delimiter] = text.split('\n');
    pushText(text, titles?.includes('|') && delimiter !== undefined && TABLE_DELIMITER_ROW.test(delimiter) ? `${titles}\n${delimiter}` : undefined);
    paragraph = [];
  };
  const pushHeading = (level: number, rawText: string) => {
    const text = rawText.replace(/\s+/g, ' ').trim();
    if (text === '') return;
    headingPath = headings.enter(level, text);
    blocks.push({ kind: 'heading', text, page: null, headingPath, level });
  };

  let lineIndex = 0;
  if (lines[0]?.trimEnd() === '---') {
    const closing = lines.findIndex((line, index) => index > 0 && /^(---|\.\.\.)\s*$/.test(line));
    if (closing > 0) {
      pushText(lines.slice(0, closing + 1).join('\n'));
      lineIndex = closing + 1;
    }
  }

  for (; lineIndex < lines.length; lineIndex++) {
    const line = lines[lineIndex]!.trimEnd();

    const fence = FENCE_OPENING.exec(line);
    if (fence) {
      flushParagraph();
      const marker = fence[1]!;
      const closingFence = new RegExp(`^ {0,3}${marker[0] === '`' ? '`' : '~'}{${marker.length},}[ \\t]*$`);
      const fenced = [line];
      while (++lineIndex < lines.length) {
        const inner = lines[lineIndex]!.trimEnd();
        fenced.push(inner);
        if (closingFence.test(inner)) break;
      }
      pushText(fenced.join('\n'));
      continue;
    }

    const atx = ATX_HEADING.exec(line);
    if (atx) {
      flushParagraph();
      pushHeading(atx[1]!.length, atx[2] ?? '');
      continue;
    }

    if (paragraph.length > 0 && (SETEXT_LEVEL_1.test(line) || SETEXT_LEVEL_2.test(line))) {
      const level = SETEXT_LEVEL_1.test(line) ? 1 : 2;
      const text = paragraph.join(' ');
      paragraph = [];
      pushHeading(level, text);
      continue;
    }

    if (line.trim() === '' || THEMATIC_BREAK.test(line)) {
      flushParagraph();
      continue;
    }

    paragraph.push(line);
  }
  flushParagraph();
  return blocks;
}
