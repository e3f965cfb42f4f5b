import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EmbeddedStoreThread } from '../src/db/embedded-store-thread.js';

// The embedded store's thread, driven by `pg` through its socket as the service drives it.
let directory: string;
let store: EmbeddedStoreThread;
let client: pg.Client;

beforeAll(async () => {
  directory = await mkdtemp(path.join(os.tmpdir(), 'kb-store-thread-'));
  // A heap far smaller than the rows that go through it: the thread may hold what one statement
  // needs, not what went before.
  store = new EmbeddedStoreThread({ directory, cacheMb: 16 }, { heapLimitMb: 64 });
  await store.waitReady;
  client = new pg.Client({ stream: () => store.socket(), user: 'postgres', database: 'postgres' });
  await client.connect();
}, 60_000);

afterAll(async () => {
  // A thread that stopped leaves the connection without an answer to its goodbye.
  await Promise.race([client?.end().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 2_000))]);
  await store?.close();
  await rm(directory, { recursive: true, force: true });
});

describe('the embedded store thread', () => {
  it('keeps nothing of the rows it has written and read: about 680 MB through a thread of 64 MB heap', async () => {
    await client.query('CREATE TABLE pages (id int PRIMARY KEY, body text)');
    const body = 'a line of a long report, with numbers 12,345 and 6.7 %\n'.repeat(36_000); // 2 MB
    for (let round = 0; round < 50; round++) {
      await client.query('INSERT INTO pages (id, body) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET body = excluded.body', [round % 5, body]);
      const { rows } = await client.query<{ body: string }>('SELECT body FROM pages WHERE id = $1', [round % 5]);
      expect(rows[0]!.body.length).toBe(body.length);
      // Read again as many rows, in one reply.
      const all = await client.query<{ length: number }>('SELECT length(body) AS length, body FROM pages');
      expect(all.rows.every((row) => row.length === body.length)).toBe(true);
    }
  }, 240_000);
});
