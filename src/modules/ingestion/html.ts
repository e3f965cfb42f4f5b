import { Readability } from '@mozilla/readability';
import { parseHTML } from 'linkedom';
import { HeadingTrail } from './heading-trail.js';
import { ParseError, type ParsedBlock } from './types.js';

const ELEMENT_NODE = 1;
const TEXT_NODE = 3;

/** Elements whose content is never document text. */
const IGNORED_ELEMENTS = new Set([
  'script', 'style', 'noscript', 'template', 'head', 'title', 'meta', 'link', 'svg', 'math',
  'iframe', 'object', 'embed', 'canvas', 'video', 'audio', 'select', 'button', 'input', 'textarea',
]);

/** Elements that end the running paragraph before and after themselves. */
const BLOCK_ELEMENTS = new Set([
  'address', 'article', 'aside', 'blockquote', 'body', 'center', 'dd', 'details', 'dialog', 'div',
  'dl', 'dt', 'fieldset', 'figcaption', 'figure', 'footer', 'form', 'header', 'hgroup', 'hr', 'html',
  'li', 'main', 'nav', 'p', 'section', 'summary', 'caption',
]);

const HEADING_ELEMENT = /^h([1-6])$/;

/** Deeper element nesting than this is refused: no real page needs it, and walking it costs stack. */
const MAX_NESTING = 512;
const tooDeep = () => new ParseError(`the HTML nests elements more than ${MAX_NESTING} levels deep`);

/** Collapses HTML whitespace inside each line while keeping explicit line breaks. */
function normalizeInlineText(text: string): string {
  return text
    .split('\n')
    .map((line) => line.replace(/[ \t\f\r\u00a0]+/g, ' ').trim())
    .filter((line) => line !== '')
    .join('\n');
}

