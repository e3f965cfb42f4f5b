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
 * stemmed. (The Elasticsearch distribution run here has no English analyzer or stemmer.) A word
 * of letters and digits also gives its runs of each that are longer than one character (`FY2017`
 * is fy2017, fy and 2017; `10K` is 10k and 10), so that a question's "FY2017" finds a file named
 * `..._2017_10K`.
 */
export function analyze(text: string): string[] {
  return analyzeParts(text, (term) => term, (term) => term);
}

/**
 * The distinct terms of a query, at most `max`: its own words first, then the runs taken out of
 * words of letters and digits, so that a long query's budget goes to what it says.
 */
export function queryTerms(text: string, max: number): string[] {
  const words: string[] = [];
  const runs: string[] = [];
  analyzeParts(text, (term) => void words.push(term), (term) => void runs.push(term));
  return [...new Set([...words, ...runs])].slice(0, max);
}

function analyzeParts<T>(text: string, onWord: (term: string) => T, onRun: (term: string) => T): T[] {
  const terms: T[] = [];
  for (const [word] of text.normalize('NFKC').toLowerCase().matchAll(/[\p{L}\p{N}]+/gu)) {
    if (word.length > maxTermLength || stopWords.has(word)) continue;
    terms.push(onWord(stemmer(word)));
    const runs = word.match(/\p{N}+|[^\p{N}]+/gu)!;
    if (runs.length > 1) for (const run of runs) if (run.length > 1 && !stopWords.has(run)) terms.push(onRun(stemmer(run)));
  }
  return terms;
}

/** Distinct terms with their counts, in first-seen order. */
export function termFrequencies(terms: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const term of terms) counts.set(term, (counts.get(term) ?? 0) + 1);
  return counts;
}

/**
 * BM25 parameters of both indexes' keyword side: the pgvector index's own ranking and the
 * Elasticsearch index's similarity (measured on SciFact). The score keeps the textbook (k1 + 1)
 * factor, as Elasticsearch's BM25 does, so the two agree.
 */
export const bm25 = { k1: 0.9, b: 0.4 };
