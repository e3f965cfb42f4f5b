import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upload, waitForDocuments } from './support/documents.js';
import { expectError, startTestServer, type TestServer, type TestUser } from './support/server.js';
import { createWorkspace } from './support/fixtures.js';

/**
 * A TCP relay between the server and PostgreSQL that can be cut and restored: while it is cut,
 * open connections are dropped and new ones refused, as when the database goes down.
 */
class CuttableRelay {
  #server: net.Server | undefined;
  readonly #sockets = new Set<net.Socket>();
  port = 0;

  constructor(readonly target: { host: string; port: number }) {}

  async open(): Promise<void> {
    if (this.#server) return;
    const server = net.createServer((client) => {
      const upstream = net.connect(this.target.port, this.target.host);
      for (const socket of [client, upstream]) {
        this.#sockets.add(socket);
        socket.on('close', () => this.#sockets.delete(socket));
        socket.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as net.AddressInfo).port;
    this.#server = server;
  }

  async cut(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }
}

// On the legs with a PostgreSQL server only (vitest.config.ts).
describe('when PostgreSQL cannot be reached', () => {
  let relay: CuttableRelay;
  let server: TestServer;
  let user: TestUser;

  beforeAll(async () => {
    const direct = new URL(process.env.DATABASE_URL!);
    relay = new CuttableRelay({ host: direct.hostname, port: Number(direct.port || 5432) });
    await relay.open();
    const relayed = new URL(direct);
    relayed.hostname = '127.0.0.1';
    relayed.port = String(relay.port);
    server = await startTestServer({ DATABASE_URL: relayed.toString() });
    user = await server.createUser();
  }, 60_000);

  afterAll(async () => {
    await relay.open();
    await server?.close();
    await relay.cut();
  });

  it('answers 503 with Retry-After while it is down, and serves and ingests again once it is back', async () => {
    const workspace = (await createWorkspace(server, user.key, 'outage')).id;
    const search = () => server.request('POST', '/v1/kb/query', { key: user.key, json: { query: 'salamander', workspace_id: workspace } });
    expect((await search()).status).toBe(200);

    await relay.cut();
    const refused = await search();
    expectError(refused, 503, 'service_unavailable');
    expect(refused.body.message).toBe('the database cannot be reached; try again shortly');
    expect(refused.headers.get('retry-after')).toBe('5');
    const overGraphQL = await server.graphql(user.key, '{ workspaces(first: 1) { edges { node { id } } } }');
    expect(overGraphQL.status).toBe(503);
    expect(overGraphQL.errors?.[0]?.extensions?.code).toBe('service_unavailable');
    expect(overGraphQL).toMatchObject({ error: 'service_unavailable' });
    // Long enough for the ingestion workers' claims to fail too.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect((await search()).status).toBe(503);

    await relay.open();
    await expect.poll(async () => (await search()).status, { timeout: 15_000 }).toBe(200);
    const [document] = (await upload(server, user.key, workspace, [{ name: 'axolotl.txt', bytes: 'The axolotl is a salamander that keeps its larval features.' }])).body;
    const [ready] = await waitForDocuments(server, user.key, [document.id]);
    expect(ready).toMatchObject({ status: 'ready' });
    const found = await search();
    expect(found.body.results[0]).toMatchObject({ document_id: document.id });
  }, 120_000);
});
