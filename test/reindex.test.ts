import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/db/database.js';
import { kb, serve, stop, type ServerProcess } from './support/cli.js';
import { migratedDataDir } from './support/server.js';

// Its own embedded store on every leg of the matrix: the test rewrites which model built the
// index, which a store shared with other test files must never see.
let dataDir: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  dataDir = await migratedDataDir('kb-reindex-');
  env = { ...process.env, KB_DATA_DIR: dataDir, DATABASE_URL: '', ELASTICSEARCH_URL: '', KB_LOG_LEVEL: 'error' };
});
afterAll(() => rm(dataDir, { recursive: true, force: true }));

async function api(server: ServerProcess, key: string, method: string, pathname: string, json?: object) {
  const response = await fetch(new URL(pathname, server.url), {
    method,
    headers: { authorization: `Bearer ${key}`, ...(json && { 'content-type': 'application/json' }) },
    body: json && JSON.stringify(json),
  });
  return { status: response.status, body: (await response.json()) as any };
}

async function waitReady(server: ServerProcess, key: string, id: string) {
  for (let tries = 0; tries < 600; tries++) {
    const document = await api(server, key, 'GET', `/v1/kb/documents/${id}`);
    if (document.body.status === 'ready' || document.body.status === 'failed') return document.body;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`document ${id} is still processing`);
}

describe('an index built with another model', () => {
  it('is reported and never mixed, until kb reindex re-embeds it with the configured model', async () => {
    let server = await serve(env);
    let key: string;
    let workspaceId: string;
    try {
      const created = await kb(['users', 'create', '--email', `reindex-${randomUUID()}@example.com`, '--name', 'Reindex'], env);
      expect(created.code, created.stderr).toBe(0);
      key = JSON.parse(created.stdout).api_key.raw_key;
      workspaceId = (await api(server, key, 'POST', '/v1/kb/workspaces', { name: 'reindex' })).body.id;
      const uploaded = await api(server, key, 'POST', `/v1/kb/workspaces/${workspaceId}/documents`, {
        filename: 'moon.txt',
        content: 'The Moon is slowly drifting away from the Earth by about 3.8 centimetres a year.',
      });
      expect((await waitReady(server, key, uploaded.body[0].id)).status).toBe('ready');
    } finally {
      await stop(server.child);
    }

    // As if the store had been indexed by some other model of another size.
    const db = await openDatabase(loadConfig(env));
    await db.prisma.$executeRaw`UPDATE chunk_index_model SET model = 'another-model', dimensions = 768`;
    await db.close();

    server = await serve(env);
    try {
      const ready = await fetch(new URL('/readyz', server.url));
      expect(ready.status).toBe(503);
      expect(((await ready.json()) as any).message).toMatch(/built with another-model \(768 dimensions\).*bge-small-en-v1\.5-q.*kb reindex/);
      const search = await api(server, key, 'POST', '/v1/kb/query', { query: 'moon distance', workspace_id: workspaceId });
      expect(search.status).toBe(503);
      expect(search.body.error).toBe('service_unavailable');
      expect(search.body.message).toContain('kb reindex');
      const scan = await api(server, key, 'GET', `/v1/kb/workspaces/${workspaceId}/scan`);
      expect(scan.body.embedding).toMatchObject({ model: 'bge-small-en-v1.5-q', index_model: 'another-model', index_dimensions: 768, model_mismatch: true });
      // New documents are parsed but not embedded with a model the index does not hold.
      const later = await api(server, key, 'POST', `/v1/kb/workspaces/${workspaceId}/documents`, {
        filename: 'mars.txt',
        content: 'Mars has two small moons, Phobos and Deimos.',
      });
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      const waiting = await api(server, key, 'GET', `/v1/kb/documents/${later.body[0].id}`);
      expect(waiting.body).toMatchObject({ status: 'processing', chunk_count: 1, embedded_chunks: 0 });
    } finally {
      await stop(server.child);
    }

    const reindexed = await kb(['reindex'], env);
    expect(reindexed.code, reindexed.stderr).toBe(0);
    expect(JSON.parse(reindexed.stdout)).toMatchObject({
      model: 'bge-small-en-v1.5-q',
      dimensions: 384,
      previousModel: 'another-model',
      previousDimensions: 768,
      documents: 2,
      chunks: 2,
      failed: [],
    });
    expect(reindexed.stderr).toMatch(/reindex .*100%/);

    server = await serve(env);
    try {
      expect((await fetch(new URL('/readyz', server.url))).status).toBe(200);
      const search = await api(server, key, 'POST', '/v1/kb/query', { query: 'How many moons does Mars have?', workspace_id: workspaceId });
      expect(search.status).toBe(200);
      expect(search.body.results.map((result: any) => result.filename)).toEqual(['mars.txt', 'moon.txt']);
      const scan = await api(server, key, 'GET', `/v1/kb/workspaces/${workspaceId}/scan`);
      expect(scan.body.embedding.model_mismatch).toBe(false);
      expect(scan.body.totals).toMatchObject({ chunk_count: 2, embedded_chunks: 2, indexed_chunks: 2 });
    } finally {
      await stop(server.child);
    }
  }, 240_000);
});
