import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { readingAhead } from './reading-ahead.js';

/** Pages 1 to `count`, each read in a few milliseconds; `log` records when each is asked for, and the end. */
async function* slowPages(count: number, log: string[], failing?: number): AsyncGenerator<number> {
  try {
    for (let page = 1; page <= count; page++) {
      log.push(`ask ${page}`);
      await sleep(5);
      if (page === failing) throw new Error(`page ${page} could not be read`);
      yield page;
    }
  } finally {
    log.push('closed');
  }
}

/** Takes every page, a while each, logging when it starts and ends. */
async function takeAll(pages: AsyncGenerator<number>, log: string[]) {
  for await (const page of pages) {
    log.push(`take ${page}`);
    await sleep(20);
    log.push(`took ${page}`);
  }
}

describe('reading pages ahead', () => {
  it('asks for the next page while the last is taken when told to, and only when the caller wants it otherwise', async () => {
    const ahead: string[] = [];
    await takeAll(readingAhead(slowPages(3, ahead), () => true), ahead);
    expect(ahead.indexOf('ask 2')).toBeLessThan(ahead.indexOf('took 1'));
    expect(ahead.indexOf('ask 3')).toBeLessThan(ahead.indexOf('took 2'));
    expect(ahead.filter((line) => line.startsWith('took'))).toEqual(['took 1', 'took 2', 'took 3']);

    const inTurn: string[] = [];
    await takeAll(readingAhead(slowPages(3, inTurn), () => false), inTurn);
    expect(inTurn).toEqual(['ask 1', 'take 1', 'took 1', 'ask 2', 'take 2', 'took 2', 'ask 3', 'take 3', 'took 3', 'closed']);
  });

  it('asks again each time: a load that a search starts waiting for reads ahead from then on', async () => {
    const log: string[] = [];
    let waitedFor = false;
    const pages = readingAhead(slowPages(4, log), () => waitedFor);
    for await (const page of pages) {
      log.push(`take ${page}`);
      if (page === 2) waitedFor = true;
      await sleep(20);
      log.push(`took ${page}`);
    }
    expect(log.indexOf('ask 2')).toBeGreaterThan(log.indexOf('took 1'));
    expect(log.indexOf('ask 3')).toBeGreaterThan(log.indexOf('took 2'));
    expect(log.indexOf('ask 4')).toBeLessThan(log.indexOf('took 3'));
  });

  it('throws a page read ahead that failed once the page before it is taken, and leaves no rejection unhandled', async () => {
    const log: string[] = [];
    await expect(takeAll(readingAhead(slowPages(3, log, 2), () => true), log)).rejects.toThrow('page 2 could not be read');
    expect(log).toContain('took 1');
    expect(log).not.toContain('take 2');
  });

  it('ends the pages when the caller stops early', async () => {
    const log: string[] = [];
    for await (const page of readingAhead(slowPages(5, log), () => true)) if (page === 2) break;
    expect(log.at(-1)).toBe('closed');
    expect(log).not.toContain('ask 4');
  });
});
