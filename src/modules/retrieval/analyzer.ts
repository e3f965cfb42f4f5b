import { stemmer } from 'stemmer';

// Lucene's English stop set: few enough that short queries keep their meaning.
const stopWords = new Set(
  'a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with'.split(' '),
);

/** Longer runs of letters and digits are not words (hashes, base64); they are dropped. */
const maxTermLength = 40;

/**
 * The keyword side's analysis, done here for every index so that PostgreSQL and Elasticsearch
 * rank on the same terms: Unicode words, lower-cased, English stop words removed, Porter
 * stemmed. (The Elasticsearch distribution run here has no English analyzer or stemmer.)
 */
export function analyze(text: string): string[] {
  const terms: string[] = [];
  for (const [word] of text.normalize('NFKC').toLowerCase().matchAll(/[\p{L}\p{N}]+/gu)) {
    if (word.length > maxTermLength || stopWords.has(word)) continue;
    terms.push(stemmer(word));
  }
  return terms;
}

/** Distinct terms with their counts, in first-seen order. */
export function termFrequencies(terms: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const term of terms) counts.set(term, (counts.get(term) ?? 0) + 1);
  return counts;
}
