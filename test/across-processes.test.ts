import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type RunningApp } from '../src/app.js';
import { upload, waitForDocuments } from './support/documents.js';
import { startTestServer, type TestServer, type TestUser } from './support/server.js';

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
    second = await startApp({ ...first.config, port: 0 });
    user = await first.createUser();
  }, 60_000);

  afterAll(async () => {
    await second?.close();
    await first?.close();
  });

  it("start an upload at once on another server's workers when the server that took it has none", async () => {
    await first.app.ingestion.stop();
    const workspace = (await first.request('POST', '/v1/kb/workspaces', { key: user.key, json: { name: 'signalled' } })).body.id as string;
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
});
