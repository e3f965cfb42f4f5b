import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { analyze, bm25 } from './analyzer.js';
import { openElasticsearchIndex, type ElasticsearchCluster } from './elasticsearch-index.js';
import { indexMappings } from './elasticsearch-layout.js';
import { IndexUnavailableError, type IndexedChunk, type IndexModel, type VectorIndex } from './vector-index.js';
import { dropElasticsearchIndexes } from '../../../test/support/elasticsearch.js';

// The Elasticsearch index against a real node: this file belongs to the Elasticsearch leg of the
// matrix only (vector-index.test.ts is the contract every leg runs). It does not skip itself:
// without a node it fails, saying how to get one.
const url = process.env.ELASTICSEARCH_URL;
if (!url) {
  throw new Error(
    'ELASTICSEARCH_URL is not set: start a node with `bash .ci/start-elasticsearch.sh` and run with ELASTICSEARCH_URL=<the URL it prints last>',
  );
}

// Every index of this run is named after it and deleted at the end.
const run = `kb_test_${Math.random().toString(36).slice(2, 10)}`;
const created: string[] = [];
const opened: VectorIndex[] = [];
const model: IndexModel = { model: 'test-4d', dimensions: 4 };

/** One node, the index kept without replicas: what a single node can hold. */
const cluster = (nodes: string[], replicas = 0, index = `${run}_default`): ElasticsearchCluster => ({ nodes, index, shards: 1, replicas, sniff: false });

async function open(name: string, configured = model, timeoutMs = 10_000, at: string | ElasticsearchCluster = url!) {
  const indexName = `${run}_${name}`;
  if (!created.includes(indexName)) created.push(indexName);
  const index = await openElasticsearchIndex(typeof at === 'string' ? cluster([at], 0, indexName) : { ...at, index: indexName }, configured, { timeoutMs });
  opened.push(index);
  return index;
}

afterAll(async () => {
  await Promise.allSettled(opened.map((index) => index.close()));
  for (const name of created) await dropElasticsearchIndexes(url!, name);
});

/** A 4-dimensional vector scaled to length 1. */
function unit(...values: number[]): Float32Array {
  const length = Math.hypot(...values);
  return Float32Array.from(values, (value) => value / length);
}

const cosine = (a: Float32Array, b: Float32Array) => a.reduce((sum, value, i) => sum + value * b[i]!, 0) / Math.hypot(...a) / Math.hypot(...b);

function chunk(workspaceId: string, documentId: string, text: string, embedding: Float32Array): IndexedChunk {
  return { chunkId: randomUUID(), documentId, workspaceId, embedding, terms: analyze(text) };
}

