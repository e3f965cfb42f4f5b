import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { analyze, bm25 } from './analyzer.js';
import { chunkOf, elasticsearchIndexBed, idsOf, unit4 } from '../../../test/support/elasticsearch.js';

// The Elasticsearch index against a real node, searched; its life over time (model, aliases,
// nodes and failures) is elasticsearch-lifecycle.test.ts. The Elasticsearch leg only.
const { url, run, open } = elasticsearchIndexBed();
const unit = unit4;
const chunk = chunkOf;
const cosine = (a: Float32Array, b: Float32Array) => a.reduce((sum, value, i) => sum + value * b[i]!, 0) / Math.hypot(...a) / Math.hypot(...b);

describe('the Elasticsearch index', () => {
  it('keeps no stored copy of each chunk: its source is rebuilt from the fields, vector included', async () => {
    const index = await open('source');
    const workspace = randomUUID();
    const cats = chunk(workspace, randomUUID(), 'Cats purr and sleep on warm windows', unit(1, 0, 0, 0));
    await index.upsert([cats]);
    const settings = (await (await fetch(`${url}/${run}_source/_settings`)).json()) as Record<string, { settings: { index: { mapping?: { source?: { mode?: string } } } } }>;
    expect(Object.values(settings).map((entry) => entry.settings.index.mapping?.source?.mode)).toEqual(['synthetic']);
    const found = (await (await fetch(`${url}/${run}_source/_doc/${cats.chunkId}`)).json()) as { _source: { embedding: number[]; workspace_id: string } };
    expect(found._source.workspace_id).toBe(workspace);
    expect(found._source.embedding).toEqual([...cats.embedding].map((value) => expect.closeTo(value, 6)));
  });

  it('finds the best chunk first on both sides, with cosine similarities and BM25 scores', async () => {
    const index = await open('basic');
    const workspace = randomUUID();
    const cats = chunk(workspace, randomUUID(), 'Cats purr and sleep on warm windows', unit(1, 0, 0, 0));
    const dogs = chunk(workspace, randomUUID(), 'Dogs bark at the postman and chase balls', unit(0, 1, 0, 0));
    const fish = chunk(workspace, randomUUID(), 'Fish swim in the bowl', unit(0, 0, 1, 0.2));
    await index.upsert([cats, dogs, fish]);
    const query = unit(0.1, 1, 0.05, 0);
    // Searchable as soon as upsert returns: a document is marked ready right after its last one.
    const { vector, keyword } = await index.search({ workspaceIds: [workspace], vector: query, terms: analyze('barking dog'), limit: 10, excludeDocumentIds: [] });
    expect(idsOf(vector)).toEqual([dogs.chunkId, cats.chunkId, fish.chunkId]);
    // Rescored on the stored floats: the cosine itself, not ES's (1 + cos) / 2 nor the int8 estimate.
    for (const [hit, stored] of [[vector[0]!, dogs], [vector[1]!, cats], [vector[2]!, fish]] as const) {
      expect(hit.score).toBeCloseTo(cosine(query, stored.embedding), 6);
    }
    expect(idsOf(keyword)).toEqual([dogs.chunkId]);
    expect(keyword[0]!.score).toBeGreaterThan(0);
    // A side without its input is skipped.
    expect(await index.search({ workspaceIds: [workspace], terms: [], limit: 5, excludeDocumentIds: [] })).toEqual({ vector: [], keyword: [] });
    // Replacing a chunk (same id) moves it.
    await index.upsert([{ ...cats, embedding: unit(0, 1, 0, 0), terms: analyze('dog dog dog') }]);
    const replaced = await index.search({ workspaceIds: [workspace], vector: unit(0, 1, 0, 0), terms: analyze('dog'), limit: 1, excludeDocumentIds: [dogs.documentId] });
    expect(idsOf(replaced.vector)).toEqual([cats.chunkId]);
    expect(replaced.vector[0]!.score).toBeCloseTo(1, 6);
    expect(idsOf(replaced.keyword)).toEqual([cats.chunkId]);
  });

  it('fills the limit from the workspace searched when other workspaces hold nearer vectors, and never leaks them', async () => {
    const index = await open('workspaces');
    const crowded = randomUUID();
    const small = randomUUID();
    const query = unit(1, 0, 0, 0);
    // 300 chunks almost on the query's axis in another workspace; 20 further off in the one searched.
    const near = Array.from({ length: 300 }, (_, i) => chunk(crowded, randomUUID(), `shared word crowd ${i}`, unit(1, 0.001 * i, 0, 0)));
    const far = Array.from({ length: 20 }, (_, i) => chunk(small, randomUUID(), `shared word small ${i} ${'padding '.repeat(i)}`, unit(1, 0.8 + 0.01 * i, 0.3, 0)));
    await index.upsert([...near, ...far]);
    const farIds = new Set(idsOf(far));
    const top10 = await index.search({ workspaceIds: [small], vector: query, terms: analyze('shared'), limit: 10, excludeDocumentIds: [] });
    expect(top10.vector).toHaveLength(10);
    expect(top10.keyword).toHaveLength(10);
    for (const hit of [...top10.vector, ...top10.keyword]) expect(farIds.has(hit.chunkId)).toBe(true);
    // In order, and the ten nearest of the workspace.
    expect(idsOf(top10.vector)).toEqual(idsOf(far.slice(0, 10)));
    const all = await index.search({ workspaceIds: [small], vector: query, terms: analyze('shared'), limit: 50, excludeDocumentIds: [] });
    expect(all.vector).toHaveLength(20);
    expect(all.keyword).toHaveLength(20);
    // Both workspaces: the nearer ones win.
    const both = await index.search({ workspaceIds: [small, crowded], vector: query, limit: 10, excludeDocumentIds: [] });
    expect(idsOf(both.vector)).toEqual(idsOf(near.slice(0, 10)));
    expect(await index.search({ workspaceIds: [randomUUID()], vector: query, terms: analyze('shared'), limit: 10, excludeDocumentIds: [] })).toEqual({ vector: [], keyword: [] });
  });

  it('keeps to the documents asked for and leaves out the excluded ones, on both sides', async () => {
    const index = await open('documents');
    const workspace = randomUUID();
    const [first, second, third] = [randomUUID(), randomUUID(), randomUUID()];
    const chunks = [
      chunk(workspace, first, 'solar panels on roofs', unit(1, 0, 0, 0)),
      chunk(workspace, first, 'solar roofs again', unit(1, 0.05, 0, 0)),
      chunk(workspace, second, 'solar wind and comets', unit(1, 0.1, 0, 0)),
      chunk(workspace, third, 'solar eclipse timing', unit(1, 0.2, 0, 0)),
    ];
    await index.upsert(chunks);
    const documentOf = new Map(chunks.map((c) => [c.chunkId, c.documentId]));
    const search = async (extra: { documentIds?: string[]; excludeDocumentIds?: string[] }) => {
      const { vector, keyword } = await index.search({ workspaceIds: [workspace], vector: unit(1, 0, 0, 0), terms: analyze('solar'), limit: 10, excludeDocumentIds: [], ...extra });
      const documents = (hits: { chunkId: string }[]) => [...new Set(hits.map((hit) => documentOf.get(hit.chunkId)!))].sort();
      return { vector: documents(vector), keyword: documents(keyword) };
    };
    expect(await search({ documentIds: [second] })).toEqual({ vector: [second], keyword: [second] });
    expect(await search({ documentIds: [first, third] })).toEqual({ vector: [first, third].sort(), keyword: [first, third].sort() });
    expect(await search({ excludeDocumentIds: [first, third] })).toEqual({ vector: [second], keyword: [second] });
    expect(await search({ documentIds: [first, second], excludeDocumentIds: [first] })).toEqual({ vector: [second], keyword: [second] });
    expect(await search({ documentIds: [], excludeDocumentIds: [] })).toEqual({ vector: [], keyword: [] });
  });

  it('scores keywords with BM25 (k1 0.9, b 0.4) as the formula gives', async () => {
    // An index of its own: Lucene's statistics (N, df, average length) are the whole index's.
    const index = await open('bm25');
    const workspace = randomUUID();
    const texts = [
      'apple banana apple',
      'banana cherry',
      'cherry cherry cherry date elderberry fig',
      'grape',
      'apple orchard harvest in autumn with baskets of ripe fruit and cider pressing for the village fair',
      // 41 terms: the longest text here; Lucene keeps a field's length in one byte, exact up to
      // 40 and rounded down beyond (41 is stored as 40: measured), which the formula follows below.
      `cherry ${Array.from({ length: 40 }, (_, i) => `filler${String.fromCharCode(97 + (i % 26))}${String.fromCharCode(97 + Math.floor(i / 26))}`).join(' ')}`,
    ];
    const chunks = texts.map((text, i) => chunk(workspace, randomUUID(), text, unit(1, i, 0, 0)));
    expect(chunks[5]!.terms).toHaveLength(41);
    await index.upsert(chunks);
    // Repeated query terms count once, as on the pgvector side.
    const query = analyze('apple cherry apple');
    const { keyword } = await index.search({ workspaceIds: [workspace], terms: query, limit: 10, excludeDocumentIds: [] });

    const documents = chunks.map((c) => c.terms);
    const averageLength = documents.reduce((sum, terms) => sum + terms.length, 0) / documents.length;
    const storedLength = (length: number) => Math.min(length, 40);
    const expected = new Map(
      chunks.map((c, position) => {
        const terms = documents[position]!;
        let score = 0;
        for (const term of new Set(query)) {
          const tf = terms.filter((t) => t === term).length;
          if (tf === 0) continue;
          const df = documents.filter((other) => other.includes(term)).length;
          const idf = Math.log(1 + (documents.length - df + 0.5) / (df + 0.5));
          const length = storedLength(terms.length);
          score += (idf * tf * (bm25.k1 + 1)) / (tf + bm25.k1 * (1 - bm25.b + (bm25.b * length) / averageLength));
        }
        return [c.chunkId, score];
      }),
    );
    const ranked = [...expected].filter(([, score]) => score > 0).sort((a, b) => b[1] - a[1]);
    expect(idsOf(keyword)).toEqual(ranked.map(([id]) => id));
    for (const hit of keyword) {
      // Lucene computes in single precision: measured within 2e-7 relative.
      expect(Math.abs(hit.score - expected.get(hit.chunkId)!) / expected.get(hit.chunkId)!).toBeLessThan(1e-5);
    }
  });

  it('takes deleted documents and workspaces out of search at once, page after page', async () => {
    const index = await open('deletes');
    const kept = randomUUID();
    const gone = randomUUID();
    const [keptDocument, goneDocument] = [randomUUID(), randomUUID()];
    // More than one page (1,000) of ids and of count buckets.
    const many = Array.from({ length: 1_005 }, (_, i) => chunk(gone, randomUUID(), `delta river ${i}`, unit(1, i / 1_005, 0, 0)));
    await index.upsert([
      ...many,
      chunk(kept, keptDocument, 'delta river kept', unit(1, 0, 0, 0)),
      chunk(kept, goneDocument, 'delta river gone', unit(1, 0, 0, 0)),
      chunk(kept, goneDocument, 'delta river gone too', unit(1, 0.1, 0, 0)),
    ]);
    expect(await index.countByDocument(kept)).toEqual(new Map([[keptDocument, 1], [goneDocument, 2]]));
    expect((await index.countByDocument(gone)).size).toBe(1_005);

    await index.deleteDocument(goneDocument);
    const afterDocument = await index.search({ workspaceIds: [kept], vector: unit(1, 0, 0, 0), terms: analyze('delta'), limit: 10, excludeDocumentIds: [] });
    expect(afterDocument.vector).toHaveLength(1);
    expect(afterDocument.keyword).toHaveLength(1);
    expect(await index.countByDocument(kept)).toEqual(new Map([[keptDocument, 1]]));

    await index.deleteWorkspace(gone);
    expect(await index.search({ workspaceIds: [gone], vector: unit(1, 0, 0, 0), terms: analyze('delta'), limit: 10, excludeDocumentIds: [] })).toEqual({ vector: [], keyword: [] });
    expect((await index.countByDocument(gone)).size).toBe(0);
    expect(await index.countByDocument(kept)).toEqual(new Map([[keptDocument, 1]]));
    // Deleting what is not there is not an error.
    await index.deleteDocument(randomUUID());
    await index.deleteWorkspace(gone);
  });
});
