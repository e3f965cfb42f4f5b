import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { expectProtocol, streamAgent } from './support/agent.js';
import { upload, waitForDocuments } from './support/documents.js';
import { startTestServer, vectorGraphsSettled, type TestServer, type TestUser } from './support/server.js';
import { createWorkspace } from './support/fixtures.js';
import { keepsVectorsInMemory } from '../src/modules/retrieval/select.js';

let server: TestServer;
let user: TestUser;
const metricsToken = 'scraper-secret-token';

beforeAll(async () => {
  server = await startTestServer({ KB_METRICS_TOKEN: metricsToken, KB_LOG_LEVEL: 'info' });
  user = await server.createUser({ credits: 10 });
}, 120_000);

afterAll(() => server?.close());

/** The value of one series (name and exact label set) in Prometheus's text format, or undefined. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  const wanted = Object.entries(labels).map(([key, value]) => `${key}="${value}"`);
  for (const line of text.split('\n')) {
    const match = /^(\w+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const present = (match[2] ?? '').split(',').filter(Boolean);
    if (wanted.every((label) => present.includes(label))) return Number(match[3]);
  }
  return undefined;
}

describe('request ids and access logs', () => {
  it("answers every response with X-Request-Id, keeping a caller's usable one, and logs one JSON line per request", async () => {
    const written: string[] = [];
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    try {
      const mine = await server.request('GET', '/v1/user/me', { key: user.key, headers: { 'x-request-id': 'trace-42.a' } });
      expect(mine.headers.get('x-request-id')).toBe('trace-42.a');
      const made = await server.request('GET', '/v1/kb/workspaces/not-a-uuid', { key: user.key, headers: { 'x-request-id': 'bad id with spaces' } });
      expect(made.status).toBe(404);
      expect(made.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
      expect((await server.request('GET', '/healthz')).headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    } finally {
      spy.mockRestore();
    }
    const lines = written.join('').split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line));
    expect(lines.find((line) => line.request_id === 'trace-42.a')).toMatchObject({ msg: 'request', method: 'GET', route: '/v1/user/me', path: '/v1/user/me', status: 200 });
    expect(lines.find((line) => line.path === '/v1/kb/workspaces/not-a-uuid')).toMatchObject({ route: '/v1/kb/workspaces/:id', status: 404 });
  });
});

describe('GET /metrics', () => {
  it('needs the scraper token when one is configured', async () => {
    expect((await server.request('GET', '/metrics')).status).toBe(401);
    expect((await server.request('GET', '/metrics', { headers: { authorization: `Bearer ${user.key}` } })).status).toBe(401);
  });

  it('exposes request latency by route, ingestion stages and queue, embedder throughput, agent time to first token and credits, after real traffic', async () => {
    const workspaceId = (await createWorkspace(server, user.key, 'metrics')).id;
    const uploaded = await upload(server, user.key, workspaceId, [{ name: 'reactor.md', bytes: 'The Zephyr-9 research reactor is cooled by a liquid lead-bismuth eutectic.' }]);
    await waitForDocuments(server, user.key, uploaded.body.map((document: { id: string }) => document.id));
    expect((await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'reactor coolant', workspace_id: workspaceId } })).status).toBe(200);
    expectProtocol(await streamAgent(server, user.key, { message: 'What cools the Zephyr-9 reactor?', workspaceIds: [workspaceId] }));

    const response = await server.request('GET', '/metrics', { headers: { authorization: `Bearer ${metricsToken}` } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/plain');
    const text = response.text;
    expect(sample(text, 'kb_http_request_duration_seconds_count', { method: 'POST', route: '/v1/kb/query', status: '200' })).toBe(1);
    expect(sample(text, 'kb_http_request_duration_seconds_count', { method: 'POST', route: '/agent/stream', status: '200' })).toBe(1);
    expect(sample(text, 'kb_http_request_duration_seconds_count', { method: 'GET', route: '/v1/kb/documents/:id', status: '200' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'kb_ingestion_stage_duration_seconds_count', { stage: 'parse', outcome: 'ok' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'kb_ingestion_stage_duration_seconds_count', { stage: 'embed', outcome: 'ok' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'kb_ingestion_queue_jobs', { stage: 'embed', status: 'done' })).toBeGreaterThanOrEqual(1);
    // Every series names the process it comes from, so that one scrape tells the replicas apart.
    const series = text.split('\n').filter((line) => line !== '' && !line.startsWith('#'));
    expect(series.length).toBeGreaterThan(20);
    expect(server.config.instance).toMatch(/^.+:pid\d+$/);
    for (const line of series) expect(line).toContain(`kb_instance="${server.config.instance}"`);
    expect(sample(text, 'kb_embedder_texts_total', { purpose: 'passage' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'kb_embedder_texts_total', { purpose: 'query' })).toBeGreaterThanOrEqual(2);
    expect(sample(text, 'kb_embedder_seconds_total', { purpose: 'passage' })).toBeGreaterThan(0);
    expect(sample(text, 'kb_agent_time_to_first_token_seconds_count', { mode: 'fast' })).toBe(1);
    expect(sample(text, 'kb_agent_runs_total', { mode: 'fast', outcome: 'done' })).toBe(1);
    expect(sample(text, 'kb_credits_charged_total', { mode: 'fast' })).toBe(1);
  });

  it("times the work the service does on the store of its own accord, and counts the chunks waiting for the vector graph", async () => {
    const workspaceId = (await createWorkspace(server, user.key, 'background work')).id;
    const uploaded = await upload(server, user.key, workspaceId, [{ name: 'pump.md', bytes: 'The Orvik tidal pump moves brine through titanium pipes at night.' }]);
    await waitForDocuments(server, user.key, uploaded.body.map((document: { id: string }) => document.id));
    expect((await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'tidal pump', workspace_id: workspaceId } })).status).toBe(200);
    const scrape = async () => (await server.request('GET', '/metrics', { headers: { authorization: `Bearer ${metricsToken}` } })).text;
    let text = await scrape();
    // The new chunk is merged into the graph once ingestion has been idle a second.
    for (let waited = 0; sample(text, 'kb_index_graph_backlog_chunks', {}) !== 0 && waited < 30_000; waited += 200) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      text = await scrape();
    }
    expect(sample(text, 'kb_index_graph_backlog_chunks', {})).toBe(0);
    // A scrape is not one instant: its counters were read before the backlog's query waited on
    // the store, where the last merge's statement may have gone just before it. The next scrape
    // counts that merge.
    text = await scrape();
    for (const task of ['graph_merge', 'analyze', 'vacuum', 'keyword_load', 'vector_graph_build', 'cache_resize', 'cache_warm', 'index_save']) expect(sample(text, 'kb_store_background_running', { task })).toBeGreaterThanOrEqual(0);
    const seconds = (task: string) => sample(text, 'kb_store_background_seconds_total', { task }) ?? -1;
    if (server.config.elasticsearch) {
      // Elasticsearch builds its own graph and ranks keywords itself.
      expect(seconds('graph_merge')).toBe(0);
      expect(seconds('keyword_load')).toBe(0);
    } else {
      expect(seconds('graph_merge')).toBeGreaterThan(0);
      // The first keyword search of a workspace reads its postings from the store.
      expect(seconds('keyword_load')).toBeGreaterThan(0);
    }
    // Only the embedded store analyses its own tables (PostgreSQL's autovacuum does it there); new tables at once.
    if (server.app.db.kind === 'pglite') expect(seconds('analyze')).toBeGreaterThan(0);
    else expect(seconds('analyze')).toBe(0);
  });

  it('holds the service\'s own work on the store back while a request is in progress, not while a response streams', async () => {
    const work = server.app.db.backgroundWork;
    const workspaceId = (await createWorkspace(server, user.key, 'requests first')).id;
    // An upload whose body arrives slowly: the request is in progress until its last byte.
    const boundary = 'requests-first-boundary';
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="slow.md"\r\nContent-Type: text/markdown\r\n\r\nThe slow upload `;
    let finish!: () => void;
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(new TextEncoder().encode(head));
        await new Promise<void>((resolve) => (finish = resolve));
        controller.enqueue(new TextEncoder().encode(`ends here.\r\n--${boundary}--\r\n`));
        controller.close();
      },
    });
    const uploading = fetch(`${server.url}/v1/kb/workspaces/${workspaceId}/documents`, {
      method: 'POST',
      headers: { authorization: `Bearer ${user.key}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
      body,
      duplex: 'half',
    } as RequestInit);
    await vi.waitFor(() => expect(finish).toBeTypeOf('function'));
    await new Promise((resolve) => setTimeout(resolve, 100));
    let turned = false;
    const turn = work.turn().then(() => (turned = true));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(turned).toBe(false);
    finish();
    expect((await uploading).status).toBe(202);
    await turn;
    expect(turned).toBe(true);

    // An agent answer streams for as long as it runs, but its request is done once the stream starts.
    const streaming = await fetch(`${server.url}/agent/stream`, {
      method: 'POST',
      headers: { authorization: `Bearer ${user.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ message: 'What does the slow upload say?', workspaceIds: [workspaceId] }),
    });
    expect(streaming.status).toBe(200);
    const started = performance.now();
    await work.turn();
    expect(performance.now() - started).toBeLessThan(500);
    await streaming.body?.cancel();
  });
});

describe('Server-Timing', () => {
  /** The header's parts as { name: milliseconds }; every part must carry a duration. */
  function parts(header: string | null): Record<string, number> {
    expect(header).toBeTruthy();
    return Object.fromEntries(
      header!.split(', ').map((entry) => {
        const match = /^([a-z_]+);dur=(\d+\.\d{2})$/.exec(entry);
        expect(match, entry).not.toBeNull();
        return [match![1]!, Number(match![2])];
      }),
    );
  }

  it("says where a search's time went, part by part, each within the request's total", async () => {
    const workspaceId = (await createWorkspace(server, user.key, 'timings')).id;
    const uploaded = await upload(server, user.key, workspaceId, [{ name: 'kiln.md', bytes: 'The Anagama kiln at Mashiko is fired with red pine for five days.' }]);
    await waitForDocuments(server, user.key, uploaded.body.map((document: { id: string }) => document.id));
    const onStoreIndex = !server.config.elasticsearch;
    // A keyword search waits for the workspace's postings to load. A hybrid search waits 200 ms
    // for them at most and is ranked by vectors alone meanwhile (keywords_loading), which a busy
    // machine can take for the first load: the hybrid search below finds them held.
    const keyword = await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'red pine', workspace_id: workspaceId, mode: 'keyword' } });
    expect(keyword.status).toBe(200);
    expect(Object.keys(parts(keyword.headers.get('server-timing')))).not.toContain('embed');

    // On the embedded store the workspace's vectors also go into a graph in memory after that load,
    // and searches use it once built (`graph`, in place of the store's `fresh` and `vector`).
    const graphInMemory = onStoreIndex && keepsVectorsInMemory(server.config);
    if (graphInMemory) await vectorGraphsSettled(server);

    const hybrid = await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'what fuel fires the kiln', workspace_id: workspaceId } });
    expect(hybrid.status).toBe(200);
    expect(hybrid.body.results.length).toBeGreaterThan(0);
    const timed = parts(hybrid.headers.get('server-timing'));
    const indexParts = !onStoreIndex ? [] : graphInMemory ? ['sync', 'graph', 'keywords'] : ['sync', 'fresh', 'vector', 'keywords'];
    expect(Object.keys(timed)).toEqual(expect.arrayContaining(['auth', 'search', 'scope', 'embed', 'index', 'read', 'total', ...indexParts]));
    if (graphInMemory) expect(Object.keys(timed)).not.toContain('vector');
    for (const part of ['scope', 'embed', 'index', 'read']) expect(timed[part], part).toBeLessThanOrEqual(timed.search!);
    expect(Object.keys(timed).at(-1)).toBe('total');
    for (const [part, ms] of Object.entries(timed)) {
      expect(ms, part).toBeGreaterThanOrEqual(0);
      expect(ms, part).toBeLessThanOrEqual(timed.total!);
    }
    expect(timed.embed).toBeGreaterThan(0);

    // Another request reports its authentication only; one without a credential, nothing.
    expect(Object.keys(parts((await server.request('GET', '/v1/user/me', { key: user.key })).headers.get('server-timing')))).toEqual(['auth', 'total']);
    expect((await server.request('GET', '/healthz')).headers.get('server-timing')).toBeNull();
    // A search refused before any work is done reports none of the search's parts.
    const refused = await server.request('POST', '/v1/kb/query', { key: user.key, json: { query: '', workspace_id: workspaceId } });
    expect(refused.status).toBe(400);
    const refusedParts = Object.keys(parts(refused.headers.get('server-timing')));
    expect(refusedParts).toContain('auth');
    for (const part of ['scope', 'embed', 'index', 'read']) expect(refusedParts).not.toContain(part);
  });
});
