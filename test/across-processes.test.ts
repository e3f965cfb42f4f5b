import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type RunningApp } from '../src/app.js';
import { openDatabase } from '../src/db/database.js';
import pg from 'pg';
import { upload, waitForDocuments } from './support/documents.js';
import { runStartedIn, settledJob } from './support/mcp.js';
import { openStream, readUntilComplete, reserveStream, sendToStream, stopOnStream } from './support/graphql-sse.js';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { migrate } from '../src/cli/migrate.js';
import { loadConfig } from '../src/config.js';
import { createOwnDatabase, expectError, startTestServer, type TestServer, type TestUser } from './support/server.js';
import { indexMigrations } from '../src/modules/retrieval/pgvector-schema.js';
import { createWorkspace } from './support/fixtures.js';
import { serve, stop, type ServerProcess } from './support/cli.js';

// Two server processes' worth of services on one PostgreSQL (vitest.config.ts runs this file on
// the legs with a PostgreSQL server only).
describe('servers on one PostgreSQL', () => {
  let first: TestServer;
  let second: RunningApp;
  let user: TestUser;

  beforeAll(async () => {
    // Idle workers look for unsignalled jobs only every 10 minutes: within this test, only a
    // signal can start a job.
    first = await startTestServer({ KB_INGEST_POLL_SECONDS: '600' });
    // KB_INSTANCE: each process's name among the fleet (both run in this one test process).
    second = await startApp({ ...first.config, port: 0, instance: `${first.config.instance}-second` });
    user = await first.createUser();
  }, 60_000);

  afterAll(async () => {
    await second?.close();
    await first?.close();
  });

  it('refuse a process named as one that is running (KB_INSTANCE), and take the name once that one has stopped', async () => {
    const secondName = `${first.config.instance}-second`;
    await expect(startApp({ ...first.config, port: 0, instance: secondName })).rejects.toThrow(
      `another process on this database is named KB_INSTANCE=${secondName}: give each process a name of its own (docs/deployment.md)`,
    );
    // Refused before it touched anything: a stream open on the second is still routed to it.
    const streamer = await first.createUser();
    const token = await (await reserveStream(second.url, streamer.key)).text();
    const stream = await openStream(second.url, streamer.key, token);
    expect(stream.status).toBe(200);
    expect((await sendToStream(first.url, streamer.key, token, 'me', { query: '{ me { email } }' })).status).toBe(202);
    expect((await readUntilComplete(stream, ['me'])).get('me')).toEqual([{ data: { me: { email: streamer.email } } }]);

    const thirdName = `${first.config.instance}-third`;
    const third = await startApp({ ...first.config, port: 0, instance: thirdName });
    await third.close();
    const again = await startApp({ ...first.config, port: 0, instance: thirdName });
    await again.close();
  }, 60_000);

  it("start an upload at once on another server's workers when the server that took it has none", async () => {
    await first.app.ingestion.stop();
    const workspace = (await createWorkspace(first, user.key, 'signalled')).id;
    const uploaded = await upload(first, user.key, workspace, [
      { name: 'axolotl.txt', bytes: 'The axolotl keeps its larval gills all its life.' },
      { name: 'olm.txt', bytes: 'The olm lives in the caves of the Dinaric Alps.' },
    ]);
    expect(uploaded.status).toBe(202);
    // Parsed, embedded and indexed by the second server's workers, woken by the first's signal
    // (they would otherwise look again only after 600 s).
    const ready = await waitForDocuments(first, user.key, uploaded.body.map((document: { id: string }) => document.id), 60_000);
    expect(ready.map((document) => document.status)).toEqual(['ready', 'ready']);
  }, 120_000);

  it("route a graphql-sse stream's operations to the server where it is open, wherever they arrive", async () => {
    const streamer = await first.createUser();
    const me = { query: '{ me { email } }' };
    const token = await (await reserveStream(first.url, streamer.key)).text();
    // Sent to the first server before the stream opens: it waits, then goes to the second.
    const early = sendToStream(first.url, streamer.key, token, 'early', me);
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Reserved on the first, opened on the second.
    const stream = await openStream(second.url, streamer.key, token);
    expect(stream.status).toBe(200);
    expect((await early).status).toBe(202);
    expect((await sendToStream(first.url, streamer.key, token, 'late', me)).status).toBe(202);
    expect((await stopOnStream(first.url, streamer.key, token, 'stopped')).status).toBe(200);
    // Bound to its credential on every server.
    const stranger = await first.createUser();
    for (const url of [first.url, second.url]) {
      const refused = await sendToStream(url, stranger.key, token, 'stranger', me);
      expect(refused.status).toBe(404);
      expect(await refused.json()).toMatchObject({ error: 'not_found' });
    }
    const results = await readUntilComplete(stream, ['early', 'late']);
    expect(results.get('early')).toEqual([{ data: { me: { email: streamer.email } } }]);
    expect(results.get('late')).toEqual([{ data: { me: { email: streamer.email } } }]);
    // Its reader gone, the stream is gone everywhere.
    let after = 0;
    for (let tries = 0; tries < 40 && after !== 404; tries++) {
      after = (await sendToStream(first.url, streamer.key, token, 'after', me)).status;
      if (after !== 404) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(after).toBe(404);
  }, 60_000);

  it('refuse a PUT of a token whose stream is open on another server, and keep routing to it', async () => {
    const streamer = await first.createUser();
    const stranger = await first.createUser();
    const me = { query: '{ me { email } }' };
    const token = await (await reserveStream(first.url, streamer.key)).text();
    const stream = await openStream(second.url, streamer.key, token);
    expect(stream.status).toBe(200);
    // The reservation is the second server's now: reserving it again on the first is what
    // graphql-sse answers a token reserved already (409), and a stranger is told it does not exist.
    const again = await reserveStream(first.url, streamer.key, token);
    expect(again.status).toBe(409);
    const taken = await reserveStream(first.url, stranger.key, token);
    expect(taken.status).toBe(404);
    expect(await taken.json()).toMatchObject({ error: 'not_found' });
    // Neither PUT took the stream from its holder: an operation sent to the first still reaches it.
    const sent = await sendToStream(first.url, streamer.key, token, 'after-puts', me);
    expect(sent.status).toBe(202);
    const results = await readUntilComplete(stream, ['after-puts']);
    expect(results.get('after-puts')).toEqual([{ data: { me: { email: streamer.email } } }]);
  }, 60_000);

  it('stop an MCP ask when its cancellation reaches another server than the one running it', async () => {
    const asker = await first.createUser({ credits: 100 });
    const workspace = (await createWorkspace(first, asker.key, 'mcp across')).id;
    const notes = [
      { name: 'reactor.md', bytes: 'The Zephyr-9 research reactor is cooled by liquid lead. It was designed by Ilse Marant.' },
      { name: 'marant.txt', bytes: 'Ilse Marant is a Belgian engineer. She was born in Ghent in 1961.' },
    ];
    const uploaded = await upload(first, asker.key, workspace, notes);
    await waitForDocuments(first, asker.key, uploaded.body.map((document: { id: string }) => document.id), 60_000);
    const post = (url: string, body: unknown, session?: string, signal?: AbortSignal) =>
      fetch(new URL('/mcp', url), {
        method: 'POST',
        signal,
        headers: {
          authorization: `Bearer ${asker.key}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...(session && { 'mcp-session-id': session }),
        },
        body: JSON.stringify(body),
      });
    const initialized = await post(second.url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'across', version: '1' } } });
    const session = initialized.headers.get('mcp-session-id')!;
    await initialized.text();
    const balance = async () => (await first.request('GET', '/v1/user/me', { key: asker.key })).body.creditsBalance as number;
    // A run may end before its cancellation arrives (it is short): then it is charged, and another is tried.
    const outcomes: string[] = [];
    for (let attempt = 0; attempt < 5 && !outcomes.includes('cancelled'); attempt += 1) {
      const before = await balance();
      const leaving = new AbortController();
      const call = { name: 'ask', arguments: { question: 'Where was the designer of the Zephyr-9 reactor born?', workspace_ids: [workspace], mode: 'deep' }, _meta: { progressToken: 1 } };
      const running = await post(second.url, { jsonrpc: '2.0', id: 10 + attempt, method: 'tools/call', params: call }, session, leaving.signal);
      const jobId = await runStartedIn(running);
      // Sent to the first server, which is not running the call.
      const cancelled = await post(first.url, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 10 + attempt, reason: 'enough' } }, session);
      expect(cancelled.status).toBe(202);
      const job = await settledJob(first.app.db.prisma, jobId);
      outcomes.push(job.status);
      if (job.status === 'cancelled') expect(await balance()).toBe(before);
      leaving.abort();
    }
    expect(outcomes).toContain('cancelled');
  }, 120_000);

  it("hear each other's signals, and not their own", async () => {
    const other = await openDatabase(first.config);
    try {
      const heardHere: (string | undefined)[] = [];
      const heardThere: (string | undefined)[] = [];
      await first.app.db.signals!.listen('kb_test_signals', (message) => heardHere.push(message));
      await other.signals!.listen('kb_test_signals', (message) => heardThere.push(message));
      first.app.db.signals!.send('kb_test_signals', 'from-first');
      other.signals!.send('kb_test_signals', 'from-other');
      await expect.poll(() => [heardHere, heardThere], { timeout: 5_000 }).toEqual([['from-other'], ['from-first']]);
      // Nothing else arrives later (PostgreSQL delivers a process's own signals to it too).
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect([heardHere, heardThere]).toEqual([['from-other'], ['from-first']]);
    } finally {
      await other.close();
    }
  }, 30_000);
});

// The roles of docs/deployment.md: an `api` process takes requests and queues jobs; a `worker`
// process runs them and serves health and metrics only.
describe('an api process and a worker process on one PostgreSQL', () => {
  let api: TestServer;
  let worker: RunningApp;
  let user: TestUser;

  beforeAll(async () => {
    // Only a signal can start a job within this test (see above).
    api = await startTestServer({ KB_ROLE: 'api', KB_INGEST_POLL_SECONDS: '600' });
    worker = await startApp({ ...api.config, role: 'worker', port: 0, instance: `${api.config.instance}-worker` });
    user = await api.createUser();
  }, 60_000);

  afterAll(async () => {
    await worker?.close();
    await api?.close();
  });

  const stageRuns = async (url: string) => {
    const text = await (await fetch(new URL('/metrics', url))).text();
    return text
      .split('\n')
      .filter((line) => line.startsWith('kb_ingestion_stage_duration_seconds_count'))
      .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
  };

  it('process what the api takes on the worker, which answers nothing but health and metrics', async () => {
    const workspace = (await createWorkspace(api, user.key, 'split roles')).id;
    const uploaded = await upload(api, user.key, workspace, [{ name: 'newt.txt', bytes: 'The great crested newt breeds in ponds without fish.' }]);
    expect(uploaded.status).toBe(202);
    const ready = await waitForDocuments(api, user.key, [uploaded.body[0].id], 60_000);
    expect(ready[0]!.status).toBe('ready');
    // The worker parsed and embedded it; the api ran no job.
    expect(await stageRuns(worker.url)).toBeGreaterThanOrEqual(2);
    expect(await stageRuns(api.url)).toBe(0);
    const search = await api.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'Where does the newt breed?', workspace_id: workspace } });
    expect(search.status, search.text).toBe(200);
    expect(search.body.results[0].content).toContain('great crested newt');

    expect((await fetch(new URL('/healthz', worker.url))).status).toBe(200);
    expect((await fetch(new URL('/readyz', worker.url))).status).toBe(200);
    for (const [method, pathname] of [['GET', '/v1/user/me'], ['POST', '/graphql'], ['GET', '/'], ['GET', '/docs']]) {
      const response = await fetch(new URL(pathname!, worker.url), { method, headers: { authorization: `Bearer ${user.key}` } });
      const body = await response.json();
      expectError({ status: response.status, headers: response.headers, body, text: JSON.stringify(body) }, 404, 'not_found');
      expect(body.message).toContain('KB_ROLE=worker');
    }
  }, 120_000);
});

// A deploy migrates once (kb migrate), and its replicas start with KB_MIGRATE=off.
describe('processes told not to migrate', () => {
  it('refuse a database kb migrate has not brought to their version, and start on one it has', async () => {
    const database = await createOwnDatabase(process.env.DATABASE_URL!);
    const dataDir = await mkdtemp(path.join(tmpdir(), 'kb-migrate-'));
    const environment = { ...process.env, DATABASE_URL: database.url, KB_DATA_DIR: dataDir, PORT: '0', KB_LOG_LEVEL: 'error' };
    try {
      await expect(startApp(loadConfig({ ...environment, KB_MIGRATE: 'off' }))).rejects.toThrow(
        /the database lacks \d+ migrations of this version \(.*\); run kb migrate with this version first/,
      );
      const first = await migrate(loadConfig(environment));
      expect(first.appliedMigrations.length).toBeGreaterThan(10);
      expect(first).toMatchObject({ index: process.env.ELASTICSEARCH_URL ? 'elasticsearch' : 'pgvector', dimensions: 384 });
      expect(first.appliedIndexMigrations).toEqual(process.env.ELASTICSEARCH_URL ? [] : indexMigrations.map((migration) => `${migration.version}_${migration.name}`));
      expect(await migrate(loadConfig(environment))).toMatchObject({ appliedMigrations: [], appliedIndexMigrations: [] });

      if (!process.env.ELASTICSEARCH_URL) {
        // The index's tables one migration behind: refused too, until kb migrate applies it.
        const pool = new pg.Pool({ connectionString: database.url });
        const last = indexMigrations.at(-1)!;
        await pool.query('DELETE FROM chunk_index_migrations WHERE version = $1', [last.version]);
        await expect(startApp(loadConfig({ ...environment, KB_MIGRATE: 'off' }))).rejects.toThrow(
          `the pgvector index lacks 1 migrations of this version (${last.version}_${last.name})`,
        );
        expect((await migrate(loadConfig(environment))).appliedIndexMigrations).toEqual([`${last.version}_${last.name}`]);
        expect((await pool.query('SELECT version FROM chunk_index_migrations WHERE version = $1', [last.version])).rowCount).toBe(1);
        await pool.end();
      }

      const app = await startApp(loadConfig({ ...environment, KB_MIGRATE: 'off' }));
      try {
        expect((await fetch(new URL('/readyz', app.url))).status).toBe(200);
      } finally {
        await app.close();
      }
    } finally {
      await database.drop();
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 180_000);
});

// A process's name (KB_INSTANCE) is held for its life by a lock on a connection of its own.
describe("a process's name on one PostgreSQL", () => {
  it('is free at once after its process is killed, and within 30 s after it stops answering (a frozen process, a lost host)', async () => {
    const database = await createOwnDatabase(process.env.DATABASE_URL!);
    const dataDir = await mkdtemp(path.join(tmpdir(), 'kb-names-'));
    const environment = { ...process.env, DATABASE_URL: database.url, KB_DATA_DIR: dataDir, KB_LOG_LEVEL: 'error' };
    const startNamed = (name: string) => startApp(loadConfig({ ...environment, PORT: '0', KB_INSTANCE: name }));
    const children: ServerProcess[] = [];
    try {
      const killed = await serve({ ...environment, KB_INSTANCE: 'killed' });
      children.push(killed);
      await expect(startNamed('killed')).rejects.toThrow('another process on this database is named KB_INSTANCE=killed');
      await stop(killed.child, 'SIGKILL');
      await (await startNamed('killed')).close();

      const frozen = await serve({ ...environment, KB_INSTANCE: 'frozen' });
      children.push(frozen);
      frozen.child.kill('SIGSTOP');
      const stoppedAt = performance.now();
      await expect(startNamed('frozen')).rejects.toThrow('another process on this database is named KB_INSTANCE=frozen');
      let taken: RunningApp | undefined;
      while (!taken && performance.now() - stoppedAt < 60_000) {
        await new Promise((resolve) => setTimeout(resolve, 2_000));
        taken = await startNamed('frozen').catch(() => undefined);
      }
      const seconds = (performance.now() - stoppedAt) / 1000;
      expect(taken, `the name was still held ${seconds.toFixed(0)} s after its process froze`).toBeDefined();
      // Not before PostgreSQL's idle session timeout (30 s) ended the frozen process's session,
      // counted from its last heartbeat, up to 10 s before it froze.
      expect(seconds).toBeGreaterThan(20);
      await taken!.close();
      frozen.child.kill('SIGCONT');
    } finally {
      for (const child of children) await stop(child.child, 'SIGKILL');
      await database.drop();
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 180_000);
});
