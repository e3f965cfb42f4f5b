import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { analyze, bm25 } from './analyzer.js';
import { openElasticsearchIndex } from './elasticsearch-index.js';
import { indexMappings } from './elasticsearch-layout.js';
import { IndexUnavailableError, type VectorIndex } from './vector-index.js';
import { chunkOf, elasticsearchIndexBed, idsOf, unit4 } from '../../../test/support/elasticsearch.js';

// The Elasticsearch index against a real node over time: the model it records, the alias and
// rebuilds, several processes opening it, the nodes named and their failures. The Elasticsearch leg only.
const { url, run, model, cluster, open, dropAfter } = elasticsearchIndexBed();
const unit = unit4;
const chunk = chunkOf;

describe('the Elasticsearch index over time: its model, aliases and rebuilds, several processes, the nodes named and their failures', () => {
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
    expect(mappings._meta).toEqual({ ...other, layout_version: 1 });
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
    dropAfter(name);
    const made = await fetch(`${url}/${name}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ settings: { number_of_replicas: 0, similarity: { kb_bm25: { type: 'BM25', k1: bm25.k1, b: bm25.b } } }, mappings: { ...indexMappings(model, 1), _meta: model } }),
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
