import { countTokens as countShortText } from 'gpt-tokenizer';

/**
 * Longest text handed to the tokenizer at once. BPE merges within one pre-token (a run of
 * letters, of CJK characters, of punctuation) take time that grows with the square of the run's
 * length: 100,000 letters without a space took 2 s, a megabyte would take minutes. Longer text
 * is tokenized in pieces of at most this many characters, so the cost is linear in the text.
 */
export const TOKENIZER_WINDOW_CHARACTERS = 256;

/**
 * Where text may be cut without changing its tokens: just before a space that follows a
 * character other than whitespace. In o200k_base no pre-token crosses such a position (a word
 * carries its leading space), so the pieces of ordinary text encode to exactly the tokens of
 * the whole.
 */
function isPreTokenBoundary(text: string, index: number): boolean {
  return text.charCodeAt(index) === 0x20 && !isWhitespace(text.charCodeAt(index - 1));
}

/**
 * Cuts text at pre-token boundaries into pieces of at most `maxCharacters`: each piece is as
 * long as the limit allows (`greedy`), or ends at the first boundary (`every`, giving words).
 * A stretch of `maxCharacters` without a boundary is cut where it ends, never inside a surrogate
 * pair; only there can a count differ from the count of the whole.
 */
function cutForTokenizer(text: string, maxCharacters: number, mode: 'greedy' | 'every'): string[] {
  const pieces: string[] = [];
  let start = 0;
  let lastBoundary = -1;
  for (let index = 1; index <= text.length; index++) {
    if (index === text.length) break;
    if (isPreTokenBoundary(text, index)) {
      if (mode === 'every') {
        pieces.push(text.slice(start, index));
        start = index;
        continue;
      }
      lastBoundary = index;
    }
    if (index - start >= maxCharacters) {
      let end = lastBoundary > start ? lastBoundary : index;
      if (end === index && isHighSurrogate(text.charCodeAt(end - 1))) end--;
      pieces.push(text.slice(start, end));
      start = end;
      lastBoundary = -1;
    }
  }
  if (start < text.length) pieces.push(text.slice(start));
  return pieces;
}

/** o200k_base token count of any text, in time linear in its length. */
export function countTokens(text: string): number {
  if (text.length <= TOKENIZER_WINDOW_CHARACTERS) return countShortText(text);
  let total = 0;
  for (const window of cutForTokenizer(text, TOKENIZER_WINDOW_CHARACTERS, 'greedy')) total += countShortText(window);
  return total;
}

/**
 * Cuts text into runs of at most `firstBudget` tokens for the first and `limit` for the rest.
 * Runs end at word starts; a word larger than a whole run fills runs between characters. Stops
 * early, returning the runs so far, when not even one character fits the budget. Linear in the
 * text: each word is counted once, and only a word longer than a run is searched by characters.
 */
export function splitByTokens(text: string, firstBudget: number, limit: number): string[] {
  const runs: string[] = [];
  const budget = () => (runs.length === 0 ? firstBudget : limit);
  let run = '';
  let runTokens = 0;
  const closeRun = (rest = '') => {
    // Counts were summed word by word; where a long word was cut between characters the sum can
    // miss a merge at the cut, so the run as a whole is counted, and what does not fit moves on.
    while (countTokens(run) > budget()) {
      const end = longestPrefixWithin(run, budget());
      if (end === 0) break;
      rest = run.slice(end) + rest;
      run = run.slice(0, end);
    }
    runs.push(run);
    run = rest;
    runTokens = rest === '' ? 0 : countTokens(rest);
  };
  for (let word of cutForTokenizer(text, TOKENIZER_WINDOW_CHARACTERS, 'every')) {
    let wordTokens = countShortText(word);
    // An ordinary word starts the next run; a word larger than any run fills this one first.
    if (run !== '' && runTokens + wordTokens > budget() && wordTokens <= limit) closeRun();
    while (runTokens + wordTokens > budget()) {
      const end = longestPrefixWithin(word, budget() - runTokens);
      if (end === 0) {
        if (run === '') return runs;
        closeRun();
        continue;
      }
      run += word.slice(0, end);
      closeRun();
      word = word.slice(end);
      wordTokens = countShortText(word);
    }
    run += word;
    runTokens += wordTokens;
  }
  if (run !== '') closeRun();
  return runs.filter((piece) => piece !== '');
}

/** Length of the longest prefix of `text` within `budget` tokens, cut between code points. */
function longestPrefixWithin(text: string, budget: number): number {
  if (budget < 1) return 0;
  const ends: number[] = [];
  for (let index = 0; index < text.length; ) {
    index += text.codePointAt(index)! > 0xffff ? 2 : 1;
    ends.push(index);
  }
  let fits = -1;
  let high = ends.length - 1;
  while (fits < high) {
    const middle = Math.ceil((fits + high) / 2);
    if (countTokens(text.slice(0, ends[middle])) <= budget) fits = middle;
    else high = middle - 1;
  }
  return fits < 0 ? 0 : ends[fits]!;
}

function isWhitespace(code: number): boolean {
  return (
    code === 0x20 ||
    (code >= 0x09 && code <= 0x0d) ||
    code === 0x85 ||
    code === 0xa0 ||
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000
  );
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}
