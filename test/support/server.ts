import { randomUUID } from 'node:crypto';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, inject } from 'vitest';
import { serverModelOptions, startApp, type RunningApp } from '../../src/app.js';
import { loadModels, type Models } from '../../src/backends.js';
import { adminCommands } from '../../src/cli/admin-commands.js';
import { loadConfig, type Config } from '../../src/config.js';
import { embeddedStoreDirectory } from '../../src/db/embedded-store.js';
import type { BackgroundWork } from '../../src/observability/background-work.js';

export type TestUser = { id: string; email: string; key: string };

export type TestServer = {
  url: string;
  app: RunningApp;
  config: Config;
  /** A new user (unique email) with a key carrying every scope. */
  createUser(options?: { credits?: number; active?: boolean }): Promise<TestUser>;
  /** A further key for `user` carrying only `scopes`. */
  createKey(user: TestUser, scopes: string[]): Promise<string>;
  request(method: string, pathname: string, options?: RequestOptions): Promise<TestResponse>;
  graphql<Data = Record<string, unknown>>(key: string | null, query: string, variables?: unknown): Promise<GraphQLResult<Data>>;
  close(): Promise<void>;
};

type RequestOptions = { key?: string | null; json?: unknown; body?: string; headers?: Record<string, string> };

export type TestResponse = { status: number; headers: Headers; body: any; text: string };

export type GraphQLResult<Data> = {
  status: number;
  data: Data | null;
  errors?: { message: string; extensions?: { code?: string; field?: string } }[];
};

/**
 * A new, empty database on the PostgreSQL server of `serverUrl`, dropped by `drop`. Each test
 * server gets one: on a shared database every test server's queue workers would claim the jobs
 * of the others, under their own settings and turns. So do tests whose merges or resets of the
 * index would reach the rows of other files.
 */
export async function createOwnDatabase(serverUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const url = new URL(serverUrl);
  const name = `${url.pathname.slice(1) || 'kb'}_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const onServer = async (work: (client: pg.Client) => Promise<unknown>) => {
    const client = new pg.Client({ connectionString: serverUrl });
    await client.connect();
    try {
      await work(client);
    } finally {
      await client.end();
    }
  };
  await onServer((client) => client.query(`CREATE DATABASE "${name}"`));
  url.pathname = `/${name}`;
  const drop = () =>
    onServer(async (client) => {
      // A closed pool has asked its connections to end, but the server may not have ended them
      // yet; forcing them would send the closing clients an error nobody handles any more.
      // Only clients count: an autovacuum worker may be at work in the database too, and the
      // server stops that one itself for a plain DROP, while FORCE would need the right to
      // signal it (which a role that is not a superuser lacks).
      let clients = 0;
      for (let waited = 0; waited < 10_000; waited += 50) {
        const { rows } = await client.query<{ count: number }>(
          "SELECT count(*)::int AS count FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'",
          [name],
        );
        clients = rows[0]!.count;
        if (clients === 0) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      // Still connected after 10 s: a leak, which FORCE then brings to light.
      await client.query(`DROP DATABASE IF EXISTS "${name}"${clients > 0 ? ' WITH (FORCE)' : ''}`);
    });
  return { url: url.toString(), drop };
}

/**
 * A test file's server and its first user: started before the file's tests and handed to
 * `started`, and the server closed after them.
 */
export function serverBed(started: (bed: { server: TestServer; user: TestUser }) => void, environment: Record<string, string> = {}) {
  let server: TestServer | undefined;
  beforeAll(async () => {
    server = await startTestServer(environment);
    started({ server, user: await server.createUser() });
  });
  afterAll(() => server?.close());
}

/**
 * Puts a copy of the store the run migrated once (global-setup.ts) into `dataDir`: the same as a
 * new embedded store after its migrations, ready in under half the time (0.4 s to copy and about
 * 2 s to open, against 5.3 s to make and migrate). Off the embedded leg there is none, and
 * `dataDir` stays empty.
 */
export async function copyMigratedStore(dataDir: string) {
  const migrated = inject('migratedEmbeddedStore');
  if (migrated) await cp(migrated, embeddedStoreDirectory(dataDir), { recursive: true });
}

/**
 * A new data directory, holding a copy of the run's migrated store where there is one (see
 * copyMigratedStore): an embedded store opened there starts as a new one does after its
 * migrations. Tests of a store made from nothing (its migrations, a first start) use an empty one.
 */
export async function migratedDataDir(prefix: string) {
  const dataDir = await mkdtemp(path.join(tmpdir(), prefix));
  await copyMigratedStore(dataDir);
  return dataDir;
}

/**
 * The embedded model's threads and the parsing threads, loaded once per vitest worker for each
 * configuration that loads them alike and lent to every test server of that configuration: a
 * server's start then costs 2.3 s of CPU instead of 3.9 (1.6 s of it loading them). The files of
 * a worker share this module (isolate: false); the threads end with the worker. A server whose
 * answers or embeddings come from another server (OPENAI_BASE_URL) loads its own.
 */
const sharedModels = new Map<string, Promise<Models>>();

function modelsFor(config: Config): Promise<Models> | undefined {
  if (config.openai.baseUrl) return undefined;
  const { concurrency, parseMemoryMb, parseIdleSeconds } = config.ingestion;
  const key = JSON.stringify({ embeddings: config.embeddings, parse: { concurrency, parseMemoryMb, parseIdleSeconds }, options: serverModelOptions(config) });
  let models = sharedModels.get(key);
  if (!models) {
    models = loadModels(config, serverModelOptions(config));
    // A load that failed is not kept: the next server of this configuration tries again.
    models.catch(() => sharedModels.delete(key));
    sharedModels.set(key, models);
  }
  return models;
}

/**
 * Starts the real service on a free port: the embedded store in a fresh directory, or a
 * database of its own on the PostgreSQL server named by DATABASE_URL (the CI matrix runs the
 * suite both ways).
 */
export async function startTestServer(environment: Record<string, string> = {}): Promise<TestServer> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'kb-test-'));
  const serverUrl = environment.DATABASE_URL ?? process.env.DATABASE_URL;
  const database = serverUrl ? await createOwnDatabase(serverUrl) : undefined;
  if (!serverUrl && !environment.KB_DATA_DIR) await copyMigratedStore(dataDir);
  const config = loadConfig({
    ...process.env,
    HOST: '127.0.0.1',
    PORT: '0',
    KB_DATA_DIR: dataDir,
    KB_LOG_LEVEL: process.env.KB_TEST_LOG_LEVEL ?? 'silent',
    ...environment,
    ...(database && { DATABASE_URL: database.url }),
  });
  const app = await Promise.resolve(modelsFor(config))
    .then((models) => startApp(config, { models }))
    .catch(async (error: unknown) => {
      await database?.drop();
      throw error;
    });

  const request: TestServer['request'] = async (method, pathname, options = {}) => {
    const headers = new Headers(options.headers);
    if (options.key) headers.set('authorization', `Bearer ${options.key}`);
    let body = options.body;
    if (options.json !== undefined) {
      body = JSON.stringify(options.json);
      if (!headers.has('content-type')) headers.set('content-type', 'application/json');
    }
    const response = await fetch(new URL(pathname, app.url), { method, headers, body });
    const text = await response.text();
    let parsed: unknown = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: response.status, headers: response.headers, body: parsed, text };
  };

  const server: TestServer = {
    url: app.url,
    app,
    config,
    async createUser(options = {}) {
      const email = `user-${randomUUID()}@example.com`;
      const created = await adminCommands['users.create'](app.db.prisma, {
        email,
        name: 'Test User',
        credits: options.credits ?? 0,
        active: options.active ?? true,
      });
      return { id: created.user.id, email, key: created.api_key.raw_key };
    },
    async createKey(user, scopes) {
      const response = await request('POST', '/v1/user/me/api-keys', { key: user.key, json: { name: `scoped ${scopes.join(' ')}`, scopes } });
      if (response.status !== 201) throw new Error(`could not create key: ${response.text}`);
      return response.body.raw_key as string;
    },
    request,
    async graphql(key, query, variables) {
      const response = await request('POST', '/graphql', {
        key,
        json: { query, variables },
        headers: { accept: 'application/graphql-response+json, application/json' },
      });
      return { status: response.status, ...(response.body as object) } as never;
    },
    async close() {
      const undeclared = await undeclaredStatuses(app.url, config.metricsToken);
      await app.close();
      await database?.drop();
      await rm(dataDir, { recursive: true, force: true });
      if (undeclared.length > 0) {
        throw new Error(`endpoints answered statuses their routes do not declare (add them to the route's raises):\n${undeclared.join('\n')}`);
      }
    },
  };
  return server;
}

