import type { DocumentFilter } from './term-postings.js';

/**
 * A vector's sign bits, one per dimension, set where the component is above zero (as pgvector's
 * `binary_quantize`), packed 32 to a word: dimension i is bit (i % 32) of word i / 32.
 */
export function sketchOf(vector: Float32Array): Uint32Array {
  const words = new Uint32Array(Math.ceil(vector.length / 32));
  for (let i = 0; i < vector.length; i += 1) if (vector[i]! > 0) words[i >>> 5]! |= 1 << (i & 31);
  return words;
}

/**
 * A vector from pgvector's binary form (`vector_send`): the dimensions as a 16-bit integer, 16
 * unused bits, then each component as a big-endian 32-bit float.
 */
export function parseVector(bytes: Uint8Array): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const dimensions = view.getInt16(0);
  if (bytes.byteLength !== 4 + 4 * dimensions) throw new Error(`a vector of ${dimensions} dimensions cannot take ${bytes.byteLength} bytes`);
  const vector = new Float32Array(dimensions);
  for (let i = 0; i < dimensions; i += 1) vector[i] = view.getFloat32(4 + 4 * i);
  return vector;
}

/** A sketch from the text of pgvector's `bit` type ('0110…', dimension 0 first). */
export function parseSketch(bits: string): Uint32Array {
  const words = new Uint32Array(Math.ceil(bits.length / 32));
  for (let i = 0; i < bits.length; i += 1) if (bits.charCodeAt(i) === 49) words[i >>> 5]! |= 1 << (i & 31);
  return words;
}

/**
 * How a query scores sketches: per byte of a sketch (8 dimensions), for each of its 256 values,
 * the sum of the query's components at those dimensions, added where the bit is set and taken
 * away where it is not. A sketch's score is then one look-up per byte: the query's dot product
 * with the sketch read as +1 and -1. Scoring the sketches against the query's own values, not its
 * sketch, finds more of the nearest (docs/retrieval.md).
 */
function scoreTables(vector: Float32Array, words: number): Float32Array {
  const tables = new Float32Array(words * 4 * 256);
  for (let byte = 0; byte < words * 4; byte += 1) {
    const table = tables.subarray(byte * 256, (byte + 1) * 256);
    for (let bit = 0; bit < 8; bit += 1) table[0]! -= vector[byte * 8 + bit] ?? 0;
    for (let value = 1; value < 256; value += 1) {
      const lowest = 31 - Math.clz32(value & -value);
      table[value] = table[value & (value - 1)]! + 2 * (vector[byte * 8 + lowest] ?? 0);
    }
  }
  return tables;
}

/**
 * The vectors of one workspace's chunks not yet merged into the HNSW graph, with their sketches,
 * held beside its keyword postings. A search scores every sketch (a few milliseconds for
 * 100,000), compares the best with the query exactly here, and has the store compute the
 * distances it returns for the nearest few only: compared one by one in the store, 90,000
 * waiting chunks took about 430 ms a search, and reading 800 candidates by key pushed the
 * graph's pages out of the store's page cache (docs/retrieval.md).
 *
 * Rows are kept dense: a removed chunk's place takes the last chunk's.
 */
export class FreshVectors {
  #words = 0;
  #dimensions = 0;
  #vectors = new Float32Array(0);
  #chunkIds: string[] = [];
  #documentIds: string[] = [];
  #slotOf = new Map<string, number>();
  #bits = new Uint32Array(0);

  get size() {
    return this.#chunkIds.length;
  }

  /** Bytes held, roughly: the vectors, the packed bits, and each chunk's two ids with the map entry. */
  get approximateBytes() {
    return this.#vectors.byteLength + this.#bits.byteLength + this.size * 200;
  }

  has(chunkId: string) {
    return this.#slotOf.has(chunkId);
  }

