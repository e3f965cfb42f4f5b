import type { ParsedDocument } from './types.js';

/** The document's text that is searched for the words of a file name run together. */
const nameSearchCharacters = 60_000;
/** Words a run-together name may stand for. */
const maxJoinedWords = 5;
/** A title longer than this is a sentence or a heading gone wrong, not a title. */
const maxTitleWords = 16;
const maxTitleCharacters = 200;
/** File names are limited elsewhere; their words in an index context are cut to this. */
const maxNameCharacters = 200;

const isShort = (text: string) => text.length <= maxTitleCharacters && text.split(' ').length <= maxTitleWords;

/**
 * Words of a file name, for people and for search: the extension dropped, separators and
 * lower-to-upper case changes split (`3M_2018_10K.pdf` is "3M 2018 10K", `annualReport-v2.docx`
 * "annual Report v2"). A run of letters that the document's own text writes as several words is
 * given as those words, in the text's spelling: `AMERICANWATERWORKS` in a file whose text says
 * "American Water Works Company" is "American Water Works".
 */
export function nameWords(filename: string, text: string): string {
  const tokens = fileStem(filename)
    .replace(/([\p{Ll}])(\p{Lu})/gu, '$1 $2')
    .split(/[\s_.\-+,;()[\]{}]+/u)
    .filter((token) => token !== '');
  const words = textWords(text);
  return tokens.map((token) => (/^\p{L}{6,}$/u.test(token) ? (splitByText(token, words) ?? token) : token)).join(' ');
}

/**
 * A file name without its extension, decoded when it is percent-encoded. An extension starts with
 * a letter, so a final year or version stays part of the name (`report.2019`, `notes.v2.txt`).
 */
export function fileStem(filename: string): string {
  return decodedName(filename).replace(/\.[A-Za-z][A-Za-z0-9]{0,7}$/, '');
}

/** A name saved percent-encoded (`Ward%20Cunningham.txt`, as browsers and URLs write them) is read decoded. */
export function decodedName(filename: string): string {
  if (!/%[0-9A-Fa-f]{2}/.test(filename)) return filename;
  try {
    return decodeURIComponent(filename);
  } catch {
    return filename;
  }
}

function textWords(text: string): string[] {
  return [...text.slice(0, nameSearchCharacters).matchAll(/[\p{L}\p{N}]+/gu)].map(([word]) => word);
}

/** The first run of 2 to `maxJoinedWords` consecutive words of the text that, joined, spell `token`. */
function splitByText(token: string, words: readonly string[]): string | undefined {
  const wanted = token.toLowerCase();
  for (let first = 0; first < words.length; first++) {
    let joined = '';
    for (let last = first; last < words.length && last - first < maxJoinedWords; last++) {
      joined += words[last]!.toLowerCase();
      if (!wanted.startsWith(joined)) break;
      if (joined === wanted) return last > first ? words.slice(first, last + 1).join(' ') : undefined;
    }
  }
  return undefined;
}

/** Whether a title a file carries in its own metadata names something (not an id, a path or a word processor's label). */
function meaningfulTitle(title: string): string | undefined {
  const cleaned = title
    .replace(/^Microsoft (Word|PowerPoint|Excel) - /i, '')
    .replace(/\s+/g, ' ')
    .trim();
  const words = cleaned.match(/\p{L}{2,}/gu) ?? [];
  if (words.length < 2 || !isShort(cleaned)) return undefined;
  if (/\.(docx?|pdf|pptx?|xlsx?|txt)$/i.test(cleaned) || /^untitled/i.test(cleaned)) return undefined;
  return cleaned;
}

/**
 * A document's title: the title in its file's metadata when that names something, else its first
 * heading, else a first paragraph that reads as a title (one short line that does not end a
 * sentence, as notes and plain-text articles start), else the words of its file name.
 */
export function documentTitle(parsed: Pick<ParsedDocument, 'blocks' | 'metadataTitle'>, fileNameWords: string): string {
  const fromMetadata = parsed.metadataTitle ? meaningfulTitle(parsed.metadataTitle) : undefined;
  if (fromMetadata) return fromMetadata;
  const short = (text: string | undefined) => (text !== undefined && isShort(text) ? text : undefined);
  const heading = short(parsed.blocks.find((block) => block.kind === 'heading')?.text.replace(/\s+/g, ' ').trim());
  if (heading) return heading;
  const first = parsed.blocks[0]?.text.trim();
  const firstLine = first !== undefined && !first.includes('\n') && /\p{L}/u.test(first) && !/[.!?:;,]$/.test(first) ? short(first) : undefined;
  return firstLine ?? fileNameWords;
}

/**
 * What each chunk of a document is indexed with besides its own text: the words of its file
 * name (unless they hold no word, as `4983.txt`), and its title when that says something else.
 */
export function documentContext(fileNameWords: string, title: string): string {
  const name = /\p{L}{2,}/u.test(fileNameWords) ? fileNameWords.slice(0, maxNameCharacters) : '';
  const other = title.toLowerCase() === fileNameWords.toLowerCase() || !/\p{L}{2,}/u.test(title) ? '' : title;
  return [name, other].filter((part) => part !== '').join(': ');
}

/**
 * The text a chunk is embedded and keyword-indexed as: where it is (its document's context and
 * its heading trail), then its own text; what the chunk starts with is not said twice. Search
 * results show the chunk's own text only.
 */
export function indexedText(context: string, headings: readonly string[], content: string): string {
  const said = (part: string) => part === '' || content.startsWith(part);
  const trail = headings.map((heading) => heading.replace(/\s+/g, ' ').trim()).filter((heading) => !said(heading));
  return [said(context) ? '' : context, trail.join(' > '), content].filter((part) => part !== '').join('\n');
}
