import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upload, waitForDocuments } from './support/documents.js';
import { startTestServer, type TestServer, type TestUser } from './support/server.js';
import { createWorkspace } from './support/fixtures.js';

// The service on a three-node Elasticsearch cluster (.ci/start-elasticsearch-cluster.sh prints
// the URLs to set as KB_TEST_ES_CLUSTER_URLS; vitest.config.ts leaves the file out without it).
// One node is killed, the one holding the index's primary shard: with every node named and one
// replica (the default for a list of nodes), searches and ingestion go on.
const nodes = (process.env.KB_TEST_ES_CLUSTER_URLS ?? '').split(',').filter((url) => url !== '');
const indexName = 'kb_chunks';

async function esJson<T>(path: string): Promise<T> {
  for (const node of nodes) {
    try {
      const response = await fetch(`${node}${path}`, { signal: AbortSignal.timeout(5_000) });
      if (response.ok) return (await response.json()) as T;
    } catch {
      // That node is down: ask the next.
    }
  }
  throw new Error(`no node of ${nodes.join(', ')} answered ${path}`);
}

/** The node holding the primary of the index's shard, with its process id. */
async function primaryNode(): Promise<{ name: string; pid: number }> {
  const shards = await esJson<{ prirep: string; state: string; node: string }[]>(`/_cat/shards/${indexName}?format=json`);
  const primary = shards.find((shard) => shard.prirep === 'p' && shard.state === 'STARTED');
  if (!primary) throw new Error(`no started primary: ${JSON.stringify(shards)}`);
  const processes = await esJson<{ nodes: Record<string, { name: string; process: { id: number } }> }>('/_nodes/process');
  const node = Object.values(processes.nodes).find((candidate) => candidate.name === primary.node)!;
  return { name: node.name, pid: node.process.id };
}

describe('on a three-node Elasticsearch cluster', () => {
  let server: TestServer;
  let user: TestUser;

  beforeAll(async () => {
    expect(nodes).toHaveLength(3);
    server = await startTestServer({ ELASTICSEARCH_URL: nodes.join(',') });
    user = await server.createUser();
  }, 120_000);

  afterAll(async () => {
    await server?.close();
  });

  it('keeps searching and ingesting when the node holding the primary is killed', async () => {
    const workspace = (await createWorkspace(server, user.key, 'cluster')).id;
    const [before] = (await upload(server, user.key, workspace, [{ name: 'otter.txt', bytes: `Sea otters crack shellfish on stones (${Date.now()}).` }])).body;
    expect((await waitForDocuments(server, user.key, [before.id]))[0]).toMatchObject({ status: 'ready' });
    const settings = await esJson<Record<string, { settings: Record<string, string> }>>(`/${indexName}/_settings?flat_settings=true`);
    expect(Object.values(settings)[0]!.settings['index.number_of_replicas']).toBe('1');
    await esJson(`/_cluster/health/${indexName}?wait_for_status=green&timeout=60s`);

    const search = (query: string) => server.request('POST', '/v1/kb/query', { key: user.key, json: { query, workspace_id: workspace } });
    expect((await search('otters shellfish stones')).body.results[0]).toMatchObject({ document_id: before.id });

    const primary = await primaryNode();
    process.kill(primary.pid, 'SIGKILL');
    const answers: { status: number; first?: string }[] = [];
    const until = Date.now() + 15_000;
    while (Date.now() < until) {
      const response = await search('otters shellfish stones');
      answers.push({ status: response.status, first: response.body?.results?.[0]?.document_id });
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(answers.length).toBeGreaterThan(10);
    expect(answers.filter((answer) => answer.status !== 200 || answer.first !== before.id)).toEqual([]);

    const [after] = (await upload(server, user.key, workspace, [{ name: 'heron.txt', bytes: `Grey herons wait motionless in shallow water (${Date.now()}).` }])).body;
    expect((await waitForDocuments(server, user.key, [after.id]))[0]).toMatchObject({ status: 'ready' });
    expect((await search('herons wait in shallow water')).body.results[0]).toMatchObject({ document_id: after.id });
    const health = await esJson<{ number_of_nodes: number; status: string }>('/_cluster/health');
    expect(health.number_of_nodes).toBe(2);
  }, 180_000);
});
