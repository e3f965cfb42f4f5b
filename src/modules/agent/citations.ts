import { cellsAt, pageAt, type NumberedPassage } from './answer-model.js';
import { sentencesOf, topicTerms } from './text.js';

/** A cited passage: where in its chunk the quoted sentence is; `chunk.content.slice(start, end) === quote`. */
export type CitedPassage = { citation: number; chunkIndex: number; page: number | null; cells: string | null; quote: string; start: number; end: number };

/** The specification's source (doc_id, filename, pages) with the passages the answer cites in it. */
export type Source = { documentId: string; filename: string; pages: number[]; passages: CitedPassage[] };

/** An answer sentence as verification judged it. */
export type CheckedSentence = { text: string; citations: number[]; support: number; supported: boolean };

/** A sentence is supported when the passages it cites hold at least this share of its words. */
export const supportThreshold = 0.6;

const citationMarker = /\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]/g;

/**
 * Drops from a streamed answer the citation markers that name no passage (a model's invented
 * `[7]` among six passages); a marker naming known ones as well keeps those. Text that may be
 * the start of a marker is held until it is complete.
 */
export class UnknownCitationFilter {
  #held = '';
  constructor(private readonly known: ReadonlySet<number>) {}

  push(piece: string): string {
    const text = this.#held + piece;
    const partial = /\s*\[[\d,\s]{0,40}$/.exec(text);
    const cut = partial ? partial.index : text.length;
    this.#held = text.slice(cut);
    return this.#clean(text.slice(0, cut));
  }

  flush(): string {
    const rest = this.#clean(this.#held);
    this.#held = '';
    return rest;
  }

  #clean(text: string) {
    return text.replace(/(\s*)\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]/g, (marker, space: string, list: string) => {
      const numbers = list.split(',').map((number) => Number(number.trim()));
      const known = numbers.filter((number) => this.known.has(number));
      if (known.length === numbers.length) return marker;
      return known.length === 0 ? '' : `${space}[${known.join(', ')}]`;
    });
  }
}

/** The answer's text without its citation markers. */
export const withoutMarkers = (text: string) => text.replace(citationMarker, '').replace(/\s+([.,;:!?])/g, '$1').trim();

/**
 * Checks each sentence of an answer against the passages it cites: its support is the share of
 * its topic words those passages hold (1 for a sentence quoted from them). A sentence with words
 * and no valid citation has no support. Sentences without topic words (a lead-in) are not judged.
 */
export function checkSentences(answer: string, passages: readonly NumberedPassage[]): CheckedSentence[] {
  const byNumber = new Map(passages.map((passage) => [passage.number, passage]));
  const passageTerms = new Map<number, Set<string>>();
  const termsOf = (passage: NumberedPassage) => {
    let terms = passageTerms.get(passage.number);
    if (!terms) passageTerms.set(passage.number, (terms = new Set(topicTerms(passage.content))));
    return terms;
  };
  // First the sentences with their citations: a piece that is only markers ("[1]" after a
  // sentence whose closing quote the segmenter ended it at) belongs to the sentence before it.
  const pieces: { text: string; citations: number[] }[] = [];
  for (const sentence of sentencesOf(answer)) {
    const citations = [...sentence.text.matchAll(citationMarker)].flatMap((match) => match[1]!.split(',').map((number) => Number(number.trim())));
    const markersOnly = withoutMarkers(sentence.text).replace(/[\p{P}\p{Cf}\s]/gu, '') === '';
    const previous = pieces.at(-1);
    if (markersOnly && previous) {
      previous.text = `${previous.text} ${sentence.text}`;
      previous.citations.push(...citations);
    } else {
      pieces.push({ text: sentence.text, citations });
    }
  }
  const checked: CheckedSentence[] = [];
  for (const piece of pieces) {
    const valid = [...new Set(piece.citations)].filter((number) => byNumber.has(number));
    const claim = [...new Set(topicTerms(withoutMarkers(piece.text)))];
    if (claim.length === 0) continue;
    let support = 0;
    for (const number of valid) {
      const held = termsOf(byNumber.get(number)!);
      support = Math.max(support, claim.filter((term) => held.has(term)).length / claim.length);
    }
    checked.push({ text: piece.text, citations: valid, support, supported: support >= supportThreshold });
  }
  return checked;
}

/** Share of judged sentences that are supported; null when no sentence could be judged (a "not found" answer). */
export function supportScoreOf(sentences: readonly CheckedSentence[]): number | null {
  if (sentences.length === 0) return null;
  return sentences.filter((sentence) => sentence.supported).length / sentences.length;
}

/**
 * The documents an answer cites, in the order it first cites them, each with the passages cited:
 * for each citing sentence, the sentence of the cited chunk that shares most of its words, quoted
 * verbatim with its offsets in the chunk.
 */
export function sourcesOf(sentences: readonly CheckedSentence[], passages: readonly NumberedPassage[]): Source[] {
  const byNumber = new Map(passages.map((passage) => [passage.number, passage]));
  const sources = new Map<string, Source & { seen: Set<string> }>();
  for (const sentence of sentences) {
    const claim = new Set(topicTerms(withoutMarkers(sentence.text)));
    for (const number of sentence.citations) {
      const passage = byNumber.get(number)!;
      const quote = bestQuote(passage.content, claim, withoutMarkers(sentence.text));
      if (!quote) continue;
      let source = sources.get(passage.documentId);
      if (!source) {
        source = { documentId: passage.documentId, filename: passage.filename, pages: [], passages: [], seen: new Set() };
        sources.set(passage.documentId, source);
      }
      const key = `${passage.chunkIndex}:${quote.start}`;
      if (source.seen.has(key)) continue;
      source.seen.add(key);
      // The page the quoted sentence is on, for a passage that spans pages.
      const page = passage.page === null ? null : pageAt(passage.metadata, quote.start);
      source.passages.push({ citation: number, chunkIndex: passage.chunkIndex, page, cells: cellsAt(passage.metadata, quote.start), ...quote });
      if (page !== null && !source.pages.includes(page)) source.pages.push(page);
    }
  }
  return [...sources.values()].map(({ seen: _seen, ...source }) => ({ ...source, pages: source.pages.sort((a, b) => a - b) }));
}

function bestQuote(content: string, claim: ReadonlySet<string>, claimText: string): { quote: string; start: number; end: number } | null {
  let best: { quote: string; start: number; end: number; overlap: number } | null = null;
  for (const sentence of sentencesOf(content)) {
    if (sentence.text === claimText) return { quote: sentence.text, start: sentence.start, end: sentence.end };
    const terms = new Set(topicTerms(sentence.text));
    let overlap = 0;
    for (const term of claim) if (terms.has(term)) overlap += 1;
    if (!best || overlap > best.overlap) best = { quote: sentence.text, start: sentence.start, end: sentence.end, overlap };
  }
  return best && { quote: best.quote, start: best.start, end: best.end };
}
