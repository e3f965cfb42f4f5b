import { randomUUID } from 'node:crypto';
import { afterAll } from 'vitest';
import { analyze } from '../../src/modules/retrieval/analyzer.js';
import { openElasticsearchIndex, type ElasticsearchCluster } from '../../src/modules/retrieval/elasticsearch-index.js';
import type { IndexedChunk, IndexModel, VectorIndex } from '../../src/modules/retrieval/vector-index.js';

/**
 * Deletes what the service made under the alias `alias` on the node at `url`: every index named
 * `<alias>-<n>`, the layout migrations' lock `<alias>-lock`, and an index named like the alias
 * itself (Elasticsearch deletes no index through an alias, and refuses wildcards in deletions by
 * default).
 */
export async function dropElasticsearchIndexes(url: string, alias: string) {
  const listed = await fetch(`${url}/_cat/indices/${alias},${alias}-*?format=json&h=index&expand_wildcards=all&ignore_unavailable=true`);
  const rows = listed.ok ? ((await listed.json()) as { index: string }[]) : [];
  const names = rows.map((row) => row.index).filter((name) => name === alias || name === `${alias}-lock` || /^\d+$/.test(name.slice(alias.length + 1)));
  if (names.length > 0) await fetch(`${url}/${names.join(',')}`, { method: 'DELETE' });
}

/**
 * What the Elasticsearch index's own test files share, against a real node: they belong to the
 * Elasticsearch leg of the matrix only (vector-index.test.ts is the contract every leg runs), and
 * do not skip themselves: without a node they fail, saying how to get one. Every index a file
 * opens is named after its run, and closed and deleted after the file.
 */
export function elasticsearchIndexBed() {
  const url = process.env.ELASTICSEARCH_URL;
  if (!url) {
    throw new Error(
      'ELASTICSEARCH_URL is not set: start a node with `bash .ci/start-elasticsearch.sh` and run with ELASTICSEARCH_URL=<the URL it prints last>',
    );
  }
  const run = `kb_test_${Math.random().toString(36).slice(2, 10)}`;
  const created: string[] = [];
  const opened: VectorIndex[] = [];
  const model: IndexModel = { model: 'test-4d', dimensions: 4 };

  /** One node, the index kept without replicas: what a single node can hold. */
  const cluster = (nodes: string[], replicas = 0, index = `${run}_default`): ElasticsearchCluster => ({ nodes, index, shards: 1, replicas, sniff: false });

  /** An index made outside `open`, deleted after the file all the same. */
  const dropAfter = (indexName: string) => {
    if (!created.includes(indexName)) created.push(indexName);
  };

  async function open(name: string, configured = model, timeoutMs = 10_000, at: string | ElasticsearchCluster = url!) {
    const indexName = `${run}_${name}`;
    dropAfter(indexName);
    const index = await openElasticsearchIndex(typeof at === 'string' ? cluster([at], 0, indexName) : { ...at, index: indexName }, configured, { timeoutMs });
    opened.push(index);
    return index;
  }

  afterAll(async () => {
    await Promise.allSettled(opened.map((index) => index.close()));
    for (const name of created) await dropElasticsearchIndexes(url, name);
  });

  return { url, run, model, cluster, open, dropAfter };
}

/** A 4-dimensional vector scaled to length 1. */
export function unit4(...values: number[]): Float32Array {
  const length = Math.hypot(...values);
  return Float32Array.from(values, (value) => value / length);
}

/** A chunk of new ids with the text's analysed terms. */
export function chunkOf(workspaceId: string, documentId: string, text: string, embedding: Float32Array): IndexedChunk {
  return { chunkId: randomUUID(), documentId, workspaceId, embedding, terms: analyze(text) };
}

export const idsOf = (hits: { chunkId: string }[]) => hits.map((hit) => hit.chunkId);
