import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openElasticsearchIndex } from '../src/modules/retrieval/elasticsearch-index.js';
import { kb } from './support/cli.js';
import { upload, waitForDocuments } from './support/documents.js';
import { dropElasticsearchIndexes } from './support/elasticsearch.js';
import { startTestServer, type TestServer, type TestUser } from './support/server.js';
import { createWorkspace } from './support/fixtures.js';

// `kb reindex` on Elasticsearch while a server serves the same store and index: the new index is
// filled beside the old one and swapped in, so searches never stop. On the Elasticsearch leg only
// (vitest.config.ts): it needs PostgreSQL (the embedded store belongs to one process) and a node.
const elasticsearchUrl = process.env.ELASTICSEARCH_URL;
if (!elasticsearchUrl) throw new Error('ELASTICSEARCH_URL is not set: start a node with `bash .ci/start-elasticsearch.sh`');
// An index of its own: the swap must not reach the index the other test files share.
const alias = `kb_test_online_${Math.random().toString(36).slice(2, 10)}`;

async function esJson<T>(pathname: string): Promise<T> {
  const response = await fetch(`${elasticsearchUrl}${pathname}`);
  return (await response.json()) as T;
}
const indexesBehindAlias = async () => Object.keys(await esJson<object>(`/_alias/${alias}`)).sort();
const indexExists = async (name: string) => (await fetch(`${elasticsearchUrl}/${name}`, { method: 'HEAD' })).status === 200;
const chunksOf = async (documentId: string) =>
  (await esJson<{ count: number }>(`/${alias}/_count?q=document_id:${documentId}`)).count;

