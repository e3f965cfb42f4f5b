import { createRequire } from 'node:module';
import type UsearchModule from 'usearch';
import { isStoredUuid } from '../../ids.js';
import { SnapshotFormatError, type DocumentFilter } from './term-postings.js';
import type { IndexHit } from './vector-index.js';

/**
 * The graph's shape (USearch's HNSW): links per node, and the candidates kept while adding and
 * while searching. Measured on bench:search's 100,000 SciFact-like chunks against an exact scan
 * (docs/retrieval.md): 300 candidates found 98.9 % of the exact 10 nearest and 95.9 % of the 100
 * nearest in about 1 ms (the store's graph, 200 candidates: 98.7 % and 93.7 %); 100 candidates
 * found 95.7 % and 85.1 %. 128 candidates while adding gained less and doubled the build's time.
 */
const connectivity = 16;
const expansionAdd = 64;
const expansionSearch = 300;

/** Bytes a node's links take, roughly: `connectivity` links each way on the base layer, 4 bytes each, and the upper layers' share. */
const linkBytes = connectivity * 2 * 4 * 1.1;
/** Bytes each chunk's ids take in the maps beside the graph, roughly. */
const idBytes = 180;

type Entry = { chunkId: string; documentId: string; fingerprint: number };

/** The ids saved beside a graph's file (`idsOf`): "KBVG", the format, the entries, the bytes of their ids' text. */
const idsMagic = 0x4756424b;
const idsFormat = 1;
const idsHeaderBytes = 16;
type Change = { documentId: string; vector: Float32Array; fingerprint: number } | null;

/** FNV-1a over a vector's bytes: tells a sync that reads a chunk again unchanged (a horizon behind its write) from a new vector. */
function fingerprintOf(vector: Float32Array): number {
  const words = new Uint32Array(vector.buffer, vector.byteOffset, vector.length);
  let hash = 0x811c9dc5;
  for (let i = 0; i < words.length; i += 1) hash = Math.imul(hash ^ words[i]!, 0x01000193);
  return hash >>> 0;
}

// The package's CommonJS build: its ES module build finds its native code from the caller's stack
// trace, which fails once the code is transformed (vitest, bundlers).
const usearch = createRequire(import.meta.url)('usearch') as typeof UsearchModule;

/**
 * A workspace's chunk vectors in an HNSW graph in this process's memory (USearch, native code,
 * single precision, cosine), beside its keyword postings. On the embedded store the graph's
 * statement in PGlite (WebAssembly, one thread) took 7-13 ms of a search at 120,000 chunks; this
 * graph answers the same question in about 2 ms (docs/retrieval.md).
 *
 * It is filled from the store while searches go on (`readIn`, page by page), or restored from a
 * save (`restore`, index-snapshots.ts), and follows the change log (`applySync`), like the postings. A sync only notes its changes: adding a vector takes about
 * 0.3 ms, and a sync after a bulk write finds thousands, which would hold the event loop for
 * seconds; they are applied a few at a time in the background (`applyPending`), and searches use
 * the store's graph until none is left. A page is read before it is taken in, so a sync may have
 * set a chunk anew in between: the graph counts the syncs' changes, and a page row is taken only
 * when no sync touched its chunk after the page was read. A change after the page's read is in
 * the log, so a later sync sets it in any case.
 */
export class VectorGraph {
  readonly #index: InstanceType<typeof usearch.Index>;
  readonly #dimensions: number;
  readonly #keyOf = new Map<string, number>();
  readonly #entries = new Map<number, Entry>();
  readonly #documentChunks = new Map<string, number>();
  #nextKey = 1;
  #built = false;
  /** Changes found by syncs and not applied yet: the chunk's document and vector, or null when it is gone. */
  readonly #pending = new Map<string, Change>();
  #changes = 0;
  readonly #changedAt = new Map<string, number>();
  /** Vectors set or removed since the graph was made: a save notes it, to know later whether the graph changed since. */
  #version = 0;

