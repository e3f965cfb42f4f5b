import { beforeAll, describe, expect, it } from 'vitest';
import { VectorGraph } from './vector-graph.js';
import { dimensions, seeded } from '../../../test/support/vector-index.js';

const random = seeded(26);
const randomVector = () => {
  const vector = new Float32Array(dimensions);
  for (let i = 0; i < dimensions; i += 1) vector[i] = random() * 2 - 1;
  return vector;
};
/** Near one of 60 directions, as a model's vectors of texts on a few topics are. */
const centres = Array.from({ length: 60 }, randomVector);
const topical = () => {
  const centre = centres[Math.floor(random() * centres.length)]!;
  const vector = randomVector();
  for (let i = 0; i < dimensions; i += 1) vector[i] = centre[i]! + 0.6 * vector[i]!;
  return vector;
};
const cosine = (a: Float32Array, b: Float32Array) => {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i += 1) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return dot / Math.sqrt(na * nb);
};

describe('VectorGraph: the vectors of a workspace in an HNSW graph in memory', () => {
  const chunks = Array.from({ length: 3_000 }, (_, i) => ({ chunkId: `c${i}`, documentId: `d${i % 30}`, vector: topical() }));
  const exactNearest = (query: Float32Array, limit: number, excluded = new Set<string>()) =>
    chunks
      .filter((chunk) => !excluded.has(chunk.documentId))
      .map((chunk) => ({ chunkId: chunk.chunkId, score: cosine(query, chunk.vector) }))
      .sort((a, b) => b.score - a.score)
      .slice(0, limit);
  const graph = new VectorGraph(dimensions);
  beforeAll(() => {
    const mark = graph.mark();
    for (const chunk of chunks) graph.readIn(mark, chunk.chunkId, chunk.documentId, chunk.vector);
    graph.finish();
  });

  it('finds the nearest chunks an exact comparison finds, with their cosine similarity', () => {
    let found = 0;
    for (let round = 0; round < 20; round += 1) {
      const query = topical();
      const exact = exactNearest(query, 20);
      const hits = graph.nearest(query, 20, {})!;
      expect(hits).toHaveLength(20);
      const byId = new Map(hits.map((hit) => [hit.chunkId, hit.score]));
      for (const hit of exact) {
        if (!byId.has(hit.chunkId)) continue;
        found += 1;
        expect(byId.get(hit.chunkId)).toBeCloseTo(hit.score, 5);
      }
      expect(hits.map((hit) => hit.score)).toEqual([...hits.map((hit) => hit.score)].sort((a, b) => b - a));
    }
    expect(found / 400).toBeGreaterThanOrEqual(0.97);
  });

  it("leaves out excluded documents' chunks and still returns as many hits as asked", () => {
    const excluded = new Set(Array.from({ length: 25 }, (_, i) => `d${i}`));
    const query = topical();
    const hits = graph.nearest(query, 50, { excluded })!;
    expect(hits).toHaveLength(50);
    expect(hits.filter((hit) => excluded.has(`d${Number(hit.chunkId.slice(1)) % 30}`))).toEqual([]);
    const exact = new Set(exactNearest(query, 50, excluded).map((hit) => hit.chunkId));
    expect(hits.filter((hit) => exact.has(hit.chunkId)).length).toBeGreaterThanOrEqual(47);
  });

  it('reads vectors and queries that are views into a larger buffer as themselves', () => {
    const packed = new Float32Array(4 * dimensions);
    for (let i = 0; i < 4; i += 1) packed.set(topical(), i * dimensions);
    const views = new VectorGraph(dimensions);
    const mark = views.mark();
    for (let i = 0; i < 4; i += 1) views.readIn(mark, `v${i}`, 'd', packed.subarray(i * dimensions, (i + 1) * dimensions));
    views.finish();
    for (let i = 0; i < 4; i += 1) expect(views.nearest(packed.subarray(i * dimensions, (i + 1) * dimensions), 1, {})![0]!.chunkId).toBe(`v${i}`);
  });

  it('notes nothing for a chunk a sync finds as the graph holds it, and keeps searching the graph', () => {
    const held = new VectorGraph(dimensions);
    const [a, b] = [topical(), topical()];
    held.readIn(held.mark(), 'x', 'd', a);
    held.finish();
    held.applySync('x', 'd', Float32Array.from(a));
    held.applySync('gone');
    expect([held.complete, held.pending]).toEqual([true, 0]);
    held.applySync('x', 'd', b);
    held.applySync('x', 'e', b);
    expect([held.complete, held.pending]).toEqual([false, 1]);
    held.applyPending(1);
    held.applySync('x', 'e', Float32Array.from(b));
    expect([held.complete, held.pending]).toEqual([true, 0]);
    expect(held.nearest(b, 1, { excluded: new Set(['d']) })).toEqual([{ chunkId: 'x', score: expect.closeTo(1, 5) }]);
  });

  it('leaves a search limited to some documents to the store', () => {
    expect(graph.nearest(randomVector(), 10, { only: new Set(['d1']) })).toBeUndefined();
  });

  it("keeps a sync's change over a page the build read before it", () => {
    const building = new VectorGraph(dimensions);
    const [a, b, c] = [randomVector(), randomVector(), randomVector()];
    const mark = building.mark();
    // The page held chunk x with vector a and chunk y; before it was taken in, a sync found x
    // written again with vector b and y deleted.
    building.applySync('x', 'd', b);
    building.applySync('y');
    building.readIn(mark, 'x', 'd', a);
    building.readIn(mark, 'y', 'd', c);
    // A page read after the sync is newer than it.
    building.readIn(building.mark(), 'z', 'd', c);
    building.finish();
    // The sync's change is noted (the deletion of a chunk the graph does not hold needs none): the
    // graph is not searched until it is applied.
    expect([building.complete, building.pending]).toEqual([false, 1]);
    expect(building.applyPending(10)).toBe(0);
    expect(building.complete).toBe(true);
    expect(building.size).toBe(2);
    expect(building.nearest(b, 1, {})).toEqual([{ chunkId: 'x', score: expect.closeTo(1, 5) }]);
    expect(building.nearest(c, 2, {})!.map((hit) => hit.chunkId)).toEqual(['z', 'x']);
    building.applySync('z');
    building.applyPending(1);
    expect(building.nearest(c, 2, {})!.map((hit) => hit.chunkId)).toEqual(['x']);
  });
});