  set(chunkId: string, documentId: string, vector: Float32Array) {
    const sketch = sketchOf(vector);
    if (this.#dimensions === 0) {
      this.#dimensions = vector.length;
      this.#words = sketch.length;
    } else if (vector.length !== this.#dimensions) throw new Error(`a vector of ${vector.length} dimensions cannot join vectors of ${this.#dimensions}`);
    let slot = this.#slotOf.get(chunkId);
    if (slot === undefined) {
      slot = this.#chunkIds.length;
      this.#chunkIds.push(chunkId);
      this.#documentIds.push(documentId);
      this.#slotOf.set(chunkId, slot);
      if (this.#bits.length < (slot + 1) * this.#words) {
        const capacity = Math.max(64, 2 * (slot + 1));
        const bits = new Uint32Array(capacity * this.#words);
        bits.set(this.#bits);
        this.#bits = bits;
        const vectors = new Float32Array(capacity * this.#dimensions);
        vectors.set(this.#vectors);
        this.#vectors = vectors;
      }
    } else this.#documentIds[slot] = documentId;
    this.#bits.set(sketch, slot * this.#words);
    this.#vectors.set(vector, slot * this.#dimensions);
  }

  delete(chunkId: string) {
    const slot = this.#slotOf.get(chunkId);
    if (slot === undefined) return;
    const last = this.#chunkIds.length - 1;
    if (slot !== last) {
      const moved = this.#chunkIds[last]!;
      this.#chunkIds[slot] = moved;
      this.#documentIds[slot] = this.#documentIds[last]!;
      this.#slotOf.set(moved, slot);
      this.#bits.copyWithin(slot * this.#words, last * this.#words, (last + 1) * this.#words);
      this.#vectors.copyWithin(slot * this.#dimensions, last * this.#dimensions, (last + 1) * this.#dimensions);
    }
    this.#chunkIds.pop();
    this.#documentIds.pop();
    this.#slotOf.delete(chunkId);
  }

  /** The cosine similarity of the query with the held vector in `slot`. */
  cosine(slot: number, query: Float32Array, queryNorm: number): number {
    const vectors = this.#vectors;
    let dot = 0;
    let norm = 0;
    for (let i = 0, offset = slot * this.#dimensions; i < this.#dimensions; i += 1, offset += 1) {
      dot += vectors[offset]! * query[i]!;
      norm += vectors[offset]! * vectors[offset]!;
    }
    return norm === 0 || queryNorm === 0 ? 0 : dot / Math.sqrt(norm * queryNorm);
  }

  /**
   * Each held sketch's score against the query (see scoreTables; higher is nearer), NaN for those
   * the filter leaves out, in slot order, with the ids of those slots.
   */
  scores(tables: Float32Array, filter: DocumentFilter): { chunkIds: readonly string[]; scores: Float32Array } {
    const count = this.size;
    const words = this.#words;
    const scores = new Float32Array(count);
    if (count > 0 && tables.length !== words * 4 * 256) throw new Error(`a query of ${tables.length / 1024} words cannot be compared with sketches of ${words}`);
    const bits = this.#bits;
    const filtering = filter.only !== undefined || (filter.excluded?.size ?? 0) > 0;
    for (let slot = 0, offset = 0; slot < count; slot += 1, offset += words) {
      const documentId = filtering ? this.#documentIds[slot]! : '';
      if (filtering && ((filter.only && !filter.only.has(documentId)) || filter.excluded?.has(documentId))) {
        scores[slot] = Number.NaN;
        continue;
      }
      let score = 0;
      for (let word = 0, table = 0; word < words; word += 1, table += 1024) {
        const value = bits[offset + word]!;
        score += tables[table + (value & 255)]! + tables[table + 256 + ((value >>> 8) & 255)]! + tables[table + 512 + ((value >>> 16) & 255)]! + tables[table + 768 + (value >>> 24)]!;
      }
      scores[slot] = score;
    }
    return { chunkIds: this.#chunkIds, scores };
  }
}

/** Score bins of the selection in closestBySketch: the chunks of one bin score within 1/4096 of the range of one another. */
const scoreBins = 4096;

/**
 * The `count` chunks whose sketches score highest against the vector, across workspaces' held
 * sketches, in no particular order; within the lowest score bin taken, in slot order. Linear in
 * the chunks held: a histogram of the scores finds the cut.
 */
export function closestBySketch(held: readonly FreshVectors[], vector: Float32Array, count: number, filter: DocumentFilter): { held: FreshVectors; slot: number; chunkId: string }[] {
  const tables = scoreTables(vector, Math.ceil(vector.length / 32));
  const scored = held.filter((sketches) => sketches.size > 0).map((sketches) => ({ sketches, ...sketches.scores(tables, filter) }));
  let lowest = Infinity;
  let highest = -Infinity;
  for (const { scores } of scored) {
    for (const score of scores) {
      if (score < lowest) lowest = score;
      if (score > highest) highest = score;
    }
  }
  if (lowest === Infinity) return [];
  const width = (highest - lowest) / scoreBins || 1;
  const binOf = (score: number) => Math.min(scoreBins - 1, Math.floor((highest - score) / width));
  const histogram = new Int32Array(scoreBins);
  for (const { scores } of scored) for (const score of scores) if (!Number.isNaN(score)) histogram[binOf(score)]! += 1;
  let cut = -1;
  for (let taken = 0; cut < scoreBins - 1 && taken < count; ) taken += histogram[++cut]!;
  const closest: { held: FreshVectors; slot: number; chunkId: string }[] = [];
  const atCut: typeof closest = [];
  for (const { sketches, chunkIds, scores } of scored) {
    for (let slot = 0; slot < scores.length; slot += 1) {
      const score = scores[slot]!;
      if (Number.isNaN(score)) continue;
      const bin = binOf(score);
      if (bin < cut) closest.push({ held: sketches, slot, chunkId: chunkIds[slot]! });
      else if (bin === cut) atCut.push({ held: sketches, slot, chunkId: chunkIds[slot]! });
    }
  }
  return closest.concat(atCut.slice(0, Math.max(0, count - closest.length)));
}

/**
 * The ids of the `count` held chunks nearest the vector by cosine, best first, found among the
 * `candidates` whose sketches score highest.
 */
export function nearestFresh(held: readonly FreshVectors[], vector: Float32Array, count: number, candidates: number, filter: DocumentFilter): string[] {
  let queryNorm = 0;
  for (const value of vector) queryNorm += value * value;
  return closestBySketch(held, vector, Math.max(count, candidates), filter)
    .map((candidate) => ({ chunkId: candidate.chunkId, similarity: candidate.held.cosine(candidate.slot, vector, queryNorm) }))
    .sort((a, b) => b.similarity - a.similarity)
    .slice(0, count)
    .map((candidate) => candidate.chunkId);
}
