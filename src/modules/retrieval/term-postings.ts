import type { CandidateDocument } from './document-prior.js';
import type { IndexHit } from './vector-index.js';

export type Bm25Parameters = { k1: number; b: number };

/**
 * A chunk's keyword side: its analysed terms with their counts, and its length in terms; with
 * its document's name as the store had it when the chunk was read (`readyChunks`' `documentName`),
 * where known.
 */
export type ChunkTerms = {
  chunkId: string;
  documentId: string;
  terms: readonly string[];
  counts: readonly number[];
  length: number;
  documentName?: string | undefined;
};

/** Which documents' chunks a ranking may return: only those of `only` when given, never those of `excluded`. */
export type DocumentFilter = { only?: ReadonlySet<string>; excluded?: ReadonlySet<string> };

/** The first bytes of an encoded TermPostings (`encode`), with its layout's version. */
const snapshotMagic = 'KBTERMS2';
/** Postings copied or checked between two pauses of `encode` and `decode`: about 10 ms here. */
const slicePostings = 1_000_000;
const alignedTo4 = (bytes: number) => Math.ceil(bytes / 4) * 4;

/** Saved bytes that are not what `TermPostings.encode` or `VectorGraph.save` wrote, or no longer whole. */
export class SnapshotFormatError extends Error {
  override name = 'SnapshotFormatError';
  constructor(why: string) {
    super(`not a usable saved index: ${why}`);
  }
}

/** The chunks holding one term, by ordinal, with the term's count in each. */
type Postings = { ordinals: Int32Array; counts: Uint16Array; size: number };

/** Each id's position, by a loop: a Map built from an array of pairs took up to twice as long at 100,000 ids. */
function ordinalsOf(ids: readonly string[]): Map<string, number> {
  const ordinals = new Map<string, number>();
  for (let ordinal = 0; ordinal < ids.length; ordinal++) ordinals.set(ids[ordinal]!, ordinal);
  return ordinals;
}

const grow = <T extends Int32Array | Uint16Array | Uint8Array>(array: T, minimum: number, make: (length: number) => T): T => {
  if (array.length >= minimum) return array;
  const larger = make(Math.max(minimum, array.length * 2));
  larger.set(array);
  return larger;
};

/**
 * One workspace's keyword side held in memory: for each analysed term, the chunks that hold it
 * (postings in typed arrays, about 6 bytes a posting). Ranking reads only the postings of the
 * query's terms, so its cost follows how many chunks share those terms, not a scan of the store.
 *
 * A removed chunk leaves its postings behind, marked dead, until dead chunks are a quarter of the
 * whole; then the postings are rewritten without them.
 */
/** A 32-bit FNV-1a hash of a chunk's terms with their counts, in their order. */
function termsFingerprint({ terms, counts }: ChunkTerms): number {
  let hash = 0x811c9dc5;
  for (let position = 0; position < terms.length; position++) {
    const term = terms[position]!;
    for (let index = 0; index < term.length; index++) hash = Math.imul(hash ^ term.charCodeAt(index), 0x01000193);
    // Past any UTF-16 unit, so that a count cannot read as a character of the next term.
    hash = Math.imul(hash ^ (0x10000 + (counts[position] ?? 1)), 0x01000193);
  }
  return hash;
}

export class TermPostings {
  #chunkIds: string[] = [];
  #ordinalOf = new Map<string, number>();
  #documentOf = new Int32Array(64);
  #lengths = new Int32Array(64);
  /** Each chunk's termsFingerprint: a chunk logged again with the same terms need not be re-added. */
  #fingerprints = new Int32Array(64);
  #live = new Uint8Array(64);
  #documents: string[] = [];
  #documentOrdinal = new Map<string, number>();
  /** Each document's name, by document ordinal, where a chunk brought it. */
  #documentNames: (string | undefined)[] = [];
  #postings = new Map<string, Postings>();
  #liveChunks = 0;
  #liveLength = 0;
  /** Bytes of the postings' typed arrays, spare capacity included. */
  #postingBytes = 0;
  /** Scratch space of `score`, by chunk ordinal; all zero between rankings. */
  #scores = new Float64Array(0);
  /** Scratch space of `score`: the ordinals it gave a score. */
  #touched = new Int32Array(0);
  /** Counts the chunks added and removed: a snapshot written at one version holds what is held while it stays the same. */
  #version = 0;

