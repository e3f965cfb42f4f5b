const sentenceSegmenter = new Intl.Segmenter('en', { granularity: 'sentence' });

/** Longer queries are left as they are: the search cuts them to this length anyway, and segmenting costs. */
const maxFocusedCharacters = 10_000;

// A sentence that says how to answer rather than what about: a definition to compute by, or an
// instruction (an imperative, a request that opens with "please", "we need to", "I want to", or
// one for a case: "If X is not relevant, state that and explain why").
const definition = /\b(is|are)\s+(here\s+)?(defined|calculated|computed|measured)\s+(as|by)\b|^(define|defining)\b/i;
const conditionalInstruction = /^if\b[^?]*\b(then|please|state|explain|say|answer|respond|reply|return|write|give)\b/i;
const instruction =
  /^(please|kindly|round|answer|respond|reply|provide|give|address|calculate|compute|express|state|show|explain|base|use|assume|report|return|format|write|be|keep|only|do not|don't|make sure|note that|(we|i)\s+(need|want|would like)\s+to)\b/i;

// Words by which a question points back at a sentence before it.
const referringBack = /\b(it|its|this|that|these|those|they|them|their|he|him|his|she|her)\b/i;
/** A year written in a text (1500-2099), also inside a word: "FY2018" holds 2018. For `matchAll`. */
export const yearPattern = /(?<!\d)(1[5-9]\d\d|20\d\d)(?!\d)/g;

/** Capitalised words after a sentence's first (names: "Acme", "State Street"), lower-cased. */
function namesOf(sentence: string): string[] {
  const words = sentence.match(/[\p{L}\p{N}][\p{L}\p{N}'’&.-]*/gu) ?? [];
  return words.slice(1).filter((word) => /^\p{Lu}\p{Ll}/u.test(word)).map((word) => word.toLowerCase());
}

/**
 * What a query is searched by. A question wrapped in definitions and instructions ("What is
 * Amazon's FY2017 DPO? DPO is defined as: 365 * ... Round your answer to two decimal places.
 * Address the question by using the balance sheet.") is searched without them: they say how to
 * answer, not what about, and their words match every document alike. Only a query that asks
 * (a sentence with a question mark) is focused, and only its other sentences that define (their
 * periods and capitalised terms are the question's: "(FY2019 COGS)") or instruct are left out;
 * an instruction stays when it names what the asking sentences do not: a capitalised word ("Use
 * Amazon's 10-K."), or a year ("Return on equity was 12% in 2019."). The whole query is kept when
 * an asking sentence points back at the others and names nothing itself ("Acme makes rockets.
 * What is its revenue?").
 */
export function focusOf(query: string): string {
  if (query.length > maxFocusedCharacters || !query.includes('?')) return query;
  const sentences = [...sentenceSegmenter.segment(query)].map(({ segment }) => segment.trim()).filter((sentence) => sentence.length > 0);
  const asking = sentences.filter((sentence) => sentence.includes('?'));
  if (asking.length === 0 || asking.length === sentences.length) return query;
  const askedNames = new Set(asking.flatMap(namesOf));
  if (askedNames.size === 0 && asking.some((sentence) => referringBack.test(sentence))) return query;
  const askedText = asking.join(' ');
  const namesMore = (sentence: string) =>
    namesOf(sentence).some((name) => !askedNames.has(name)) || [...sentence.matchAll(yearPattern)].some(([year]) => !askedText.includes(year));
  const leftOut = (sentence: string) =>
    !sentence.includes('?') && (definition.test(sentence) || ((instruction.test(sentence) || conditionalInstruction.test(sentence)) && !namesMore(sentence)));
  const kept = sentences.filter((sentence) => !leftOut(sentence));
  return kept.length === sentences.length ? query : kept.join(' ');
}
