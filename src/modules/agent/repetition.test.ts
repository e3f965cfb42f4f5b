import { describe, expect, it } from 'vitest';
import { UnknownCitationFilter } from './citations.js';
import { RepetitionStop } from './repetition.js';

/** Feeds the pieces one by one; returns what was released at each step and in all. */
function feed(stop: RepetitionStop, pieces: string[]) {
  const released = pieces.map((piece) => stop.push(piece));
  return { released, all: released.join('') + stop.flush() };
}

const words = (text: string) => text.match(/\s*\S+/g)!;

describe('RepetitionStop', () => {
  it('cuts a looping sentence at the start of its second copy, releasing nothing of it', () => {
    const sentence = ' The reactor is cooled by a liquid lead-bismuth eutectic [1].';
    const stop = new RepetitionStop(8);
    const { released, all } = feed(stop, words(sentence.repeat(5)));
    expect(stop.stopped).toBe(true);
    expect(all).toBe(sentence);
    expect(released.join('')).toBe(sentence);
  });

  it('cuts a loop of a short period, and one of several sentences', () => {
    expect(feed(new RepetitionStop(8), words(' yes'.repeat(30))).all).toBe(' yes');
    const cycle = ' It is cooled by lead. The designer was Ilse Marant. Lead is heavy.';
    expect(feed(new RepetitionStop(8), words(`Answer:${cycle.repeat(3)}`)).all).toBe(`Answer:${cycle}`);
  });

  it('leaves an answer that repeats words but no span of 8 of them', () => {
    const text = 'Revenue was 3.2 billion dollars in 2021 [1]. Revenue was 2.4 billion dollars in 2020 [2]. Revenue was 3.6 billion dollars in 2019 [3].';
    const stop = new RepetitionStop(8);
    expect(feed(stop, words(text)).all).toBe(text);
    expect(stop.stopped).toBe(false);
  });

  it('holds back only the last words: a long answer streams as it is written', () => {
    const text = Array.from({ length: 40 }, (_, index) => ` w${index}`).join('');
    const { released } = feed(new RepetitionStop(8), words(text));
    // After 20 words, all but the last 7 complete words and the one being written are out.
    expect(released.slice(0, 20).join('')).toBe(words(text).slice(0, 12).join(''));
  });

  it('streams text without spaces after a bounded delay, and passes everything when off', () => {
    const text = '反应堆由液态铅铋共晶冷却。'.repeat(20);
    const { released } = feed(new RepetitionStop(8, 80), [...text]);
    expect(released.join('').length).toBe(text.length - 80);
    expect(feed(new RepetitionStop(0), words(' again'.repeat(30))).all).toBe(' again'.repeat(30));
  });
});

describe('UnknownCitationFilter', () => {
  it('drops markers naming no passage, keeps the known numbers of a mixed one, and waits for a marker split across pieces', () => {
    const filter = new UnknownCitationFilter(new Set([1, 2]));
    const pieces = ['Cooled by lead [1][7].', ' Built on Mars [', '9', '].', ' Heavy [2, 8].', ' See [1'];
    const out = pieces.map((piece) => filter.push(piece));
    expect(out[1]).toBe(' Built on Mars');
    expect(out.join('') + filter.flush()).toBe('Cooled by lead [1]. Built on Mars. Heavy [2]. See [1');
  });
});