const idsOf = (hits: { chunkId: string }[]) => hits.map((hit) => hit.chunkId);

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

  it('reads the model back from an existing index, and reset records a new one', async () => {
    const index = await open('model');
    expect(index.kind).toBe('elasticsearch');
    expect(index.builtWith).toEqual(model);
    const workspace = randomUUID();
    await index.upsert([chunk(workspace, randomUUID(), 'old vectors', unit(1, 0, 0, 0))]);

    // Another process configured with another model sees the model that built the index.
    const other = { model: 'test-8d', dimensions: 8 };
    const again = await open('model', other);
    expect(again.builtWith).toEqual(model);

    await again.reset(other);
    expect(again.builtWith).toEqual(other);
    const mapping = (await (await fetch(`${url}/${run}_model/_mapping`)).json()) as Record<string, { mappings: { _meta: unknown; properties: { embedding: { dims: number } } } }>;
    // Emptied by swapping in a new index behind the alias.
    expect(Object.keys(mapping)).toEqual([`${run}_model-2`]);
    const { mappings } = Object.values(mapping)[0]!;
    expect(mappings._meta).toEqual(other);
    expect(mappings.properties.embedding.dims).toBe(8);
    expect(await again.countByDocument(workspace)).toEqual(new Map());
    await expect(again.upsert([chunk(workspace, randomUUID(), 'four', unit(1, 0, 0, 0))])).rejects.toThrow(/4-dimensional/);
    const eight = { ...chunk(workspace, randomUUID(), 'new vectors', unit(1, 0, 0, 0)), embedding: Float32Array.from([0, 0, 0, 0, 0, 0, 0, 1]) };
    await again.upsert([eight]);
    expect(idsOf((await again.search({ workspaceIds: [workspace], vector: eight.embedding, limit: 5, excludeDocumentIds: [] })).vector)).toEqual([eight.chunkId]);
    // And a process opening it later reads the new model.
    expect((await open('model')).builtWith).toEqual(other);
  });

  it('serves an alias; a rebuild fills the next index beside it, and the swap puts it in service in one step', async () => {
    const index = await open('rebuild');
    const name = `${run}_rebuild`;
    const aliased = async () => Object.keys((await (await fetch(`${url}/_alias/${name}`)).json()) as object);
    const exists = async (concrete: string) => (await fetch(`${url}/${concrete}`, { method: 'HEAD' })).status === 200;
    expect(await aliased()).toEqual([`${name}-1`]);
    const workspace = randomUUID();
    const old = chunk(workspace, randomUUID(), 'quokka smiles on Rottnest', unit(1, 0, 0, 0));
    await index.upsert([old]);
    const other = { model: 'test-8d', dimensions: 8 };
    // Another process serving the same alias.
    const elsewhere = await open('rebuild');
    const search = (from: VectorIndex, vector = unit(1, 0, 0, 0)) =>
      from.search({ workspaceIds: [workspace], vector, terms: analyze('quokka'), limit: 5, excludeDocumentIds: [] });

    const rebuild = await index.rebuild!(other);
    expect(rebuild.name).toBe(`${name}-2`);
    const eight = (text: string, documentId = randomUUID()) => ({ ...chunk(workspace, documentId, text, unit(1, 0, 0, 0)), embedding: Float32Array.from([1, 0, 0, 0, 0, 0, 0, 0]) });
    const fresh = eight('quokka rebuilt');
    const split = randomUUID();
    const [kept, dropped] = [eight('quokka kept', split), eight('quokka from an earlier parse', split)];
    await rebuild.upsert([fresh, kept, dropped]);
    await rebuild.deleteChunksExcept(split, new Set([kept.chunkId]));
    expect(await rebuild.countByDocument()).toEqual(new Map([[fresh.documentId, 1], [split, 1]]));
    // Until the swap, every process searches the old index with the old model.
    expect(idsOf((await search(index)).vector)).toEqual([old.chunkId]);
    expect(idsOf((await search(elsewhere)).keyword)).toEqual([old.chunkId]);
    expect(index.builtWith).toEqual(model);

    await rebuild.swap();
    expect(await aliased()).toEqual([`${name}-2`]);
    expect(await exists(`${name}-1`)).toBe(false);
    expect(index.builtWith).toEqual(other);
    expect(new Set(idsOf((await search(index, fresh.embedding)).keyword))).toEqual(new Set([fresh.chunkId, kept.chunkId]));
    // The other process reads the new model when it asks again.
    expect(elsewhere.builtWith).toEqual(model);
    await elsewhere.refreshBuiltWith!();
    expect(elsewhere.builtWith).toEqual(other);

    // A build that never swapped (a crash) is deleted by the next one; an abandoned one goes at once.
    await index.rebuild!(other);
    expect(await exists(`${name}-3`)).toBe(true);
    const next = await index.rebuild!(other);
    expect(next.name).toBe(`${name}-3`);
    expect(await next.countByDocument()).toEqual(new Map());
    await next.abandon();
    expect(await exists(`${name}-3`)).toBe(false);
    expect(await aliased()).toEqual([`${name}-2`]);
  });

  it('serves an index made before aliases as it is, and the first rebuild puts an alias in its place', async () => {
    const name = `${run}_legacy`;
    created.push(name);
    const made = await fetch(`${url}/${name}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ settings: { number_of_replicas: 0, similarity: { kb_bm25: { type: 'BM25', k1: bm25.k1, b: bm25.b } } }, mappings: indexMappings(model) }),
    });
    expect(made.status).toBe(200);
    const index = await open('legacy');
    const workspace = randomUUID();
    const before = chunk(workspace, randomUUID(), 'wombat burrows', unit(0, 1, 0, 0));
    await index.upsert([before]);
    const search = () => index.search({ workspaceIds: [workspace], terms: analyze('wombat'), limit: 5, excludeDocumentIds: [] });
    expect(idsOf((await search()).keyword)).toEqual([before.chunkId]);

    const rebuild = await index.rebuild!(model);
    expect(rebuild.name).toBe(`${name}-1`);
    const after = chunk(workspace, before.documentId, 'wombat burrows again', unit(0, 1, 0, 0));
    await rebuild.upsert([after]);
    await rebuild.swap();
    expect(Object.keys((await (await fetch(`${url}/_alias/${name}`)).json()) as object)).toEqual([`${name}-1`]);
    expect(idsOf((await search()).keyword)).toEqual([after.chunkId]);
    // A process started later finds the alias.
    expect(idsOf((await (await open('legacy')).search({ workspaceIds: [workspace], terms: analyze('wombat'), limit: 5, excludeDocumentIds: [] })).keyword)).toEqual([after.chunkId]);
  });

  it('is opened by several processes at once on a new index', async () => {
    const indexes = await Promise.all(Array.from({ length: 4 }, () => open('race')));
    const workspace = randomUUID();
    for (const index of indexes) expect(index.builtWith).toEqual(model);
    await Promise.all(indexes.map((index) => index.search({ workspaceIds: [workspace], vector: unit(1, 0, 0, 0), terms: ['x'], limit: 1, excludeDocumentIds: [] })));
    await Promise.all(indexes.map((index) => index.ping()));
  });

  it('refuses to open when ELASTICSEARCH_URL does not answer', async () => {
    const port = await closedPort();
    const started = performance.now();
    await expect(openElasticsearchIndex(cluster([`http://127.0.0.1:${port}`], 0, `${run}_never`), model, { timeoutMs: 2_000 })).rejects.toThrow(
      new RegExp(`ELASTICSEARCH_URL \\(http://127\\.0\\.0\\.1:${port}/?\\) does not answer`),
    );
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it('reaches the cluster through any node it names: a named node that is down costs no request', async () => {
    const down = `http://127.0.0.1:${await closedPort()}`;
    for (const nodes of [[down, url!], [url!, down]]) {
      const started = performance.now();
      const index = await open('nodes', model, 10_000, cluster(nodes));
      const workspace = randomUUID();
      await index.upsert([{ chunkId: randomUUID(), documentId: randomUUID(), workspaceId: workspace, embedding: unit(1, 0, 0, 0), terms: ['axolotl'] }]);
      for (let search = 0; search < 6; search++) {
        const hits = await index.search({ workspaceIds: [workspace], vector: unit(1, 0, 0, 0), terms: ['axolotl'], limit: 5, excludeDocumentIds: [] });
        expect(hits.vector).toHaveLength(1);
      }
      // Tried at once on the other node, not after the client's backoff (1 s and more).
      expect(performance.now() - started).toBeLessThan(5_000);
    }
  });

  it('keeps the configured number of replicas, applied again at every start', async () => {
    const replicasOf = async () => {
      const response = await fetch(`${url}/${run}_replicas/_settings?flat_settings=true`);
      return Number(Object.values((await response.json()) as Record<string, { settings: Record<string, string> }>)[0]!.settings['index.number_of_replicas']);
    };
    await open('replicas', model, 10_000, cluster([url!], 0));
    expect(await replicasOf()).toBe(0);
    // A single node cannot place a replica; the index stays searchable (yellow) and keeps the setting.
    const replicated = await open('replicas', model, 10_000, cluster([url!], 1));
    expect(await replicasOf()).toBe(1);
    await replicated.search({ workspaceIds: [randomUUID()], vector: unit(1, 0, 0, 0), terms: ['x'], limit: 1, excludeDocumentIds: [] });
    await open('replicas', model, 10_000, cluster([url!], 0));
    expect(await replicasOf()).toBe(0);
  });

  it('answers IndexUnavailableError within its timeout when the node stops answering', async () => {
    const proxy = await startProxy(new URL(url!));
    try {
      const timeoutMs = 1_000;
      // Slack for a loaded machine, well under what the client's own retries would take (2-6 s).
      const slackMs = 800;
      const index = await open('proxied', model, timeoutMs, proxy.url);
      const request = { workspaceIds: [randomUUID()], vector: unit(1, 0, 0, 0), terms: ['x'], limit: 5, excludeDocumentIds: [] };
      await index.search(request);

      // Connections accepted, nothing answered: retries included, the search ends at its timeout.
      proxy.hang();
      let started = performance.now();
      await expect(index.search(request)).rejects.toBeInstanceOf(IndexUnavailableError);
      expect(performance.now() - started).toBeLessThan(timeoutMs + slackMs);
      // The caller's deadline (the service passes one) is a 503 as well, not an abort error.
      started = performance.now();
      await expect(index.search(request, AbortSignal.timeout(300))).rejects.toBeInstanceOf(IndexUnavailableError);
      expect(performance.now() - started).toBeLessThan(900);
      // So are /readyz's ping and the workspace statistics' count.
      for (const read of [() => index.ping(), () => index.countByDocument(randomUUID())]) {
        started = performance.now();
        await expect(read()).rejects.toBeInstanceOf(IndexUnavailableError);
        expect(performance.now() - started).toBeLessThan(timeoutMs + slackMs);
      }

      // Nothing listening.
      await proxy.close();
      for (const read of [() => index.search(request), () => index.ping(), () => index.countByDocument(randomUUID())]) {
        started = performance.now();
        await expect(read()).rejects.toBeInstanceOf(IndexUnavailableError);
        expect(performance.now() - started).toBeLessThan(timeoutMs + slackMs);
      }
    } finally {
      await proxy.close();
    }
  });
});

/** A port nothing listens on (just released by the OS). */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A TCP proxy to the node that can stop answering (connections held open) or go away. */
async function startProxy(target: URL) {
  let hanging = false;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    if (hanging) return;
    const upstream = net.connect(Number(target.port || 80), target.hostname);
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.on('error', () => socket.destroy());
    socket.pipe(upstream).pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const dropAll = () => {
    for (const socket of sockets) socket.destroy();
  };
  let closed: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    hang() {
      hanging = true;
      dropAll();
    },
    close() {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        dropAll();
      });
      return closed;
    },
  };
}
