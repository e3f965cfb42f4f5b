import { describe, expect, it } from 'vitest';
import { UnknownCitationFilter } from './citations.js';
import { RepetitionStop } from './repetition.js';

const words = (text: string) => text.match(/\s*\S+/g)!;

describe('RepetitionStop', () => {
  it('ends a looping sentence once its second copy reaches the span, releasing nothing after that', () => {
    const sentence = ' The reactor is cooled by a liquid lead-bismuth eutectic [1].';
    const stop = new RepetitionStop(8);
    const pieces = words(sentence.repeat(5));
    const released = pieces.map((piece) => stop.push(piece));
    expect(stop.stopped).toBe(true);
    // The first copy and the 8 words of the second that make the repeat: the answer ends there.
    expect(released.join('')).toBe(sentence + words(sentence).slice(0, 8).join(''));
    expect(stop.text).toBe(released.join(''));
    expect(stop.push(' More.')).toBe('');
  });

  it('ends a loop of a short period, and one of several sentences', () => {
    const short = new RepetitionStop(8);
    expect(words(' yes'.repeat(30)).map((piece) => short.push(piece)).join('')).toBe(' yes'.repeat(9));
    const cycle = ' It is cooled by lead. The designer was Ilse Marant. Lead is heavy.';
    const long = new RepetitionStop(8);
    expect(words(`Answer:${cycle.repeat(3)}`).map((piece) => long.push(piece)).join('')).toBe(`Answer:${cycle}${words(cycle).slice(0, 8).join('')}`);
  });

  it('of the piece that completes a repeat, releases only what comes before the repeating span', () => {
    const sentence = 'one two three four five six seven eight';
    const stop = new RepetitionStop(8);
    expect(stop.push(`${sentence} and`)).toBe(`${sentence} and`);
    expect(stop.push(` ${sentence} nine`)).toBe('');
    expect(stop.stopped).toBe(true);
    expect(stop.text).toBe(`${sentence} and`);
  });

  it('leaves an answer that repeats words but no span of 8 of them, and streams each piece at once', () => {
    const text = 'Revenue was 3.2 billion dollars in 2021 [1]. Revenue was 2.4 billion dollars in 2020 [2]. Revenue was 3.6 billion dollars in 2019 [3].';
    const stop = new RepetitionStop(8);
    const pieces = words(text);
    expect(pieces.map((piece) => stop.push(piece))).toEqual(pieces);
    expect(stop.stopped).toBe(false);
  });

  it('never cuts text without spaces, and passes everything when off', () => {
    const text = '反应堆由液态铅铋共晶冷却。'.repeat(20);
    const stop = new RepetitionStop(8);
    expect([...text].map((piece) => stop.push(piece)).join('')).toBe(text);
    const off = new RepetitionStop(0);
    expect(words(' again'.repeat(30)).map((piece) => off.push(piece)).join('')).toBe(' again'.repeat(30));
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
