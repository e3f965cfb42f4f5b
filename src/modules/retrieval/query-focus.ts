const sentenceSegmenter = new Intl.Segmenter('en', { granularity: 'sentence' });

// A sentence that says how to answer rather than what about: a definition to compute by, or an
// instruction (an imperative, a request that opens with "please", "we need to", "I want to", or
// one for a case: "If X is not relevant, state that and explain why").
const definition = /\b(is|are)\s+(here\s+)?(defined|calculated|computed|measured)\s+(as|by)\b|^(define|defining)\b/i;
const conditionalInstruction = /^if\b[^?]*\b(then|please|state|explain|say|answer|respond|reply|return|write|give)\b/i;
const instruction =
  /^(please|kindly|round|answer|respond|reply|provide|give|address|calculate|compute|express|state|show|explain|base|use|assume|report|return|format|write|be|keep|only|do not|don't|make sure|note that|(we|i)\s+(need|want|would like)\s+to)\b/i;

/**
 * What a query is searched by. A question wrapped in definitions and instructions ("What is
 * Amazon's FY2017 DPO? DPO is defined as: 365 * ... Round your answer to two decimal places.
 * Address the question by using the balance sheet.") is searched without them: they say how to
 * answer, not what about, and their words match every document alike. Only a query that asks
 * (a sentence with a question mark) is focused, and only its other sentences that define or
 * instruct are left out; a sentence that sets the scene ("Acme makes rockets. What is its
 * revenue?") is kept.
 */
export function focusOf(query: string): string {
  const sentences = [...sentenceSegmenter.segment(query)].map(({ segment }) => segment.trim()).filter((sentence) => sentence.length > 0);
  if (!sentences.some((sentence) => sentence.includes('?'))) return query;
  const kept = sentences.filter((sentence) => sentence.includes('?') || ![definition, instruction, conditionalInstruction].some((pattern) => pattern.test(sentence)));
  return kept.length === sentences.length ? query : kept.join(' ');
}
