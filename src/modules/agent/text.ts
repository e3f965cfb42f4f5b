import { analyze } from '../retrieval/analyzer.js';

/** A sentence of a chunk with its character offsets in that chunk: `content.slice(start, end) === text`. */
export type Sentence = { text: string; start: number; end: number };

const sentenceSegmenter = new Intl.Segmenter('en', { granularity: 'sentence' });

/** Longest sentence kept whole; a longer run without a full stop (a table, a list) is cut at spaces. */
const maxSentenceCharacters = 600;

/**
 * The sentences of a text with their offsets, surrounding white space left out. Segmentation is
 * Unicode's (UAX #29). Blank lines end a sentence too: chunk text keeps headings and list items on
 * lines of their own, without full stops.
 */
export function sentencesOf(text: string): Sentence[] {
  const sentences: Sentence[] = [];
  for (const { segment, index } of sentenceSegmenter.segment(text)) {
    let offset = 0;
    for (const piece of segment.split(/(\n\s*\n)/)) {
      if (!/\n\s*\n/.test(piece)) pushTrimmed(sentences, piece, index + offset);
      offset += piece.length;
    }
  }
  return sentences;
}

function pushTrimmed(sentences: Sentence[], piece: string, at: number) {
  const leading = piece.length - piece.trimStart().length;
  const text = piece.trim();
  if (!/[\p{L}\p{N}]/u.test(text)) return;
  let start = at + leading;
  let rest = text;
  while (rest.length > maxSentenceCharacters) {
    const cut = rest.lastIndexOf(' ', maxSentenceCharacters);
    const head = rest.slice(0, cut > 0 ? cut : maxSentenceCharacters).trimEnd();
    sentences.push({ text: head, start, end: start + head.length });
    const skipped = rest.length - rest.slice(head.length).trimStart().length;
    start += skipped;
    rest = rest.slice(skipped);
  }
  sentences.push({ text: rest, start, end: start + rest.length });
}

// Words of a question that say what kind of answer is wanted, not what it is about.
const questionWords = new Set(
  'what which who whom whose when where why how did does do is are was were has have had can could would should may might many much one ones also about than from been being its it their his her he she they them there here'.split(' '),
);

/** Analysed terms of a question that carry its topic: the keyword analysis without question words. */
export function topicTerms(text: string): string[] {
  const words = text.normalize('NFKC').toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  return analyze(words.filter((word) => !questionWords.has(word)).join(' '));
}

const nameWord = /^\p{Lu}[\p{L}\p{N}'’.-]*$/u;
const connectors = new Set(['of', 'the', 'de', 'du', 'von', 'van', 'and', '&', 'la', 'le', 'for']);

/**
 * Names in a text: runs of capitalised words (with `of`, `the`... between them), as a reader picks
 * out "Lyft" or "University of Toronto". A sentence's first word counts only when it is not a common
 * word, and question words never do.
 */
export function namesIn(text: string): string[] {
  const names: string[] = [];
  for (const sentence of sentencesOf(text)) {
    const raw = sentence.text.split(/\s+/);
    const words = raw.map((word) => word.replace(/^[("'“‘[]+|[)"'”’\],.;:!?]+$/gu, ''));
    let run: string[] = [];
    const flush = () => {
      while (run.length > 0 && connectors.has(run.at(-1)!.toLowerCase())) run.pop();
      if (run.length > 0) names.push(run.join(' '));
      run = [];
    };
    words.forEach((word, position) => {
      const lower = word.toLowerCase();
      const capitalised = nameWord.test(word) && !(position === 0 && (questionWords.has(lower) || commonOpeners.has(lower)));
      const opensClause = /^[("'“‘[]/u.test(raw[position]!);
      if (opensClause) flush();
      if (capitalised && !questionWords.has(lower)) run.push(word);
      else if (run.length > 0 && connectors.has(lower)) run.push(word);
      else flush();
      // A comma, colon or bracket after a word ends the name it was part of.
      if (/[)"'”’\],;:!?]$/u.test(raw[position]!)) flush();
    });
    flush();
  }
  return [...new Set(names.map((name) => name.replace(/'s$|’s$/u, '')))].filter((name) => name.length > 1);
}

const commonOpeners = new Set('the a an in on at for and but or if this that these those it as after before during while since with by to of'.split(' '));

/** Lower-cased text without punctuation, articles or extra space: how answers are compared (SQuAD's normalisation). */
export function normaliseAnswer(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s]/gu, ' ')
    .replace(/\b(a|an|the)\b/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}
