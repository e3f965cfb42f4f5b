import { Tokenizer } from '@huggingface/tokenizers';

/** bge-small (a BERT) takes at most 512 positions, [CLS] and [SEP] included. */
export const MAX_TOKENS = 512;

/**
 * Tokenizing a whole 10,000-word text to keep its first 511 tokens wastes time: every
 * whitespace-separated word yields at least one token, so the text is first cut after this many
 * words (tokens never span whitespace, so the kept tokens are the same). If the cut text yields
 * fewer than MAX_TOKENS tokens (words that normalise to nothing), the whole text is tokenized.
 */
const WORD_CUT = 4 * MAX_TOKENS;

function cutAfterWords(text: string, words: number): string {
  const pattern = /\S+/g;
  for (let seen = 0; pattern.exec(text) !== null; ) {
    if (++seen === words) return text.slice(0, pattern.lastIndex);
  }
  return text;
}

/** The model's tokenizer, from its tokenizer.json (which has no truncation of its own). */
export function loadTokenizer(tokenizerJson: string): { tokenizer: Tokenizer; sepId: number } {
  const tokenizer = new Tokenizer(JSON.parse(tokenizerJson) as object, {});
  const sepId = tokenizer.token_to_id('[SEP]');
  if (sepId === undefined) throw new Error('the tokenizer has no [SEP] token');
  return { tokenizer, sepId };
}

/** Token ids of `text` with [CLS] and [SEP], cut to MAX_TOKENS with [SEP] re-appended. */
export function encode(tokenizer: Tokenizer, sepId: number, text: string): number[] {
  const cut = cutAfterWords(text, WORD_CUT);
  let ids = tokenizer.encode(cut).ids;
  if (cut.length < text.length && ids.length < MAX_TOKENS) ids = tokenizer.encode(text).ids;
  if (ids.length > MAX_TOKENS) {
    ids = ids.slice(0, MAX_TOKENS - 1);
    ids.push(sepId);
  }
  return ids;
}
