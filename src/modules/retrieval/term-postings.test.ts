import { describe, expect, it } from 'vitest';
import { termFrequencies } from './analyzer.js';
import { rankBm25, SnapshotFormatError, TermPostings, type ChunkTerms } from './term-postings.js';

const parameters = { k1: 0.9, b: 0.4 };

/** A small deterministic generator, so a failure can be replayed. */
function generator(seed: number) {
  let state = seed >>> 0;
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

function chunk(chunkId: string, documentId: string, words: string[]): ChunkTerms {
  const counts = termFrequencies(words);
  return { chunkId, documentId, terms: [...counts.keys()], counts: [...counts.values()], length: words.length };
}

/** BM25 straight from the formula over plain arrays: what the postings must reproduce. */
function naiveRanking(chunks: ChunkTerms[], query: string[], limit: number, allowed: (documentId: string) => boolean) {
  const averageLength = Math.max(1, chunks.reduce((sum, c) => sum + c.length, 0)) / chunks.length;
  const terms = [...new Set(query)];
  const frequency = new Map(terms.map((term) => [term, chunks.filter((c) => c.terms.includes(term)).length]));
  return chunks
    .filter((c) => allowed(c.documentId))
    .map((c) => {
      let score = 0;
      for (const term of terms) {
        const position = c.terms.indexOf(term);
        if (position < 0) continue;
        const tf = c.counts[position]!;
        const df = frequency.get(term)!;
        const idf = Math.log(1 + (chunks.length - df + 0.5) / (df + 0.5));
        score += (idf * tf * (parameters.k1 + 1)) / (tf + parameters.k1 * (1 - parameters.b + (parameters.b * c.length) / averageLength));
      }
      return { chunkId: c.chunkId, score };
    })
    .filter((hit) => hit.score > 0)
    .sort((a, b) => b.score - a.score || (a.chunkId < b.chunkId ? -1 : 1))
    .slice(0, limit);
}

const vocabulary = Array.from({ length: 60 }, (_, i) => `w${i}`);

function randomChunks(random: () => number, count: number, prefix: string): ChunkTerms[] {
  return Array.from({ length: count }, (_, i) => {
    // Zipf-like: low-numbered words are common, high-numbered ones rare.
    const words = Array.from({ length: 1 + Math.floor(random() * 30) }, () => vocabulary[Math.floor(vocabulary.length * random() ** 2)]!);
    return chunk(`${prefix}-${String(i).padStart(5, '0')}`, `${prefix}-doc-${i % 37}`, words);
  });
}

describe('in-memory BM25 postings', () => {
  it('rank as the formula does across workspaces, with filters, limits and removals (compaction included)', () => {
    const random = generator(20261123);
    const first = randomChunks(random, 3_000, 'a');
    const second = randomChunks(random, 500, 'b');
    const left = new TermPostings();
    const right = new TermPostings();
    for (const c of first) left.add(c);
    for (const c of second) right.add(c);
    // Enough removals to rewrite the lists (over 1,024 dead and a quarter of the whole), and re-adds.
    const removed = new Set(first.filter((_, i) => i % 3 !== 0).map((c) => c.chunkId));
    for (const id of removed) expect(left.remove(id)).toBe(true);
    expect(left.remove('a-absent')).toBe(false);
    const readded = first.filter((c, i) => removed.has(c.chunkId) && i % 7 === 0);
    for (const c of readded) left.add(c);
    const held = [...first.filter((c) => !removed.has(c.chunkId)), ...readded, ...second];
    expect(left.chunkCount + right.chunkCount).toBe(held.length);

    const excluded = new Set(['a-doc-3', 'b-doc-5', 'a-doc-unknown']);
    const only = new Set(['a-doc-1', 'a-doc-3', 'a-doc-4', 'b-doc-5', 'b-doc-6', 'b-doc-unknown']);
    for (let trial = 0; trial < 60; trial++) {
      const query = Array.from({ length: 1 + Math.floor(random() * 6) }, () => vocabulary[Math.floor(random() * vocabulary.length)]!);
      const limit = 1 + Math.floor(random() * 120);
      // No filter, an exclusion, or a list of documents with exclusions, in turn.
      const filter = [{}, { excluded }, { only, excluded }][trial % 3]!;
      const allowed = (documentId: string) => !filter.excluded?.has(documentId) && (!filter.only || filter.only.has(documentId));
      const ranked = rankBm25([left, right], query, limit, parameters, filter);
      const expected = naiveRanking(held, query, limit, allowed);
      expect(ranked.map((hit) => hit.chunkId)).toEqual(expected.map((hit) => hit.chunkId));
      ranked.forEach((hit, rank) => expect(hit.score).toBeCloseTo(expected[rank]!.score, 9));
    }
  });

  it("ranks as the formula does while reading only part of the common terms' lists once the rare ones settle the best", () => {
    const random = generator(20261204);
    const common = Array.from({ length: 5 }, (_, i) => `common${i}`);
    const rare = Array.from({ length: 40 }, (_, i) => `rare${i}`);
    // Each common word in most chunks; each rare word in about 75 of them.
    const chunks = Array.from({ length: 20_000 }, (_, i) => {
      const words = common.flatMap((word) => (random() < 0.6 ? Array.from({ length: 1 + Math.floor(random() * 3) }, () => word) : []));
      if (random() < 0.15) words.push(rare[Math.floor(random() * rare.length)]!);
      words.push(...Array.from({ length: Math.floor(random() * 20) }, () => `filler${Math.floor(random() * 500)}`));
      return chunk(`c-${String(i).padStart(5, '0')}`, `doc-${i % 301}`, words);
    });
    const postings = new TermPostings();
    for (const c of chunks) postings.add(c);
    const excluded = new Set(['doc-7', 'doc-8']);
    let read = 0;
    let exhaustive = 0;
    for (let trial = 0; trial < 40; trial++) {
      const query = [rare[Math.floor(random() * rare.length)]!, rare[Math.floor(random() * rare.length)]!, ...common.filter(() => random() < 0.7)];
      const limit = [1, 10, 30][trial % 3]!;
      const filter = trial % 4 === 0 ? { excluded } : {};
      const work = { postingsRead: 0 };
      const ranked = rankBm25([postings], query, limit, parameters, filter, work);
      const expected = naiveRanking(chunks, query, limit, (documentId) => !filter.excluded?.has(documentId));
      expect(ranked.map((hit) => hit.chunkId)).toEqual(expected.map((hit) => hit.chunkId));
      ranked.forEach((hit, rank) => expect(hit.score).toBeCloseTo(expected[rank]!.score, 9));
      read += work.postingsRead;
      exhaustive += [...new Set(query)].reduce((sum, term) => sum + chunks.filter((c) => c.terms.includes(term)).length, 0);
    }
    // Read whole, the common terms' lists are most of the postings the queries name.
    expect(read).toBeLessThan(0.25 * exhaustive);
  });

  it('replaces a chunk added twice, and answers nothing for an empty corpus or unknown terms', () => {
    const postings = new TermPostings();
    expect(rankBm25([postings], ['x'], 10, parameters)).toEqual([]);
    postings.add(chunk('c1', 'd1', ['apple', 'apple', 'pear']));
    postings.add(chunk('c1', 'd1', ['pear']));
    postings.add(chunk('c2', 'd1', ['plum']));
    expect(postings.chunkCount).toBe(2);
    expect(postings.totalLength).toBe(2);
    expect(rankBm25([postings], ['apple'], 10, parameters)).toEqual([]);
    expect(rankBm25([postings], ['pear'], 10, parameters).map((hit) => hit.chunkId)).toEqual(['c1']);
    expect(rankBm25([postings], ['nothing'], 10, parameters)).toEqual([]);
  });

  it('holds a chunk only with the terms and counts it was added with, through a compaction', () => {
    const postings = new TermPostings();
    const notes = chunk('c1', 'd1', ['notes', 'pond', 'carp']);
    postings.add(notes);
    expect(postings.holds(chunk('c1', 'd1', ['notes', 'pond', 'carp']))).toBe(true);
    // Renamed: the same length, other terms; or the same terms counted otherwise.
    expect(postings.holds(chunk('c1', 'd1', ['memos', 'pond', 'carp']))).toBe(false);
    expect(postings.holds(chunk('c1', 'd1', ['notes', 'notes', 'pond']))).toBe(false);
    expect(postings.holds(chunk('c9', 'd1', ['notes', 'pond', 'carp']))).toBe(false);
    for (let index = 0; index < 2000; index++) postings.add(chunk(`x${index}`, 'd2', ['filler']));
    for (let index = 0; index < 2000; index++) postings.remove(`x${index}`);
    expect(postings.chunkCount).toBe(1);
    expect(postings.holds(notes)).toBe(true);
    expect(postings.holds(chunk('c1', 'd1', ['memos', 'pond', 'carp']))).toBe(false);
  });

  it('orders ties by chunk id', () => {
    const postings = new TermPostings();
    for (const id of ['c3', 'c1', 'c2']) postings.add(chunk(id, 'd', ['same', 'words']));
    postings.add(chunk('c0', 'd', ['other']));
    expect(rankBm25([postings], ['same'], 2, parameters).map((hit) => hit.chunkId)).toEqual(['c1', 'c2']);
  });
});

describe('postings written to bytes and read back', () => {
  const asBytes = (parts: Uint8Array[]) => new Uint8Array(Buffer.concat(parts));

  it('rank as the postings written did, after removals, and go on taking adds, removals and a compaction', async () => {
    const random = generator(20261205);
    const chunks = randomChunks(random, 3_000, 'a');
    const original = new TermPostings();
    for (const c of chunks) original.add(c);
    // Removed chunks are left out of the bytes: fewer than a compaction needs, so they are still in the lists.
    const removed = new Set(chunks.filter((_, i) => i % 5 === 0).map((c) => c.chunkId));
    for (const id of removed) original.remove(id);
    const held = chunks.filter((c) => !removed.has(c.chunkId));
    const read = await TermPostings.decode(asBytes((await original.encode())!));
    expect(read.chunkCount).toBe(held.length);
    expect(read.totalLength).toBe(original.totalLength);
    for (const c of held.slice(0, 50)) expect(read.holds(c)).toBe(true);
    expect(read.has([...removed][0]!)).toBe(false);
    const rankings = (postings: TermPostings, corpus: ChunkTerms[]) => {
      for (let trial = 0; trial < 30; trial++) {
        const query = Array.from({ length: 1 + Math.floor(random() * 5) }, () => vocabulary[Math.floor(random() * vocabulary.length)]!);
        const filter = trial % 2 === 0 ? {} : { excluded: new Set(['a-doc-3']) };
        const ranked = rankBm25([postings], query, 40, parameters, filter);
        const expected = naiveRanking(corpus, query, 40, (documentId) => !filter.excluded?.has(documentId));
        expect(ranked.map((hit) => hit.chunkId)).toEqual(expected.map((hit) => hit.chunkId));
        ranked.forEach((hit, rank) => expect(hit.score).toBeCloseTo(expected[rank]!.score, 9));
      }
    };
    rankings(read, held);

    // Its lists are views of the bytes read: adding past their ends, removing enough for a
    // compaction, and adding again must all still rank as the formula does.
    const added = randomChunks(random, 400, 'z');
    for (const c of added) read.add(c);
    const gone = new Set(held.filter((_, i) => i % 2 === 0).map((c) => c.chunkId));
    for (const id of gone) expect(read.remove(id)).toBe(true);
    const again = randomChunks(random, 100, 'y');
    for (const c of again) read.add(c);
    rankings(read, [...held.filter((c) => !gone.has(c.chunkId)), ...added, ...again]);
  });

  it("keep each document's name, known or not, through a compaction and the bytes", async () => {
    const postings = new TermPostings();
    // Names as a store may hold them: spaces, quotes, a line break, a backslash, and none yet.
    const names = ['Acme 2018 10K', 'He said "yes"\nthen \\ no', undefined];
    const chunks = Array.from({ length: 3_000 }, (_, i) => ({ ...chunk(`c${i}`, `doc-${i % 3}`, ['w1', `w${i % 7}`]), documentName: names[i % 3] }));
    for (const c of chunks) postings.add(c);
    const named = (held: TermPostings, chunkId: string) => held.documentOf(chunkId);
    expect(named(postings, 'c0')).toEqual({ documentId: 'doc-0', documentName: 'Acme 2018 10K' });
    expect(named(postings, 'c4')).toEqual({ documentId: 'doc-1', documentName: 'He said "yes"\nthen \\ no' });
    // A document whose name is unknown has none to give, and neither has a chunk not held.
    expect(named(postings, 'c2')).toBeUndefined();
    expect(named(postings, 'absent')).toBeUndefined();
    // A chunk read again with its document renamed brings the new name, with its terms unchanged
    // or not; one with no name leaves it.
    postings.refresh({ ...chunks[0]!, documentName: 'Acme 2019 10K' });
    postings.refresh({ ...chunk('c1', 'doc-1', ['w1']), documentName: undefined });
    expect(named(postings, 'c3')).toEqual({ documentId: 'doc-0', documentName: 'Acme 2019 10K' });
    expect(named(postings, 'c1')!.documentName).toBe('He said "yes"\nthen \\ no');
    postings.refresh({ ...chunk('c2', 'doc-2', ['w9']), documentName: 'Globex 2020 10K' });
    // Enough removals for a compaction, which renumbers the documents.
    for (let i = 0; i < 3_000; i += 1) if (i % 4 !== 0 && i !== 1) postings.remove(`c${i}`);
    const expected = { c0: 'Acme 2019 10K', c1: 'He said "yes"\nthen \\ no', c8: 'Globex 2020 10K' };
    for (const [chunkId, documentName] of Object.entries(expected)) expect(named(postings, chunkId)!.documentName).toBe(documentName);
    const read = await TermPostings.decode(asBytes((await postings.encode())!));
    for (const [chunkId, documentName] of Object.entries(expected)) expect(named(read, chunkId)!.documentName).toBe(documentName);
    const unnamed = new TermPostings();
    unnamed.add(chunk('u', 'doc-u', ['w1']));
    expect(named(await TermPostings.decode(asBytes((await unnamed.encode())!)), 'u')).toBeUndefined();
  });

  it('hold nothing when nothing was held', async () => {
    const read = await TermPostings.decode(asBytes((await new TermPostings().encode())!));
    expect(read.chunkCount).toBe(0);
    expect(rankBm25([read], ['w1'], 10, parameters)).toEqual([]);
  });

  it('are refused when cut short, lengthened or altered, rather than ranked wrongly', async () => {
    const postings = new TermPostings();
    for (const c of randomChunks(generator(7), 500, 'a')) postings.add(c);
    const bytes = asBytes((await postings.encode())!);
    const refused = (altered: Uint8Array) => expect(TermPostings.decode(altered)).rejects.toThrow(SnapshotFormatError);
    await refused(bytes.subarray(0, bytes.length - 1));
    await refused(bytes.subarray(0, 20));
    await refused(asBytes([bytes, new Uint8Array(4)]));
    await refused(asBytes([Buffer.from('not postings at all')]));
    // Bytes of the layout before the documents' names were kept.
    await refused(asBytes([Buffer.from('KBTERMS1'), bytes.subarray(8)]));
    // A list's first ordinal set past the last chunk, and a list out of chunk order.
    const headerLength = Buffer.from(bytes).readUInt32LE(8);
    const header = JSON.parse(Buffer.from(bytes.subarray(12, 12 + headerLength)).toString()) as { chunks: number; terms: number };
    const ordinalsAt = Math.ceil((12 + headerLength) / 4) * 4 + (3 * header.chunks + header.terms) * 4;
    const pastTheEnd = bytes.slice();
    new DataView(pastTheEnd.buffer).setInt32(ordinalsAt, header.chunks, true);
    await refused(pastTheEnd);
    // The second posting of the first list of two or more made equal to the first.
    const outOfOrder = bytes.slice();
    const view = new DataView(outOfOrder.buffer);
    const sizesAt = ordinalsAt - header.terms * 4;
    let start = 0;
    let term = 0;
    while (view.getInt32(sizesAt + term * 4, true) < 2) start += view.getInt32(sizesAt + term++ * 4, true);
    view.setInt32(ordinalsAt + (start + 1) * 4, view.getInt32(ordinalsAt + start * 4, true), true);
    await refused(outOfOrder);
    // Read from an offset that is not a multiple of 4, the same bytes are still read whole.
    const unaligned = new Uint8Array(bytes.length + 1).subarray(1);
    unaligned.set(bytes);
    expect((await TermPostings.decode(unaligned)).chunkCount).toBe(500);
  });

  it('are not written when a chunk is added or removed between two slices', async () => {
    const postings = new TermPostings();
    // Over a slice's worth of postings, so the writing pauses at least once.
    for (const c of randomChunks(generator(11), 200_000, 'a')) postings.add(c);
    let pauses = 0;
    expect(await postings.encode(async () => void (pauses += 1))).toBeDefined();
    expect(pauses).toBeGreaterThan(0);
    const added = chunk('late', 'late-doc', ['w1']);
    expect(await postings.encode(async () => void postings.add(added))).toBeUndefined();
    expect(await postings.encode(async () => void postings.remove('late'))).toBeUndefined();
  });
});
