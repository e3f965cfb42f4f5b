import type { IndexHit } from './vector-index.js';

/** Hits asked of each side of a hybrid search before fusion (the prototype measured over 100). */
export const fusionDepth = 100;

/** Weight of the vector side in the convex combination; the keyword side has the rest. */
export const vectorWeight = 0.5;

/** Scales one side's scores to [0, 1] over its own hits: its best is 1, its worst 0. */
function minMaxScaled(hits: readonly IndexHit[]): Map<string, number> {
  const scaled = new Map<string, number>();
  if (hits.length === 0) return scaled;
  let low = Infinity;
  let high = -Infinity;
  for (const hit of hits) {
    low = Math.min(low, hit.score);
    high = Math.max(high, hit.score);
  }
  const span = high - low;
  for (const hit of hits) scaled.set(hit.chunkId, span > 0 ? (hit.score - low) / span : 1);
  return scaled;
}

/**
 * Hybrid ranking: a convex combination of the two sides' min-max scaled scores. A chunk found by
 * one side only gets 0 from the other. Chosen over reciprocal-rank fusion by measurement on
 * SciFact (docs/retrieval.md): it keeps how far apart the scores are, not just their order.
 */
export function fuseConvex(vector: readonly IndexHit[], keyword: readonly IndexHit[], weight = vectorWeight): IndexHit[] {
  const fromVector = minMaxScaled(vector);
  const fromKeyword = minMaxScaled(keyword);
  const ids = new Set([...fromVector.keys(), ...fromKeyword.keys()]);
  return [...ids]
    .map((chunkId) => ({ chunkId, score: weight * (fromVector.get(chunkId) ?? 0) + (1 - weight) * (fromKeyword.get(chunkId) ?? 0) }))
    .sort((a, b) => b.score - a.score || (a.chunkId < b.chunkId ? -1 : 1));
}

/** Reciprocal-rank fusion (k = 60), kept to compare against in the benchmark. */
export function fuseReciprocalRank(vector: readonly IndexHit[], keyword: readonly IndexHit[], k = 60): IndexHit[] {
  const scores = new Map<string, number>();
  for (const list of [vector, keyword]) {
    list.forEach((hit, rank) => scores.set(hit.chunkId, (scores.get(hit.chunkId) ?? 0) + 1 / (k + rank + 1)));
  }
  return [...scores]
    .map(([chunkId, score]) => ({ chunkId, score }))
    .sort((a, b) => b.score - a.score || (a.chunkId < b.chunkId ? -1 : 1));
}