function collapseWhitespace(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/** Walks a DOM subtree in document order and turns it into heading and text blocks. */
/** The attribute a converted DOCX gives each picture it keeps: the picture's number (docxBlocks). */
export const PICTURE_ATTRIBUTE = 'data-picture';

/** `pictures`, when given, receives the empty block of each `<img data-picture>`, where it stands, for OCR to fill. */
function blocksFromElement(root: Element, pictures?: Map<ParsedBlock, string>): ParsedBlock[] {
  const blocks: ParsedBlock[] = [];
  const headings = new HeadingTrail();
  let headingPath: string[] = [];
  let inlineText = '';

  const pushText = (text: string) => {
    if (text.trim() !== '') blocks.push({ kind: 'text', text, page: null, headingPath });
  };
  const flushInline = () => {
    pushText(normalizeInlineText(inlineText));
    inlineText = '';
  };

  const visit = (node: Node, depth = 0): void => {
    if (depth > MAX_NESTING) throw tooDeep();
    if (node.nodeType === TEXT_NODE) {
      // Source line breaks are ordinary whitespace in HTML; only <br> makes a line break.
      inlineText += (node.textContent ?? '').replace(/\n/g, ' ');
      return;
    }
    if (node.nodeType !== ELEMENT_NODE) return;
    const element = node as Element;
    const tag = element.tagName.toLowerCase();
    if (IGNORED_ELEMENTS.has(tag)) return;

    const heading = HEADING_ELEMENT.exec(tag);
    if (heading) {
      flushInline();
      const text = collapseWhitespace(visibleText(element));
      if (text !== '') {
        const level = Number(heading[1]);
        headingPath = headings.enter(level, text);
        blocks.push({ kind: 'heading', text, page: null, headingPath, level });
      }
      return;
    }
    if (tag === 'br') {
      inlineText += '\n';
      return;
    }
    if (tag === 'img' && pictures && element.hasAttribute(PICTURE_ATTRIBUTE)) {
      flushInline();
      const block: ParsedBlock = { kind: 'text', text: '', page: null, headingPath };
      blocks.push(block);
      pictures.set(block, element.getAttribute(PICTURE_ATTRIBUTE)!);
      return;
    }
    if (tag === 'pre') {
      flushInline();
      pushText(visibleText(element).replace(/^\n+|\s+$/g, ''));
      return;
    }
    if (tag === 'table') {
      flushInline();
      const table = tableText(element);
      if (table.text.trim() !== '') blocks.push({ kind: 'text', text: table.text, page: null, headingPath, ...(table.header !== '' && { tableHeader: table.header }) });
      return;
    }
    if (tag === 'ul' || tag === 'ol') {
      flushInline();
      pushText(listLines(element, 0).join('\n'));
      return;
    }
    const isBlock = BLOCK_ELEMENTS.has(tag);
    if (isBlock) flushInline();
    for (const child of Array.from(element.childNodes)) visit(child, depth + 1);
    if (isBlock) flushInline();
  };

  visit(root);
  flushInline();
  return blocks;
}

/** Text content without the content of ignored elements such as scripts. */
function visibleText(node: Node, depth = 0): string {
  if (depth > MAX_NESTING) throw tooDeep();
  if (node.nodeType === TEXT_NODE) return node.textContent ?? '';
  if (node.nodeType !== ELEMENT_NODE) return '';
  const element = node as Element;
  const tag = element.tagName.toLowerCase();
  if (IGNORED_ELEMENTS.has(tag)) return '';
  if (tag === 'br') return '\n';
  const inner = Array.from(element.childNodes)
    .map((child) => visibleText(child, depth + 1))
    .join('');
  return BLOCK_ELEMENTS.has(tag) || tag === 'tr' ? `\n${inner}\n` : inner;
}

/**
 * One line per row, cells separated by " | ", after the caption's line. The header is the caption
 * and the title rows: those in <thead>, or leading rows of <th> cells only.
 */
function tableText(table: Element): { text: string; header: string } {
  const caption = Array.from(table.children).find((child) => child.tagName.toLowerCase() === 'caption');
  const lines: string[] = [];
  const captionText = caption ? collapseWhitespace(visibleText(caption)) : '';
  if (captionText !== '') lines.push(captionText);
  let headerLines = lines.length;
  let inHeader = true;
  for (const row of Array.from(table.querySelectorAll('tr'))) {
    if (row.closest('table') !== table) continue;
    const cellElements = Array.from(row.children).filter((cell) => /^t[dh]$/i.test(cell.tagName));
    const cells = cellElements.map((cell) => collapseWhitespace(visibleText(cell)));
    if (!cells.some((cell) => cell !== '')) continue;
    const isTitleRow = row.parentElement?.tagName.toLowerCase() === 'thead' || cellElements.every((cell) => cell.tagName.toLowerCase() === 'th');
    inHeader &&= isTitleRow;
    lines.push(cells.join(' | '));
    if (inHeader) headerLines = lines.length;
  }
  // A table of title rows only has no body to repeat them over.
  const header = headerLines < lines.length ? lines.slice(0, headerLines).join('\n') : '';
  return { text: lines.join('\n'), header };
}

/** "- item" or "1. item" lines, nested lists indented by two spaces per level. */
function listLines(list: Element, depth: number): string[] {
  if (depth > MAX_NESTING) throw tooDeep();
  const lines: string[] = [];
  const ordered = list.tagName.toLowerCase() === 'ol';
  let itemNumber = 0;
  for (const item of Array.from(list.children)) {
    if (item.tagName.toLowerCase() !== 'li') continue;
    itemNumber++;
    const nestedLines: string[] = [];
    let ownText = '';
    for (const child of Array.from(item.childNodes)) {
      const childTag = child.nodeType === ELEMENT_NODE ? (child as Element).tagName.toLowerCase() : '';
      if (childTag === 'ul' || childTag === 'ol') nestedLines.push(...listLines(child as Element, depth + 1));
      else ownText += visibleText(child);
    }
    const marker = ordered ? `${itemNumber}.` : '-';
    const text = collapseWhitespace(ownText);
    if (text !== '') lines.push(`${'  '.repeat(depth)}${marker} ${text}`);
    lines.push(...nestedLines);
  }
  return lines;
}

/** Elements a parser closes by itself when a sibling opens, or that hold no children. */
const SELF_CLOSING_OR_VOID = new Set([
  'p', 'li', 'dt', 'dd', 'tr', 'td', 'th', 'thead', 'tbody', 'tfoot', 'option', 'optgroup', 'rb', 'rt', 'rtc', 'rp',
  'colgroup', 'caption', 'head', 'body', 'html', 'area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link',
  'meta', 'source', 'track', 'wbr', '!doctype',
]);
const TAG = /<(\/?)([a-zA-Z!][a-zA-Z0-9-]*)[^<>]*?(\/?)>/g;

/**
 * The parser's own time grows faster than linearly with nesting (200,000 nested <div>s took
 * 25 s), so nesting far past the limit is refused from the tags alone, before parsing. The count
 * is an upper bound, hence the margin: only a page nesting four times deeper than allowed is
 * refused here; the walk over the parsed tree applies the exact limit.
 */
function checkTagNesting(html: string): void {
  let depth = 0;
  for (const match of html.matchAll(TAG)) {
    const name = match[2]!.toLowerCase();
    if (match[3] === '/' || SELF_CLOSING_OR_VOID.has(name)) continue;
    depth += match[1] === '/' ? -1 : 1;
    if (depth < 0) depth = 0;
    if (depth > MAX_NESTING * 4) throw tooDeep();
  }
}

function parseDocumentHtml(html: string): Document {
  checkTagNesting(html);
  // linkedom builds no <html>/<body> around a fragment, so fragments get a page around them.
  const isPage = /<html[\s>]/i.test(html);
  return parseHTML(isPage ? html : `<!doctype html><html><head></head><body>${html}</body></html>`).document;
}

/** Blocks of an HTML fragment produced by a converter (no page chrome to remove). */
export function htmlFragmentBlocks(fragment: string, pictures?: Map<ParsedBlock, string>): ParsedBlock[] {
  const document = parseDocumentHtml(fragment);
  return document.body ? blocksFromElement(document.body, pictures) : [];
}

/**
 * Below this share of the page's visible text, Readability is assumed to have picked a fragment
 * (a sidebar, a caption) rather than the article, and the whole body is used instead.
 */
const MINIMUM_ARTICLE_SHARE = 0.2;

/**
 * Blocks of a web page: the main content as found by Readability, or the whole body when
 * Readability finds nothing convincing. The page title leads as a level-1 heading when the
 * article does not already start with it.
 */
export function htmlPageBlocks(html: string): ParsedBlock[] {
  const bodyBlocks = (() => {
    const document = parseDocumentHtml(html);
    return document.body ? blocksFromElement(document.body) : [];
  })();
  const bodyLength = textLength(bodyBlocks);

  let article: ReturnType<Readability['parse']> = null;
  try {
    article = new Readability(parseDocumentHtml(html)).parse();
  } catch {
    article = null;
  }
  if (!article?.content) return bodyBlocks;
  const articleBlocks = htmlFragmentBlocks(article.content);
  const articleLength = textLength(articleBlocks);
  if (articleLength === 0 || articleLength < bodyLength * MINIMUM_ARTICLE_SHARE) return bodyBlocks;

  const title = collapseWhitespace(article.title ?? '');
  const firstBlock = articleBlocks[0];
  if (title === '' || (firstBlock?.kind === 'heading' && firstBlock.text === title)) return articleBlocks;
  return [
    { kind: 'heading', text: title, page: null, headingPath: [title], level: 1 },
    ...articleBlocks.map((block) => ({ ...block, headingPath: [title, ...block.headingPath] })),
  ];
}

function textLength(blocks: ParsedBlock[]): number {
  return blocks.reduce((total, block) => total + block.text.length, 0);
}
