/**
 * Cuts a streamed answer where it starts repeating itself: as soon as the last `spanWords` words
 * (whitespace-separated, compared in lower case) occurred before, the text from the start of
 * that span on is dropped and `stopped` is set. A loop of any period is caught once its repeat
 * reaches the span, and so is a sentence of that many words written twice.
 *
 * Text is released only when no later repetition can start in it: the last `spanWords - 1`
 * words (and a word still being written) are held back, at most `maxHeldCharacters` of them, so
 * that nothing of a repeat is streamed before it is seen. Text without spaces (Chinese,
 * Japanese) has no words to compare; it streams with that delay and is never cut.
 */
export class RepetitionStop {
  #text = '';
  #released = 0;
  /** Where each complete word starts in the text, and its n-grams seen so far. */
  readonly #wordStarts: number[] = [];
  readonly #words: string[] = [];
  readonly #seen = new Set<string>();
  /** Where the word being written starts. */
  #scanFrom = 0;
  #cutAt: number | null = null;

  constructor(
    private readonly spanWords: number,
    private readonly maxHeldCharacters = 80,
  ) {}

  get stopped() {
    return this.#cutAt !== null;
  }

  /** Takes the next piece of the answer; returns the text that may be streamed now. */
  push(piece: string): string {
    if (this.stopped) return '';
    this.#text += piece;
    if (this.spanWords === 0) return this.#release(this.#text.length);
    const pattern = /\S+(?=\s)/g;
    pattern.lastIndex = this.#scanFrom;
    for (let match = pattern.exec(this.#text); match; match = pattern.exec(this.#text)) {
      this.#scanFrom = pattern.lastIndex;
      this.#wordStarts.push(match.index);
      this.#words.push(match[0].toLowerCase());
      if (this.#words.length < this.spanWords) continue;
      const span = this.#words.slice(-this.spanWords).join('\u0000');
      if (this.#seen.has(span)) {
        this.#cutAt = Math.max(this.#beforeSpace(this.#wordStarts.at(-this.spanWords)!), this.#released);
        return this.#release(this.#cutAt);
      }
      this.#seen.add(span);
    }
    // A later span starts at the earliest with the (spanWords - 1)th last complete word.
    const heldWords = this.spanWords - 1;
    const safe = this.#words.length >= heldWords ? (heldWords === 0 ? this.#scanFrom : this.#beforeSpace(this.#wordStarts.at(-heldWords)!)) : 0;
    return this.#release(Math.max(safe, this.#text.length - this.maxHeldCharacters));
  }

  /** The rest of the answer, once the model has finished (up to the cut when it was cut). */
  flush(): string {
    return this.#release(this.#cutAt ?? this.#text.length);
  }

  /** The answer as it was kept. */
  get text() {
    return this.#text.slice(0, this.#cutAt ?? this.#text.length);
  }

  /** Where the whitespace before `index` starts: a cut answer does not end in it. */
  #beforeSpace(index: number) {
    while (index > 0 && /\s/.test(this.#text[index - 1]!)) index -= 1;
    return index;
  }

  #release(until: number): string {
    if (until <= this.#released) return '';
    const piece = this.#text.slice(this.#released, until);
    this.#released = until;
    return piece;
  }
}