  constructor(dimensions: number) {
    this.#dimensions = dimensions;
    this.#index = new usearch.Index({
      dimensions,
      metric: usearch.MetricKind.Cos,
      quantization: usearch.ScalarKind.F32,
      connectivity,
      expansion_add: expansionAdd,
      expansion_search: expansionSearch,
      multi: false,
    });
  }

  /**
   * A complete graph as `save` wrote it: USearch's file, and the ids beside it. Throws
   * SnapshotFormatError when they do not go together (another graph's ids, a file cut short, other
   * dimensions); USearch refuses a file it cannot read whole.
   */
  static restore(dimensions: number, file: string, ids: Uint8Array): VectorGraph {
    const graph = new VectorGraph(dimensions);
    const entries = decodeIds(ids);
    try {
      graph.#index.load(file);
    } catch (error) {
      throw new SnapshotFormatError(`USearch could not read the graph: ${(error as Error).message}`);
    }
    if (graph.#index.dimensions() !== dimensions) throw new SnapshotFormatError(`the graph has ${graph.#index.dimensions()} dimensions where ${dimensions} are used`);
    if (graph.#index.size() !== entries.length) throw new SnapshotFormatError(`the graph holds ${graph.#index.size()} vectors and its ids ${entries.length}`);
    const keys = BigUint64Array.from(entries, (entry) => BigInt(entry.key));
    if (entries.length > 0 && !(graph.#index.contains(keys) as boolean[]).every(Boolean)) throw new SnapshotFormatError('its ids name vectors the graph does not hold');
    for (const { key, chunkId, documentId, fingerprint } of entries) {
      if (graph.#keyOf.has(chunkId)) throw new SnapshotFormatError(`chunk ${chunkId} is named twice`);
      graph.#keyOf.set(chunkId, key);
      graph.#entries.set(key, { chunkId, documentId, fingerprint });
      graph.#documentChunks.set(documentId, (graph.#documentChunks.get(documentId) ?? 0) + 1);
      if (key >= graph.#nextKey) graph.#nextKey = key + 1;
    }
    graph.#built = true;
    return graph;
  }

  /** Whether the graph holds the workspace as its last sync found it: searches use it then. */
  get complete() {
    return this.#built && this.#pending.size === 0;
  }

  /** Changes found by syncs and not applied yet. */
  get pending() {
    return this.#pending.size;
  }

  get size() {
    return this.#entries.size;
  }

  get version() {
    return this.#version;
  }

  /**
   * Writes the complete graph to `file` in USearch's format, and returns the ids that go beside it
   * (`restore` takes both). Native code writing the whole graph at once: 0.15-0.28 s per 100,000
   * chunks of 384 dimensions, during which this thread does nothing else (docs/retrieval.md).
   */
  save(file: string): Uint8Array {
    if (!this.complete) throw new Error('only a complete graph is saved');
    this.#index.save(file);
    return encodeIds(this.#entries);
  }

  /** Bytes held, roughly: the vectors and links of every slot reserved, and the ids beside them. */
  get approximateBytes() {
    return this.#index.capacity() * (this.#dimensions * 4 + linkBytes) + this.#entries.size * idBytes + this.#pending.size * (this.#dimensions * 4 + idBytes);
  }

  /** Where a page's reading begins: its rows are taken with `readIn(mark, ...)`. */
  mark(): number {
    return this.#changes;
  }

  /** A chunk read by the build after `mark`: taken unless a sync has set it since. */
  readIn(mark: number, chunkId: string, documentId: string, vector: Float32Array) {
    if ((this.#changedAt.get(chunkId) ?? 0) > mark) return;
    this.#set(chunkId, documentId, vector);
  }

  /** The build has read every chunk. */
  finish() {
    this.#built = true;
    this.#changedAt.clear();
  }

  /**
   * Notes a chunk as a sync found it: present with its vector, or gone (no vector). `applyPending`
   * applies it. A chunk the graph holds as found is not noted: a sync reads again the changes of
   * transactions that may not have been finished at the previous one (on PostgreSQL, any that
   * another session's open transaction keeps above the horizon), and each note keeps searches off
   * the graph until it is applied.
   */
  applySync(chunkId: string, documentId?: string, vector?: Float32Array) {
    const change: Change = documentId !== undefined && vector ? { documentId, vector, fingerprint: fingerprintOf(vector) } : null;
    // Counted even when nothing is noted: a page read before this sync may hold an older state.
    if (!this.#built) this.#changedAt.set(chunkId, ++this.#changes);
    if (this.#holds(chunkId, change)) return;
    this.#pending.set(chunkId, change);
  }

  /** Whether the graph holds the chunk as `change` has it, with no note about it waiting. */
  #holds(chunkId: string, change: Change): boolean {
    if (this.#pending.has(chunkId)) return false;
    const key = this.#keyOf.get(chunkId);
    if (change === null || key === undefined) return change === null && key === undefined;
    const entry = this.#entries.get(key)!;
    return entry.documentId === change.documentId && entry.fingerprint === change.fingerprint;
  }

  /** Applies up to `count` of the changes syncs found, oldest first; returns how many are left. */
  applyPending(count: number): number {
    for (const [chunkId, change] of this.#pending) {
      if (count <= 0) break;
      count -= 1;
      this.#pending.delete(chunkId);
      if (change) this.#set(chunkId, change.documentId, change.vector);
      else this.#delete(chunkId);
    }
    return this.#pending.size;
  }

  /**
   * The `limit` nearest chunks, best first, leaving out the excluded documents' chunks (it asks
   * the graph for as many more as those documents hold). Undefined for a search limited to some
   * documents: the store's filtered scan answers it.
   */
  nearest(query: Float32Array, limit: number, filter: DocumentFilter): IndexHit[] | undefined {
    if (filter.only) return undefined;
    if (this.#entries.size === 0 || limit <= 0) return [];
    let excludedChunks = 0;
    for (const documentId of filter.excluded ?? []) excludedChunks += this.#documentChunks.get(documentId) ?? 0;
    const matches = this.#index.search(query, Math.min(this.#entries.size, limit + excludedChunks), 1);
    const hits: IndexHit[] = [];
    for (let i = 0; i < matches.keys.length && hits.length < limit; i += 1) {
      const entry = this.#entries.get(Number(matches.keys[i]));
      if (!entry || filter.excluded?.has(entry.documentId)) continue;
      hits.push({ chunkId: entry.chunkId, score: 1 - matches.distances[i]! });
    }
    return hits;
  }

  #set(chunkId: string, documentId: string, vector: Float32Array) {
    if (vector.length !== this.#dimensions) throw new Error(`a ${vector.length}-dimensional vector cannot go into a graph of ${this.#dimensions} dimensions`);
    this.#delete(chunkId);
    // A new key each time: a key removed from the graph is not given out again.
    const key = this.#nextKey++;
    this.#index.add(BigInt(key), vector, 1);
    this.#version += 1;
    this.#keyOf.set(chunkId, key);
    this.#entries.set(key, { chunkId, documentId, fingerprint: fingerprintOf(vector) });
    this.#documentChunks.set(documentId, (this.#documentChunks.get(documentId) ?? 0) + 1);
  }

  #delete(chunkId: string) {
    const key = this.#keyOf.get(chunkId);
    if (key === undefined) return;
    const entry = this.#entries.get(key)!;
    this.#index.remove(BigInt(key));
    this.#version += 1;
    this.#keyOf.delete(chunkId);
    this.#entries.delete(key);
    const left = (this.#documentChunks.get(entry.documentId) ?? 1) - 1;
    if (left > 0) this.#documentChunks.set(entry.documentId, left);
    else this.#documentChunks.delete(entry.documentId);
  }
}

function encodeIds(entries: ReadonlyMap<number, Entry>): Uint8Array {
  const count = entries.size;
  const text = Buffer.from([...entries.values()].map((entry) => `${entry.chunkId} ${entry.documentId}`).join('\n'), 'utf8');
  const bytes = new Uint8Array(idsHeaderBytes + count * 12 + text.length);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, idsMagic, true);
  view.setUint32(4, idsFormat, true);
  view.setUint32(8, count, true);
  view.setUint32(12, text.length, true);
  let offset = idsHeaderBytes;
  for (const [key, entry] of entries) {
    view.setFloat64(offset, key, true);
    view.setUint32(offset + 8, entry.fingerprint, true);
    offset += 12;
  }
  bytes.set(text, offset);
  return bytes;
}

function decodeIds(bytes: Uint8Array): (Entry & { key: number })[] {
  const fail = (why: string): never => {
    throw new SnapshotFormatError(`the graph's ids: ${why}`);
  };
  if (bytes.length < idsHeaderBytes) fail('shorter than their header');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(0, true) !== idsMagic || view.getUint32(4, true) !== idsFormat) fail('not ids of a graph, or of another format');
  const count = view.getUint32(8, true);
  const textBytes = view.getUint32(12, true);
  if (idsHeaderBytes + count * 12 + textBytes !== bytes.length) fail(`${bytes.length} bytes where their header counts ${idsHeaderBytes + count * 12 + textBytes}`);
  const lines = count === 0 ? [] : Buffer.from(bytes.buffer, bytes.byteOffset + idsHeaderBytes + count * 12, textBytes).toString('utf8').split('\n');
  if (lines.length !== count) fail(`${lines.length} ids where ${count} are counted`);
  const entries: (Entry & { key: number })[] = [];
  const keys = new Set<number>();
  for (let index = 0; index < count; index += 1) {
    const offset = idsHeaderBytes + index * 12;
    const key = view.getFloat64(offset, true);
    if (!Number.isSafeInteger(key) || key < 1 || keys.has(key)) fail(`key ${key} is not a key the graph gives out, or is given twice`);
    keys.add(key);
    const [chunkId, documentId, ...rest] = lines[index]!.split(' ');
    if (rest.length > 0 || !isStoredUuid(chunkId ?? '') || !isStoredUuid(documentId ?? '')) fail(`line ${index + 1} is not a chunk's and a document's id`);
    entries.push({ key, chunkId: chunkId!, documentId: documentId!, fingerprint: view.getUint32(offset + 8, true) });
  }
  return entries;
}