describe('kb reindex on Elasticsearch, beside a running server', () => {
  let server: TestServer;
  let user: TestUser;

  beforeAll(async () => {
    server = await startTestServer({ KB_ES_INDEX: alias });
    user = await server.createUser();
  }, 120_000);

  afterAll(async () => {
    await server?.close();
    await dropElasticsearchIndexes(elasticsearchUrl, alias);
  });

  it('builds a new index while every search goes on answering, then swaps it in with what changed meanwhile', async () => {
    expect(await indexesBehindAlias()).toEqual([`${alias}-1`]);
    const workspace = (await createWorkspace(server, user.key, 'online')).id;
    const species = ['heron', 'badger', 'lynx', 'marten', 'ibis', 'newt', 'stoat', 'wren', 'vole', 'egret'];
    const files = Array.from({ length: 300 }, (_, n) => ({
      name: `note-${n}.txt`,
      bytes: `Field note ${n}: the ${species[n % species.length]} was seen near marker ${n * 7} on a ${n % 2 ? 'wet' : 'dry'} morning.`,
    }));
    files.push({ name: 'otter.txt', bytes: 'Sea otters crack shellfish open on stones they carry on their bellies.' });
    const ids: string[] = [];
    for (let start = 0; start < files.length; start += 20) {
      const answer = await upload(server, user.key, workspace, files.slice(start, start + 20));
      expect(answer.status).toBe(202);
      ids.push(...answer.body.map((document: { id: string }) => document.id));
    }
    const documents = await waitForDocuments(server, user.key, ids);
    expect(documents.every((document) => document.status === 'ready')).toBe(true);
    const otter = ids.at(-1)!;
    const search = (query: string) => server.request('POST', '/v1/kb/query', { key: user.key, json: { query, workspace_id: workspace, top_k: 3 } });

    const reindexing = kb(['reindex'], {
      ...process.env,
      DATABASE_URL: server.config.databaseUrl,
      ELASTICSEARCH_URL: elasticsearchUrl,
      KB_ES_INDEX: alias,
      KB_LOG_LEVEL: 'error',
    });
    let finished = false;
    void reindexing.finally(() => (finished = true));

    // While it runs: searches every 100 ms, and once the new index exists, a document uploaded
    // and another deleted (both written to the old index while the new one is filled).
    const answers: { status: number; first: string | undefined }[] = [];
    let uploaded: string | undefined;
    const deleted = ids[5]!;
    while (!finished) {
      const answer = await search('otters crack shellfish on stones');
      answers.push({ status: answer.status, first: answer.body?.results?.[0]?.document_id });
      if (!uploaded && (await indexExists(`${alias}-2`))) {
        const [narwhal] = (await upload(server, user.key, workspace, [{ name: 'narwhal.txt', bytes: 'Narwhals grow a single spiral tusk.' }])).body;
        uploaded = narwhal.id as string;
        expect((await server.request('DELETE', `/v1/kb/documents/${deleted}`, { key: user.key })).status).toBe(204);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const reindexed = await reindexing;
    expect(reindexed.code, reindexed.stderr).toBe(0);
    expect(JSON.parse(reindexed.stdout)).toMatchObject({ rebuilt: 'beside', indexName: `${alias}-2`, failed: [] });

    // No search failed or lost the answer while the index was rebuilt and swapped.
    expect(answers.length).toBeGreaterThanOrEqual(20);
    expect(answers.filter((answer) => answer.status !== 200 || answer.first !== otter)).toEqual([]);
    expect(await indexesBehindAlias()).toEqual([`${alias}-2`]);
    expect(await indexExists(`${alias}-1`)).toBe(false);

    // What changed during the build is in the new index: the upload found, the deletion gone.
    expect(uploaded).toBeDefined();
    expect((await waitForDocuments(server, user.key, [uploaded!]))[0]!.status).toBe('ready');
    const narwhal = await search('spiral tusk');
    expect(narwhal.body.results[0].document_id).toBe(uploaded);
    expect(await chunksOf(uploaded!)).toBe(1);
    expect(await chunksOf(deleted)).toBe(0);
    const scan = await server.request('GET', `/v1/kb/workspaces/${workspace}/scan`, { key: user.key });
    expect(scan.body.totals).toMatchObject({ document_count: 301, chunk_count: 301, embedded_chunks: 301, indexed_chunks: 301 });
  }, 300_000);

  it('pauses search and embedding within seconds when an index of another model is swapped in, and resumes when the model matches again', async () => {
    const workspace = (await createWorkspace(server, user.key, 'models')).id;
    // What another `kb reindex`, configured with another model, does at its end.
    // The index exists: the model it was built with is read back, and the one given here is unused.
    const elsewhere = await openElasticsearchIndex({ nodes: [elasticsearchUrl], index: alias, shards: 1, replicas: 0, sniff: false }, { model: 'unused', dimensions: 1 }, { timeoutMs: 10_000 });
    const configured = elsewhere.builtWith;
    expect(configured.model).toBe('bge-small-en-v1.5-q');
    const swapIn = async (model: { model: string; dimensions: number }) => (await elsewhere.rebuild!(model)).swap();
    const readiness = async () => {
      const response = await fetch(new URL('/readyz', server.url));
      return { status: response.status, body: (await response.json()) as { message?: string } };
    };
    const until = async (status: number) => {
      for (let waited = 0; waited < 20_000; waited += 250) {
        const ready = await readiness();
        if (ready.status === status) return ready;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      throw new Error(`/readyz did not answer ${status} within 20 s`);
    };
    try {
      await swapIn({ model: 'another-model', dimensions: 8 });
      expect((await until(503)).body.message).toMatch(/built with another-model \(8 dimensions\)/);
      const search = await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'anything', workspace_id: workspace } });
      expect(search.status).toBe(503);
      // Parsed, but not embedded with a model the index does not hold.
      const [waiting] = (await upload(server, user.key, workspace, [{ name: 'kiwi.txt', bytes: 'Kiwi birds cannot fly.' }])).body;
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      expect((await server.request('GET', `/v1/kb/documents/${waiting.id}`, { key: user.key })).body).toMatchObject({ status: 'processing', embedded_chunks: 0 });

      await swapIn(configured);
      await until(200);
      expect((await waitForDocuments(server, user.key, [waiting.id]))[0]!.status).toBe('ready');
      const found = await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'flightless kiwi', workspace_id: workspace } });
      expect(found.body.results[0].document_id).toBe(waiting.id);
    } finally {
      await elsewhere.close();
    }
  }, 120_000);
});