  get version() {
    return this.#version;
  }

  /** Chunks held (not removed). */
  get chunkCount() {
    return this.#liveChunks;
  }

  /** Sum of the held chunks' lengths, for BM25's average length. */
  get totalLength() {
    return this.#liveLength;
  }

  /** Bytes this holds, roughly: what a memory budget counts. */
  get approximateBytes() {
    return this.#postingBytes + this.#chunkIds.length * 140 + this.#documents.length * 120 + this.#postings.size * 160;
  }

  /** Whether a chunk of this id is held, whatever its terms. */
  has(chunkId: string) {
    return this.#ordinalOf.has(chunkId);
  }

  /** A held chunk's document, when its name is known: what the ranking's document prior reads. */
  documentOf(chunkId: string): CandidateDocument | undefined {
    const ordinal = this.#ordinalOf.get(chunkId);
    if (ordinal === undefined) return undefined;
    const document = this.#documentOf[ordinal]!;
    const documentName = this.#documentNames[document];
    return documentName === undefined ? undefined : { documentId: this.#documents[document]!, documentName };
  }

  /**
   * Takes a chunk read again: added (replacing the one held) unless it is held with these very
   * terms, and its document's name, when it brings one, taken either way.
   */
  refresh(chunk: ChunkTerms) {
    if (!this.holds(chunk)) this.add(chunk);
    else if (chunk.documentName !== undefined) this.#documentNames[this.#documentOf[this.#ordinalOf.get(chunk.chunkId)!]!] = chunk.documentName;
  }

  /**
   * Whether the chunk is held with these very terms: a merge moves a chunk unchanged, while a
   * chunk written again (its document renamed, so its indexed text changed) must replace the one held.
   */
  holds(chunk: ChunkTerms) {
    const ordinal = this.#ordinalOf.get(chunk.chunkId);
    return ordinal !== undefined && this.#lengths[ordinal] === chunk.length && this.#fingerprints[ordinal] === termsFingerprint(chunk);
  }

  /** Adds a chunk, replacing the one with its id if held. */
  add(chunk: ChunkTerms) {
    this.remove(chunk.chunkId);
    this.#version += 1;
    const ordinal = this.#chunkIds.length;
    this.#chunkIds.push(chunk.chunkId);
    this.#ordinalOf.set(chunk.chunkId, ordinal);
    this.#documentOf = grow(this.#documentOf, ordinal + 1, (n) => new Int32Array(n));
    this.#lengths = grow(this.#lengths, ordinal + 1, (n) => new Int32Array(n));
    this.#fingerprints = grow(this.#fingerprints, ordinal + 1, (n) => new Int32Array(n));
    this.#live = grow(this.#live, ordinal + 1, (n) => new Uint8Array(n));
    let document = this.#documentOrdinal.get(chunk.documentId);
    if (document === undefined) {
      document = this.#documents.length;
      this.#documents.push(chunk.documentId);
      this.#documentOrdinal.set(chunk.documentId, document);
      this.#documentNames.push(undefined);
    }
    if (chunk.documentName !== undefined) this.#documentNames[document] = chunk.documentName;
    this.#documentOf[ordinal] = document;
    this.#lengths[ordinal] = chunk.length;
    this.#fingerprints[ordinal] = termsFingerprint(chunk);
    this.#live[ordinal] = 1;
    this.#liveChunks += 1;
    this.#liveLength += chunk.length;
    // A plain loop with the growth written out: this runs once per posting, millions of times
    // when a large workspace is loaded.
    const { terms, counts } = chunk;
    for (let position = 0; position < terms.length; position++) {
      const term = terms[position]!;
      let postings = this.#postings.get(term);
      if (!postings) {
        postings = { ordinals: new Int32Array(2), counts: new Uint16Array(2), size: 0 };
        this.#postings.set(term, postings);
        this.#postingBytes += 2 * 6;
      }
      if (postings.size === postings.ordinals.length) {
        const capacity = postings.size * 2;
        const ordinals = new Int32Array(capacity);
        ordinals.set(postings.ordinals);
        const grown = new Uint16Array(capacity);
        grown.set(postings.counts);
        postings.ordinals = ordinals;
        postings.counts = grown;
        this.#postingBytes += postings.size * 6;
      }
      const count = counts[position] ?? 1;
      postings.ordinals[postings.size] = ordinal;
      postings.counts[postings.size] = count > 0xffff ? 0xffff : count;
      postings.size += 1;
    }
  }

  /** Removes a chunk; false when it was not held. */
  remove(chunkId: string): boolean {
    const ordinal = this.#ordinalOf.get(chunkId);
    if (ordinal === undefined) return false;
    this.#version += 1;
    this.#ordinalOf.delete(chunkId);
    this.#live[ordinal] = 0;
    this.#liveChunks -= 1;
    this.#liveLength -= this.#lengths[ordinal]!;
    const dead = this.#chunkIds.length - this.#liveChunks;
    if (dead > 1024 && dead * 4 > this.#chunkIds.length) this.#compact();
    return true;
  }

  /** Rewrites every list without the removed chunks, and renumbers what is left. */
  #compact() {
    const renumbered = new Int32Array(this.#chunkIds.length).fill(-1);
    const chunkIds: string[] = [];
    const documents: string[] = [];
    const documentOrdinal = new Map<string, number>();
    const documentNames: (string | undefined)[] = [];
    const documentOf = new Int32Array(Math.max(64, this.#liveChunks));
    const lengths = new Int32Array(documentOf.length);
    const fingerprints = new Int32Array(documentOf.length);
    for (let ordinal = 0; ordinal < this.#chunkIds.length; ordinal++) {
      if (!this.#live[ordinal]) continue;
      const next = chunkIds.length;
      renumbered[ordinal] = next;
      chunkIds.push(this.#chunkIds[ordinal]!);
      const documentId = this.#documents[this.#documentOf[ordinal]!]!;
      let document = documentOrdinal.get(documentId);
      if (document === undefined) {
        document = documents.length;
        documents.push(documentId);
        documentOrdinal.set(documentId, document);
        documentNames.push(this.#documentNames[this.#documentOf[ordinal]!]);
      }
      documentOf[next] = document;
      lengths[next] = this.#lengths[ordinal]!;
      fingerprints[next] = this.#fingerprints[ordinal]!;
    }
    let postingBytes = 0;
    for (const [term, postings] of this.#postings) {
      let kept = 0;
      for (let i = 0; i < postings.size; i++) {
        const next = renumbered[postings.ordinals[i]!]!;
        if (next < 0) continue;
        postings.ordinals[kept] = next;
        postings.counts[kept] = postings.counts[i]!;
        kept += 1;
      }
      if (kept === 0) this.#postings.delete(term);
      else {
        postings.ordinals = postings.ordinals.slice(0, kept);
        postings.counts = postings.counts.slice(0, kept);
        postings.size = kept;
        postingBytes += kept * 6;
      }
    }
    this.#chunkIds = chunkIds;
    this.#ordinalOf = ordinalsOf(chunkIds);
    this.#documents = documents;
    this.#documentOrdinal = documentOrdinal;
    this.#documentNames = documentNames;
    this.#documentOf = documentOf;
    this.#lengths = lengths;
    this.#fingerprints = fingerprints;
    this.#live = new Uint8Array(documentOf.length).fill(1, 0, chunkIds.length);
    this.#postingBytes = postingBytes;
  }

  /**
   * What is held, as the parts of one buffer that `decode` reads back: removed chunks are left
   * out and the others renumbered in their order, so every list stays in chunk order. Its
   * layout: `snapshotMagic`, the header's length (u32) and the header (JSON: the counts and the
   * texts' lengths), zeros up to a multiple of 4, then each chunk's document ordinal, length and
   * fingerprint (i32), each term's list length (i32), every list's ordinals (i32), their counts
   * (u16), the chunk ids, document ids and terms, each a UTF-8 text joined by spaces, and the
   * documents' names (JSON: a string, or null where unknown, per document).
   *
   * `pause` is awaited between slices of the copying; undefined when a chunk was added or
   * removed meanwhile, since the parts would then mix two states.
   */
  async encode(pause?: () => Promise<void>): Promise<Uint8Array[] | undefined> {
    const version = this.#version;
    const total = this.#chunkIds.length;
    const renumbered = new Int32Array(total).fill(-1);
    const chunkIds: string[] = [];
    for (let ordinal = 0; ordinal < total; ordinal++) {
      if (!this.#live[ordinal]) continue;
      renumbered[ordinal] = chunkIds.length;
      chunkIds.push(this.#chunkIds[ordinal]!);
    }
    const chunks = chunkIds.length;
    const documentOf = new Int32Array(chunks);
    const lengths = new Int32Array(chunks);
    const fingerprints = new Int32Array(chunks);
    for (let ordinal = 0; ordinal < total; ordinal++) {
      const next = renumbered[ordinal]!;
      if (next < 0) continue;
      documentOf[next] = this.#documentOf[ordinal]!;
      lengths[next] = this.#lengths[ordinal]!;
      fingerprints[next] = this.#fingerprints[ordinal]!;
    }
    const allLive = chunks === total;
    const terms: string[] = [];
    const lists: Postings[] = [];
    const sizes: number[] = [];
    let postingCount = 0;
    for (const [term, postings] of this.#postings) {
      let size = postings.size;
      if (!allLive) {
        size = 0;
        for (let i = 0; i < postings.size; i++) if (renumbered[postings.ordinals[i]!]! >= 0) size += 1;
      }
      if (size === 0) continue;
      terms.push(term);
      lists.push(postings);
      sizes.push(size);
      postingCount += size;
    }
    const ordinals = new Int32Array(postingCount);
    const counts = new Uint16Array(postingCount);
    let at = 0;
    let sliceEnd = slicePostings;
    for (const postings of lists) {
      if (at >= sliceEnd && pause) {
        await pause();
        if (this.#version !== version) return undefined;
        sliceEnd = at + slicePostings;
      }
      if (allLive) {
        ordinals.set(postings.ordinals.subarray(0, postings.size), at);
        counts.set(postings.counts.subarray(0, postings.size), at);
        at += postings.size;
        continue;
      }
      for (let i = 0; i < postings.size; i++) {
        const next = renumbered[postings.ordinals[i]!]!;
        if (next < 0) continue;
        ordinals[at] = next;
        counts[at] = postings.counts[i]!;
        at += 1;
      }
    }
    if (this.#version !== version) return undefined;
    const texts = [...[chunkIds, this.#documents, terms].map((strings) => Buffer.from(strings.join(' '))), Buffer.from(JSON.stringify(this.#documentNames.map((name) => name ?? null)))];
    const header = Buffer.from(
      JSON.stringify({ chunks, documents: this.#documents.length, terms: terms.length, postings: postingCount, textBytes: texts.map((text) => text.length) }),
    );
    const preamble = Buffer.alloc(alignedTo4(snapshotMagic.length + 4 + header.length));
    preamble.write(snapshotMagic, 0, 'latin1');
    preamble.writeUInt32LE(header.length, snapshotMagic.length);
    header.copy(preamble, snapshotMagic.length + 4);
    const bytesOf = (array: Int32Array | Uint16Array) => new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
    return [preamble, ...[documentOf, lengths, fingerprints, Int32Array.from(sizes), ordinals, counts].map(bytesOf), Buffer.alloc(alignedTo4(counts.byteLength) - counts.byteLength), ...texts];
  }

  /**
   * The postings `encode` wrote, checked whole: a file cut short or altered throws
   * (SnapshotFormatError) rather than give wrong rankings. The lists stay views of `bytes`.
   * `pause` is awaited between slices of about `slicePostings` postings.
   */
  static async decode(bytes: Uint8Array, pause?: () => Promise<void>): Promise<TermPostings> {
    const fail = (why: string): never => {
      throw new SnapshotFormatError(why);
    };
    // Typed arrays over the bytes need their own buffer (not a shared one) and 4-byte alignment.
    let buffer: ArrayBuffer;
    let base = 0;
    if (bytes.buffer instanceof ArrayBuffer && bytes.byteOffset % 4 === 0) {
      buffer = bytes.buffer;
      base = bytes.byteOffset;
    } else {
      const copy = new Uint8Array(bytes.length);
      copy.set(bytes);
      buffer = copy.buffer;
    }
    if (bytes.length < snapshotMagic.length + 4 || Buffer.from(buffer, base, snapshotMagic.length).toString('latin1') !== snapshotMagic) fail('it does not begin as one');
    const headerLength = new DataView(buffer, base).getUint32(snapshotMagic.length, true);
    let offset = snapshotMagic.length + 4;
    if (offset + headerLength > bytes.length) fail('its header is cut short');
    let header: { chunks: number; documents: number; terms: number; postings: number; textBytes: number[] };
    try {
      header = JSON.parse(Buffer.from(buffer, base + offset, headerLength).toString());
    } catch {
      return fail('its header is not JSON');
    }
    const counted = [header.chunks, header.documents, header.terms, header.postings, ...(Array.isArray(header.textBytes) ? header.textBytes : [])];
    if (counted.length !== 8 || !counted.every((count) => Number.isSafeInteger(count) && count >= 0)) fail('its header does not count what it holds');
    offset = alignedTo4(offset + headerLength);
    const take = (length: number) => {
      if (offset + length > bytes.length) fail('it is cut short');
      const at = base + offset;
      offset += length;
      return at;
    };
    const int32s = (length: number) => new Int32Array(buffer, take(length * 4), length);
    const { chunks, documents, terms: termCount, postings: postingCount } = header;
    const documentOf = int32s(chunks);
    const lengths = int32s(chunks);
    const fingerprints = int32s(chunks);
    const sizes = int32s(termCount);
    const ordinals = int32s(postingCount);
    const counts = new Uint16Array(buffer, take(postingCount * 2), postingCount);
    take(alignedTo4(postingCount * 2) - postingCount * 2);
    const [chunkIds, documentIds, terms] = header.textBytes.slice(0, 3).map((length) => {
      const text = Buffer.from(buffer, take(length), length).toString();
      return text === '' ? [] : text.split(' ');
    }) as [string[], string[], string[]];
    const namesLength = header.textBytes[3]!;
    let documentNames: unknown;
    try {
      documentNames = JSON.parse(Buffer.from(buffer, take(namesLength), namesLength).toString());
    } catch {
      fail("its documents' names are not JSON");
    }
    if (offset !== bytes.length) fail('it holds more than its header counts');
    if (chunkIds.length !== chunks || documentIds.length !== documents || terms.length !== termCount) fail('its ids or terms are not those counted');
    if (!Array.isArray(documentNames) || documentNames.length !== documents || !documentNames.every((name) => name === null || typeof name === 'string')) {
      fail("its documents' names are not one per document");
    }

    const decoded = new TermPostings();
    let liveLength = 0;
    for (let ordinal = 0; ordinal < chunks; ordinal++) {
      const document = documentOf[ordinal]!;
      if (document < 0 || document >= documents || lengths[ordinal]! < 0) fail(`chunk ${ordinal} names no document or has a negative length`);
      liveLength += lengths[ordinal]!;
    }
    let start = 0;
    let sliceEnd = slicePostings;
    for (let term = 0; term < termCount; term++) {
      if (start >= sliceEnd && pause) {
        await pause();
        sliceEnd = start + slicePostings;
      }
      const size = sizes[term]!;
      if (size <= 0 || start + size > postingCount) fail(`the list of term ${term} has no postings or runs past the end`);
      let previous = -1;
      for (let i = start; i < start + size; i++) {
        const ordinal = ordinals[i]!;
        if (ordinal <= previous || ordinal >= chunks) fail(`the list of term ${term} is out of chunk order`);
        previous = ordinal;
      }
      // A view made by its constructor: in a first decode (code not yet optimised, as at a start) subarray() took three times as long at 27,000 terms.
      decoded.#postings.set(terms[term]!, {
        ordinals: new Int32Array(buffer, ordinals.byteOffset + start * 4, size),
        counts: new Uint16Array(buffer, counts.byteOffset + start * 2, size),
        size,
      });
      start += size;
    }
    if (start !== postingCount || decoded.#postings.size !== termCount) fail('its lists are not those counted');
    decoded.#chunkIds = chunkIds;
    decoded.#ordinalOf = ordinalsOf(chunkIds);
    decoded.#documents = documentIds;
    decoded.#documentOrdinal = ordinalsOf(documentIds);
    decoded.#documentNames = (documentNames as (string | null)[]).map((name) => name ?? undefined);
    if (decoded.#ordinalOf.size !== chunks || decoded.#documentOrdinal.size !== documents) fail('it names a chunk or a document twice');
    decoded.#documentOf = documentOf;
    decoded.#lengths = lengths;
    decoded.#fingerprints = fingerprints;
    decoded.#live = new Uint8Array(chunks).fill(1);
    decoded.#liveChunks = chunks;
    decoded.#liveLength = liveLength;
    decoded.#postingBytes = postingCount * 6;
    return decoded;
  }

  /** Held chunks that contain the term. */
  documentFrequency(term: string): number {
    const postings = this.#postings.get(term);
    if (!postings) return 0;
    // Nothing removed: every posting is live.
    if (this.#liveChunks === this.#chunkIds.length) return postings.size;
    let count = 0;
    for (let i = 0; i < postings.size; i++) count += this.#live[postings.ordinals[i]!]!;
    return count;
  }

  /**
   * Offers the held chunks that may rank among `best`, with their BM25 scores for the terms, given
   * the statistics of everything searched; chunks of documents the filter leaves out are skipped.
   *
   * MaxScore: a term adds at most idf × (k1 + 1) to a chunk's score (BM25's tf part stays below
   * k1 + 1). The terms are read rarest first, each list whole, and the chunks met are scored as
   * they go. Before a list longer than the number of chunks met so far, the lowest score that
   * still ranks (the `limit`-th best partial score, or the worst of `best` when it is full) is
   * compared with what the terms left could add together: when they could add less, a chunk not
   * met yet can no longer rank, so the lists left are only searched (galloping, as both are in
   * chunk order) for the chunks met whose score could still reach it. The ranking is the
   * exhaustive one. At 1,000,000 chunks this took the keyword side's p50 from 17.1 to 8-9 ms over
   * 300 SciFact queries; a query of many common terms and no rare one still reads them all.
   */
  score(terms: readonly { term: string; idf: number }[], averageLength: number, parameters: Bm25Parameters, filter: DocumentFilter, best: BestHits, work?: RankingWork) {
    // By document ordinal, only when there is a filter: the filter names few documents, and a
    // workspace may hold tens of thousands.
    let admitted: Uint8Array | undefined;
    if (filter.only || (filter.excluded && filter.excluded.size > 0)) {
      admitted = new Uint8Array(this.#documents.length);
      if (filter.only) {
        for (const documentId of filter.only) {
          const document = this.#documentOrdinal.get(documentId);
          if (document !== undefined) admitted[document] = 1;
        }
      } else admitted.fill(1);
      for (const documentId of filter.excluded ?? []) {
        const document = this.#documentOrdinal.get(documentId);
        if (document !== undefined) admitted[document] = 0;
      }
    }
    if (this.#scores.length < this.#chunkIds.length) {
      this.#scores = new Float64Array(this.#live.length);
      this.#touched = new Int32Array(this.#live.length);
    }
    const scores = this.#scores;
    const touched = this.#touched;
    let touchedCount = 0;
    const live = this.#live;
    const lengths = this.#lengths;
    const documentOf = this.#documentOf;
    const { k1, b } = parameters;
    const lists: { postings: Postings; idf: number }[] = [];
    for (const { term, idf } of terms) {
      const postings = this.#postings.get(term);
      if (postings) lists.push({ postings, idf });
    }
    lists.sort((x, y) => y.idf - x.idf || x.postings.size - y.postings.size);
    // What the lists from each one on could add to a chunk's score, at most.
    const left = new Float64Array(lists.length + 1);
    for (let list = lists.length - 1; list >= 0; list--) left[list] = left[list + 1]! + lists[list]!.idf * (k1 + 1);

    let list = 0;
    let threshold = -Infinity;
    for (; list < lists.length; list++) {
      const { postings, idf } = lists[list]!;
      const { ordinals, counts, size } = postings;
      if (list > 0 && size > touchedCount) {
        threshold = Math.max(best.worstScore(), rankingScore(this.#chunkIds, scores, touched, touchedCount, best.limit));
        if (left[list]! < threshold) break;
      }
      if (work) work.postingsRead += size;
      for (let i = 0; i < size; i++) {
        const ordinal = ordinals[i]!;
        if (!live[ordinal] || (admitted && !admitted[documentOf[ordinal]!])) continue;
        const count = counts[i]!;
        if (scores[ordinal] === 0) touched[touchedCount++] = ordinal;
        scores[ordinal]! += (idf * count * (k1 + 1)) / (count + k1 * (1 - b + (b * lengths[ordinal]!) / averageLength));
      }
    }

    if (list < lists.length) {
      // Only chunks met so far can still rank, and of those only the ones the terms left could lift to the threshold.
      let candidates = touched.subarray(0, touchedCount).filter((ordinal) => scores[ordinal]! + left[list]! >= threshold).sort();
      for (; list < lists.length && candidates.length > 0; list++) {
        const { postings, idf } = lists[list]!;
        const { ordinals, counts, size } = postings;
        let position = 0;
        let kept = 0;
        for (let c = 0; c < candidates.length; c++) {
          const ordinal = candidates[c]!;
          position = seek(ordinals, size, position, ordinal);
          if (work) work.postingsRead += 1;
          if (position < size && ordinals[position] === ordinal) {
            const count = counts[position]!;
            scores[ordinal]! += (idf * count * (k1 + 1)) / (count + k1 * (1 - b + (b * lengths[ordinal]!) / averageLength));
          }
          if (scores[ordinal]! + left[list + 1]! >= threshold) candidates[kept++] = ordinal;
        }
        candidates = candidates.subarray(0, kept);
      }
      for (let c = 0; c < candidates.length; c++) best.offer(this.#chunkIds, candidates[c]!, scores[candidates[c]!]!);
      // The scratch scores go back to zero for the next ranking (rankings never interleave: each runs to its end).
      for (let i = 0; i < touchedCount; i++) scores[touched[i]!] = 0;
    } else {
      for (let i = 0; i < touchedCount; i++) {
        const ordinal = touched[i]!;
        best.offer(this.#chunkIds, ordinal, scores[ordinal]!);
        scores[ordinal] = 0;
      }
    }
  }
}

/** How much of the postings a ranking read: every posting of the lists read whole, one per chunk looked up in the others. */
export type RankingWork = { postingsRead: number };

/** The first position from `from` on whose ordinal is at least `ordinal`, by galloping then halving. */
function seek(ordinals: Int32Array, size: number, from: number, ordinal: number): number {
  if (from >= size || ordinals[from]! >= ordinal) return from;
  let step = 1;
  let low = from;
  while (low + step < size && ordinals[low + step]! < ordinal) {
    low += step;
    step *= 2;
  }
  let high = Math.min(low + step, size);
  while (low + 1 < high) {
    const middle = (low + high) >>> 1;
    if (ordinals[middle]! < ordinal) low = middle;
    else high = middle;
  }
  return high;
}

/** The chunks met first that the threshold looks at: the rarest terms' chunks, whose scores lead. */
const thresholdSample = 8_192;

/**
 * The `limit`-th best score of the first `thresholdSample` chunks met (-Infinity when fewer were
 * met): `limit` chunks reach it, so it is a threshold a chunk must reach to rank, whatever the
 * chunks after them score. The sample bounds its cost when common terms have met most chunks.
 */
function rankingScore(chunkIds: readonly string[], scores: Float64Array, touched: Int32Array, touchedCount: number, limit: number): number {
  const sample = new BestHits(limit);
  for (let i = 0; i < Math.min(touchedCount, thresholdSample); i++) sample.offer(chunkIds, touched[i]!, scores[touched[i]!]!);
  return sample.worstScore();
}

/** Better first: higher score, then the smaller chunk id (a stable order for ties). */
const before = (a: IndexHit, b: IndexHit) => a.score > b.score || (a.score === b.score && a.chunkId < b.chunkId);

/** The `limit` best hits offered, kept in a heap whose root is the worst of them. */
class BestHits {
  readonly #heap: IndexHit[] = [];
  constructor(readonly limit: number) {}

  /** The worst score held once `limit` are held (a hit must reach it to get in); -Infinity before. */
  worstScore(): number {
    return this.#heap.length === this.limit ? this.#heap[0]!.score : -Infinity;
  }

  /** Offers the chunk `chunkIds[ordinal]`; nothing is allocated for a hit that does not get in. */
  offer(chunkIds: readonly string[], ordinal: number, score: number) {
    const heap = this.#heap;
    if (heap.length === this.limit) {
      const worst = heap[0]!;
      if (score < worst.score || (score === worst.score && chunkIds[ordinal]! >= worst.chunkId)) return;
    }
    const hit = { chunkId: chunkIds[ordinal]!, score };
    if (heap.length < this.limit) {
      heap.push(hit);
      let child = heap.length - 1;
      while (child > 0) {
        const parent = (child - 1) >> 1;
        if (!before(heap[parent]!, heap[child]!)) break;
        [heap[parent], heap[child]] = [heap[child]!, heap[parent]!];
        child = parent;
      }
      return;
    }
    heap[0] = hit;
    let parent = 0;
    for (;;) {
      const left = parent * 2 + 1;
      const right = left + 1;
      let worst = parent;
      if (left < heap.length && before(heap[worst]!, heap[left]!)) worst = left;
      if (right < heap.length && before(heap[worst]!, heap[right]!)) worst = right;
      if (worst === parent) break;
      [heap[parent], heap[worst]] = [heap[worst]!, heap[parent]!];
      parent = worst;
    }
  }

  ranked(): IndexHit[] {
    return [...this.#heap].sort((a, b) => (before(a, b) ? -1 : 1));
  }
}

/**
 * BM25 over the chunks of several workspaces at once, as Elasticsearch computes it: the corpus
 * statistics (chunk count, average length, each term's document frequency) cover every chunk
 * searched, before document filters, and the score keeps the (k1 + 1) factor.
 */
export function rankBm25(
  workspaces: readonly TermPostings[],
  queryTerms: readonly string[],
  limit: number,
  parameters: Bm25Parameters,
  filter: DocumentFilter = {},
  work?: RankingWork,
): IndexHit[] {
  const chunkCount = workspaces.reduce((sum, workspace) => sum + workspace.chunkCount, 0);
  if (chunkCount === 0 || limit <= 0) return [];
  const averageLength = Math.max(1, workspaces.reduce((sum, workspace) => sum + workspace.totalLength, 0)) / chunkCount;
  const weighted: { term: string; idf: number }[] = [];
  for (const term of new Set(queryTerms)) {
    const frequency = workspaces.reduce((sum, workspace) => sum + workspace.documentFrequency(term), 0);
    if (frequency > 0) weighted.push({ term, idf: Math.log(1 + (chunkCount - frequency + 0.5) / (frequency + 0.5)) });
  }
  const best = new BestHits(limit);
  for (const workspace of workspaces) workspace.score(weighted, averageLength, parameters, filter, best, work);
  return best.ranked();
}
