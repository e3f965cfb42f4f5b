/**
 * Ends a streamed answer where it starts repeating itself. Each piece is released as it comes;
 * as soon as the last `spanWords` words (whitespace-separated, compared in lower case) occurred
 * before, `stopped` is set and nothing more is released: a loop of any period ends once its
 * repeat reaches the span, and so does a sentence of that many words written twice. What of the
 * repeat was already streamed stays the answer's end (nothing is held back to hide it: a model
 * that pauses would leave its last words unseen). Of the piece that completes the repeat, only
 * the text before the repeating span is released. Text without spaces (Chinese, Japanese) has no
 * words to compare and is never cut; `spanWords` 0 turns the check off.
 */
export class RepetitionStop {
  #text = '';
  #released = 0;
  readonly #wordStarts: number[] = [];
  readonly #words: string[] = [];
  /** The spans of `spanWords` words seen so far. */
  readonly #seen = new Set<string>();
  /** Where the word being written starts. */
  #scanFrom = 0;
  #cutAt: number | null = null;

  constructor(private readonly spanWords: number) {}

  get stopped() {
    return this.#cutAt !== null;
  }

  /** Takes the next piece of the answer; returns the text that may be streamed now. */
  push(piece: string): string {
    if (this.stopped) return '';
    this.#text += piece;
    if (this.spanWords > 0) {
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
    }
    return this.#release(this.#text.length);
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