/**
 * The answers of a running server with an error status that their route does not declare
 * (src/rest/route-errors.ts), as its /metrics counts them: each test server fails its file on
 * one, so the statuses routes declare are checked against what the whole suite provokes. None
 * when the server no longer answers (a test closed it itself).
 */
async function undeclaredStatuses(url: string, token: string | undefined): Promise<string[]> {
  const response = await fetch(new URL('/metrics', url), { headers: token ? { authorization: `Bearer ${token}` } : {} }).catch(() => undefined);
  if (!response?.ok) return [];
  return (await response.text())
    .split('\n')
    .filter((line) => line.startsWith('kb_http_undeclared_status_total{') && Number(line.slice(line.lastIndexOf(' ') + 1)) > 0);
}

/**
 * Waits until `backgroundWork` has ended at least `runs` runs of its vector graph task (builds,
 * and applications of noted changes) and has none under way, for at most `limitMs`.
 */
export async function vectorGraphWorkDone(backgroundWork: BackgroundWork, { runs = 0, limitMs }: { runs?: number; limitMs: number }) {
  const state = () => backgroundWork.states().find((task) => task.task === 'vector_graph_build')!;
  for (let waited = 0; state().runs < runs || state().running > 0; waited += 20) {
    if (waited > limitMs) throw new Error(`the vector graph work was not done within ${limitMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Waits until the server builds no vector graph in memory and applies no change to one (the
 * embedded store: docs/retrieval.md), so that two searches made after it take the same path: a
 * search answered by the store's graph and one by the graph in memory differ in a score's last digits.
 */
export function vectorGraphsSettled(server: TestServer) {
  return vectorGraphWorkDone(server.app.db.backgroundWork, { limitMs: 60_000 });
}

/** Asserts the documented error body and returns it. */
export function expectError(response: TestResponse, status: number, code: string) {
  if (response.status !== status || response.body?.error !== code || typeof response.body?.message !== 'string') {
    throw new Error(`expected ${status} ${code}, got ${response.status} ${response.text}`);
  }
  return response.body as { error: string; message: string };
}
