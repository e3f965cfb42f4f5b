import { describe, expect, it } from 'vitest';
import { sourceGroups } from './upload.js';

const item = (name: string, size: number) => ({ name, file: { bytes: new Uint8Array(size) } });
const names = (groups: { name: string }[][]) => groups.map((group) => group.map((entry) => entry.name));

describe('sourceGroups', () => {
  it('keeps the order and puts files together up to the bound', () => {
    expect(names(sourceGroups([item('a', 3), item('b', 4), item('c', 3), item('d', 1)], 10))).toEqual([['a', 'b', 'c'], ['d']]);
  });

  it('gives a file larger than the bound a group of its own', () => {
    expect(names(sourceGroups([item('a', 2), item('big', 25), item('b', 2)], 10))).toEqual([['a'], ['big'], ['b']]);
  });

  it('puts at most the given number of files in a group', () => {
    expect(names(sourceGroups([item('a', 1), item('b', 1), item('c', 1)], 10, 2))).toEqual([['a', 'b'], ['c']]);
  });

  it('makes no group of nothing', () => {
    expect(sourceGroups([], 10)).toEqual([]);
  });
});
