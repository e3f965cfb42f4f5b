import { describe, expect, it } from 'vitest';
import { closestBySketch as closestSlots, FreshVectors, nearestFresh, parseSketch, parseVector, sketchOf } from './fresh-vectors.js';
import type { DocumentFilter } from './term-postings.js';

const closestBySketch = (...args: Parameters<typeof closestSlots>) => closestSlots(...args).map((candidate) => candidate.chunkId);

/** A 64-dimensional vector positive exactly at the given dimensions. */
function positiveAt(...dimensions: number[]) {
  const vector = new Float32Array(64).fill(-0.1);
  for (const dimension of dimensions) vector[dimension] = 0.3;
  return vector;
}

describe('fresh vectors', () => {
  it('sets a bit per dimension above zero, as the text of a bit string gives it', () => {
    const vector = positiveAt(0, 5, 31, 32, 63);
    vector[7] = 0;
    const text = Array.from(vector, (value) => (value > 0 ? '1' : '0')).join('');
    expect(sketchOf(vector)).toEqual(parseSketch(text));
    expect(Array.from(sketchOf(vector))).toEqual([(1 << 0) | (1 << 5) | (1 << 31), 1 | (1 << 31)].map((word) => word >>> 0));
  });

  it("takes the sketches that score highest against the query's values, ties in the order held, across workspaces and within the filter", () => {
    const first = new FreshVectors();
    const second = new FreshVectors();
    first.set('a', 'doc1', (positiveAt(1, 2, 3)));
    first.set('b', 'doc1', (positiveAt(1, 2)));
    first.set('c', 'doc2', (positiveAt(40, 41, 42, 43)));
    second.set('d', 'doc3', (positiveAt(1, 2, 3, 4)));
    second.set('e', 'doc3', (positiveAt(1, 2, 3)));
    const query = positiveAt(1, 2, 3);
    const closest = (count: number, filter: DocumentFilter = {}) => closestBySketch([first, second], query, count, filter).sort();
    expect(closest(2)).toEqual(['a', 'e']);
    expect(closestBySketch([first, second], query, 1, {})).toEqual(['a']);
    expect(closestBySketch([second, first], query, 1, {})).toEqual(['e']);
    // Both d and b differ from the query's sketch in one bit; d where the query is slightly
    // negative (-0.1), b where it is strongly positive (0.3): d is the nearer.
    expect(closest(3)).toEqual(['a', 'd', 'e']);
    expect(closest(4)).toEqual(['a', 'b', 'd', 'e']);
    expect(closest(10)).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(closest(2, { excluded: new Set(['doc1']) })).toEqual(['d', 'e']);
    expect(closest(2, { only: new Set(['doc2']) })).toEqual(['c']);
    expect(closestBySketch([new FreshVectors()], query, 5, {})).toEqual([]);
  });

  it('keeps every other chunk findable when one is removed or written again', () => {
    const sketches = new FreshVectors();
    for (let i = 0; i < 100; i += 1) sketches.set(`c${i}`, 'doc', (positiveAt(i % 64)));
    sketches.delete('c0');
    sketches.delete('c50');
    sketches.delete('missing');
    sketches.set('c10', 'doc', (positiveAt(63)));
    expect(sketches.size).toBe(98);
    expect(sketches.has('c0') || sketches.has('c50')).toBe(false);
    // c99 took c0's place, and c98 took c50's; each is still found by its own sketch.
    expect(closestBySketch([sketches], positiveAt(99 % 64), 2, {}).sort()).toEqual(['c35', 'c99']);
    expect(closestBySketch([sketches], positiveAt(63), 2, {}).sort()).toEqual(['c10', 'c63']);
    expect(closestBySketch([sketches], positiveAt(98 % 64), 2, {}).sort()).toEqual(['c34', 'c98']);
    expect(() => sketches.set('x', 'doc', new Float32Array(5))).toThrow(/5 dimensions/);
  });

  it('reads a vector from its binary form, and ranks the candidates by their exact cosine', () => {
    const bytes = new Uint8Array(4 + 4 * 3);
    const view = new DataView(bytes.buffer);
    view.setInt16(0, 3);
    [0.5, -1.25, 3].forEach((value, i) => view.setFloat32(4 + 4 * i, value));
    expect(Array.from(parseVector(bytes))).toEqual([0.5, -1.25, 3]);
    expect(() => parseVector(bytes.subarray(0, 12))).toThrow(/3 dimensions/);

    // Same sketch, different angles: the sketch cannot order them, the vectors can.
    const sketches = new FreshVectors();
    const tilted = (angle: number) => {
      const vector = new Float32Array(64).fill(0.01);
      vector[0] = Math.cos(angle);
      vector[1] = Math.sin(angle);
      return vector;
    };
    [0.6, 0.2, 0.4, 0.1, 0.5].forEach((angle, i) => sketches.set(`t${i}`, 'doc', tilted(angle)));
    sketches.set('far', 'doc', positiveAt(40));
    expect(nearestFresh([sketches], tilted(0), 3, 10, {})).toEqual(['t3', 't1', 't2']);
    expect(nearestFresh([sketches], tilted(0), 2, 10, { excluded: new Set(['doc']) })).toEqual([]);
  });
});
