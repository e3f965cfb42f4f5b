import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOwnDatabase, migratedDataDir } from '../../../test/support/server.js';
import { loadConfig } from '../../config.js';
import { openDatabase, type Database } from '../../db/database.js';
import { createLogger } from '../../logger.js';
import { BackgroundWork, longestYieldMs } from '../../observability/background-work.js';
import { analyze } from './analyzer.js';
import { startGraphMerge } from './graph-merge.js';
import { openPgvectorIndex } from './pgvector-index.js';
import type { VectorIndex } from './vector-index.js';

// The merge loop against a real pgvector index (PostgreSQL in its matrix leg, in a database of
// this file's own, since a merge takes every waiting row; else the embedded store), with
// ingestion's activity set by the test.
let dataDir: string;
let ownDatabase: Awaited<ReturnType<typeof createOwnDatabase>> | undefined;
let db: Database;
let index: VectorIndex;
let workspaceId: string;
let documentId: string;

const dimensions = 384;

beforeAll(async () => {
  dataDir = await migratedDataDir('kb-graph-merge-');
  const postgresUrl = (!process.env.ELASTICSEARCH_URL && process.env.DATABASE_URL) || undefined;
  ownDatabase = postgresUrl ? await createOwnDatabase(postgresUrl) : undefined;
  const config = loadConfig({ ...process.env, KB_DATA_DIR: dataDir, DATABASE_URL: ownDatabase?.url ?? '' });
  db = await openDatabase(config);
  index = await openPgvectorIndex(db.prisma, { model: 'bge-small-en-v1.5-q', dimensions }, { keywordMemoryBytes: 16 * 1024 * 1024 });
  const user = await db.prisma.user.create({ data: { email: `merge-${Math.random()}@example.com`, name: 'Merge' } });
  const workspace = await db.prisma.workspace.create({ data: { userId: user.id, name: 'merge', nameKey: `merge-${Math.random()}` } });
  workspaceId = workspace.id;
  documentId = (await db.prisma.document.create({ data: { workspaceId, filename: 'a.txt', contentType: 'text/plain', sizeBytes: 1, sha256: `${Math.random()}`, status: 'ready' } })).id;
}, 60_000);

afterAll(async () => {
  await index?.close();
  await db?.close();
  await ownDatabase?.drop();
  await rm(dataDir, { recursive: true, force: true });
});

let written = 0;
async function write(count: number) {
  const chunks = await db.prisma.chunk.createManyAndReturn({
    data: Array.from({ length: count }, (_, n) => ({ documentId, chunkIndex: written + n, content: `stone ${written + n}`, tokenCount: 2 })),
  });
  written += count;
  await index.upsert(
    chunks.map((chunk) => {
      const embedding = new Float32Array(dimensions);
      embedding[chunk.chunkIndex % dimensions] = 1;
      return { chunkId: chunk.id, documentId, workspaceId, embedding, terms: analyze(chunk.content) };
    }),
  );
}

const eventually = async (condition: () => Promise<boolean>) => {
  for (let waited = 0; waited < 20_000; waited += 25) {
    if (await condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return false;
};

describe('merging into the vector graph', () => {
  it('waits while ingestion runs, merges once it has been idle, and merges down to the backlog limit while it runs', async () => {
    let busy = true;
    let idleSince = 0;
    const activity = { idleForMs: () => (busy ? 0 : performance.now() - idleSince) };
    const merge = startGraphMerge({ index, activity, log: createLogger('silent') }, { sliceRows: 8, sliceMs: 60_000, quietMs: 1_000, idleMs: 200, backlogLimit: 30, pollMs: 20, lanes: 1, releaseSpace: true })!;
    try {
      await write(20);
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(await index.graphBacklog!()).toBe(20);

      busy = false;
      idleSince = performance.now();
      expect(await eventually(async () => (await index.graphBacklog!()) === 0)).toBe(true);
      expect(performance.now() - idleSince).toBeGreaterThanOrEqual(200);

      // Over the limit while ingestion runs: merged down to it, not further.
      busy = true;
      await write(50);
      expect(await eventually(async () => (await index.graphBacklog!()) <= 30)).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await index.graphBacklog!()).toBeGreaterThan(20);
      expect(await index.graphBacklog!()).toBeLessThanOrEqual(30);

      const { vector } = await index.search({ workspaceIds: [workspaceId], vector: (() => { const v = new Float32Array(dimensions); v[7] = 1; return v; })(), limit: 70, excludeDocumentIds: [] });
      expect(vector).toHaveLength(70);
      expect(vector[0]!.score).toBeCloseTo(1, 5);
    } finally {
      await merge.stop();
    }
  });

  it('lets a search in progress go first: no slice starts until it ends, and none waits longer than the yield limit', async () => {
    const backgroundWork = new BackgroundWork();
    const activity = { idleForMs: () => 60_000 };
    let release!: () => void;
    const searching = backgroundWork.foreground(() => new Promise<void>((resolve) => (release = resolve)));
    await write(12);
    const waiting = await index.graphBacklog!();
    expect(waiting).toBeGreaterThanOrEqual(12);
    const merge = startGraphMerge({ index, activity, log: createLogger('silent'), backgroundWork }, { sliceRows: 4, sliceMs: 60_000, quietMs: 1_000, idleMs: 0, backlogLimit: 1_000, pollMs: 20, lanes: 1, releaseSpace: true })!;
    try {
      await new Promise((resolve) => setTimeout(resolve, longestYieldMs / 2));
      expect(await index.graphBacklog!()).toBe(waiting);
      release();
      await searching;
      const mergeState = () => backgroundWork.states().find((state) => state.task === 'graph_merge')!;
      // The last slice counts once it has ended, a moment after its rows left the table.
      expect(await eventually(async () => (await index.graphBacklog!()) === 0 && mergeState().running === 0)).toBe(true);
      // One slice more when the merge reached the end of the ids and started over from the
      // first, and one step more to give the drained table's space back.
      const { runs } = mergeState();
      expect(runs).toBeGreaterThanOrEqual(Math.ceil(waiting / 4));
      expect(runs).toBeLessThanOrEqual(Math.ceil(waiting / 4) + 2);

      // A search that never ends holds each slice back for the yield limit, not for ever.
      await write(4);
      const holding = backgroundWork.foreground(() => new Promise<void>((resolve) => setTimeout(resolve, 3 * longestYieldMs)));
      const started = performance.now();
      expect(await eventually(async () => (await index.graphBacklog!()) === 0)).toBe(true);
      expect(performance.now() - started).toBeGreaterThanOrEqual(longestYieldMs * 0.9);
      expect(performance.now() - started).toBeLessThan(3 * longestYieldMs);
      await holding;
    } finally {
      await merge.stop();
    }
  });

  it('moves fewer rows per slice while requests come and slices take longer than they should, and full slices when none comes', async () => {
    await write(40);
    // The store's own work, made slow as a large graph makes it: 40 ms a slice whatever its size.
    const asked: number[] = [];
    const slow = Object.assign(Object.create(index) as VectorIndex, {
      graphBacklog: () => index.graphBacklog!(),
      mergeIntoGraph: async (maxRows: number) => {
        asked.push(maxRows);
        await new Promise((resolve) => setTimeout(resolve, 40));
        return index.mergeIntoGraph!(maxRows);
      },
    });
    // A search has just ended: requests come, for the next minute.
    const searched = new BackgroundWork();
    await searched.foreground(async () => {});
    const options = { sliceRows: 16, sliceMs: 10, quietMs: 60_000, idleMs: 0, backlogLimit: 1_000, pollMs: 20, lanes: 1, releaseSpace: true };
    const merge = startGraphMerge({ index: slow, activity: { idleForMs: () => 60_000 }, log: createLogger('silent'), backgroundWork: searched }, options)!;
    try {
      expect(await eventually(async () => (await index.graphBacklog!()) === 0)).toBe(true);
    } finally {
      await merge.stop();
    }
    expect(asked[0]).toBe(16);
    expect(asked[1]).toBeLessThanOrEqual(4);
    expect(new Set(asked.slice(2))).toEqual(new Set([1]));

    // No request yet: slices stay full however long they take, over the backlog limit or not.
    for (const backlogLimit of [1_000, 8]) {
      asked.length = 0;
      await write(40);
      const quiet = startGraphMerge({ index: slow, activity: { idleForMs: () => 60_000 }, log: createLogger('silent'), backgroundWork: new BackgroundWork() }, { ...options, backlogLimit })!;
      try {
        expect(await eventually(async () => (await index.graphBacklog!()) === 0)).toBe(true);
      } finally {
        await quiet.stop();
      }
      expect(asked.slice(0, 2)).toEqual([16, 16]);
    }
  });

  it('runs slices side by side in its lanes while no request comes, one at a time while requests come, and moves every chunk once', async () => {
    let inFlight = 0;
    let mostAtOnce = 0;
    const slow = Object.assign(Object.create(index) as VectorIndex, {
      graphBacklog: () => index.graphBacklog!(),
      mergeIntoGraph: async (maxRows: number) => {
        mostAtOnce = Math.max(mostAtOnce, ++inFlight);
        try {
          await new Promise((resolve) => setTimeout(resolve, 40));
          return await index.mergeIntoGraph!(maxRows);
        } finally {
          inFlight--;
        }
      },
    });
    const inGraph = async () =>
      (await db.prisma.$queryRawUnsafe<{ count: number }[]>('SELECT count(*)::int AS count FROM chunk_index WHERE document_id = $1::uuid', documentId))[0]!.count;
    const options = { sliceRows: 8, sliceMs: 60_000, quietMs: 60_000, idleMs: 0, backlogLimit: 1_000, pollMs: 20, lanes: 2, releaseSpace: true };

    /** Merges with `backgroundWork` until nothing waits outside the graph. */
    const drain = async (backgroundWork: BackgroundWork) => {
      const merge = startGraphMerge({ index: slow, activity: { idleForMs: () => 60_000 }, log: createLogger('silent'), backgroundWork }, options)!;
      try {
        expect(await eventually(async () => (await index.graphBacklog!()) === 0)).toBe(true);
      } finally {
        await merge.stop();
      }
    };

    await write(64);
    await drain(new BackgroundWork());
    expect(mostAtOnce).toBe(2);
    expect(await inGraph()).toBe(written);

    // A search has just ended: the second lane waits, and slices go one at a time.
    mostAtOnce = 0;
    await write(32);
    const searched = new BackgroundWork();
    await searched.foreground(async () => {});
    await drain(searched);
    expect(mostAtOnce).toBe(1);
    expect(await inGraph()).toBe(written);
  });

  it('gives the space of the merged rows back once it drained them, and keeps every chunk findable', async () => {
    const freshBytes = async () =>
      (await db.prisma.$queryRawUnsafe<{ bytes: number }[]>("SELECT pg_relation_size('chunk_index_fresh')::float8 AS bytes"))[0]!.bytes;
    await write(300);
    expect(await freshBytes()).toBeGreaterThan(0);
    // Told not to (PostgreSQL, where autovacuum reuses the space): drained, the table keeps it.
    const keeping = startGraphMerge({ index, activity: { idleForMs: () => 60_000 }, log: createLogger('silent') }, { sliceRows: 64, sliceMs: 60_000, quietMs: 1_000, idleMs: 0, backlogLimit: 1_000, pollMs: 20, lanes: 1, releaseSpace: false })!;
    try {
      expect(await eventually(async () => (await index.graphBacklog!()) === 0)).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 200));
    } finally {
      await keeping.stop();
    }
    expect(await freshBytes()).toBeGreaterThan(0);
    await write(30);
    const backgroundWork = new BackgroundWork();
    const merge = startGraphMerge({ index, activity: { idleForMs: () => 60_000 }, log: createLogger('silent'), backgroundWork }, { sliceRows: 64, sliceMs: 60_000, quietMs: 1_000, idleMs: 0, backlogLimit: 1_000, pollMs: 20, lanes: 1, releaseSpace: true })!;
    try {
      expect(await eventually(async () => (await freshBytes()) === 0)).toBe(true);
    } finally {
      await merge.stop();
    }
    expect(await index.graphBacklog!()).toBe(0);
    const probe = new Float32Array(dimensions);
    probe[(written - 1) % dimensions] = 1;
    const { vector } = await index.search({ workspaceIds: [workspaceId], vector: probe, limit: 5, excludeDocumentIds: [] });
    expect(vector[0]!.score).toBeCloseTo(1, 5);

    // Not while a row waits: the table is left as it is.
    await write(3);
    expect(await (index as Required<VectorIndex>).releaseMergedSpace()).toBe(false);
    expect(await index.graphBacklog!()).toBe(3);
  });

  it('counts the chunks outside the graph exactly while they are few, and from a sample of the pages once they are many', async () => {
    const exact = async () => (await db.prisma.$queryRawUnsafe<{ count: number }[]>('SELECT count(*)::int AS count FROM chunk_index_fresh'))[0]!.count;
    const pages = async () =>
      (await db.prisma.$queryRawUnsafe<{ pages: number }[]>("SELECT (pg_relation_size('chunk_index_fresh') / 8192)::int AS pages"))[0]!.pages;
    const expectCloseToWaiting = async () => {
      const waiting = await exact();
      const estimate = await index.graphBacklog!();
      expect(estimate).toBeGreaterThanOrEqual(0.9 * waiting);
      expect(estimate).toBeLessThanOrEqual(1.1 * waiting);
    };
    await write(7);
    expect(await index.graphBacklog!()).toBe(await exact());
    // More than the table size counted exactly (8 MB).
    await write(5_000);
    expect(await pages()).toBeGreaterThan(1_024);
    // As the store's maintenance does: PostgreSQL's own count of live rows becomes ANALYZE's, to
    // which the other connections add the writes they had not reported yet.
    await db.prisma.$executeRawUnsafe('ANALYZE chunk_index_fresh');
    await expectCloseToWaiting();
    // Four in five merged: their rows stay in the table, dead, and the waiting ones lie among them.
    for (let merged = 0; merged < 4_000; ) merged += await (index as Required<VectorIndex>).mergeIntoGraph(1_000);
    expect(await pages()).toBeGreaterThan(1_024);
    expect(await exact()).toBeLessThan(1_100);
    await expectCloseToWaiting();
    // That count set to nothing, as after a crash.
    await db.prisma.$queryRawUnsafe('SELECT pg_stat_reset()::text');
    await expectCloseToWaiting();
    while ((await (index as Required<VectorIndex>).mergeIntoGraph(1_000)) > 0);
    expect(await exact()).toBe(0);
    expect(await index.graphBacklog!()).toBe(0);
  }, 120_000);

  it('merges from several processes at once while documents are deleted and chunks written again, without a failure or a lost or doubled row', async () => {
    const others = await Promise.all([1, 2].map(() => openPgvectorIndex(db.prisma, { model: 'bge-small-en-v1.5-q', dimensions }, { keywordMemoryBytes: 16 * 1024 * 1024 })));
    try {
      const documents = await Promise.all(
        Array.from({ length: 6 }, async (_, position) => {
          const id = (await db.prisma.document.create({ data: { workspaceId, filename: `${position}.txt`, contentType: 'text/plain', sizeBytes: 1, sha256: `${Math.random()}`, status: 'ready' } })).id;
          const chunks = await db.prisma.chunk.createManyAndReturn({ data: Array.from({ length: 60 }, (_, n) => ({ documentId: id, chunkIndex: n, content: `pebble ${position} ${n}`, tokenCount: 2 })) });
          return { id, chunks };
        }),
      );
      const indexed = (chunks: { id: string; documentId: string; chunkIndex: number; content: string }[]) =>
        chunks.map((chunk) => {
          const embedding = new Float32Array(dimensions);
          embedding[(chunk.chunkIndex + 11) % dimensions] = 1;
          return { chunkId: chunk.id, documentId: chunk.documentId, workspaceId, embedding, terms: analyze(chunk.content) };
        });
      for (const document of documents) await index.upsert(indexed(document.chunks));
      const mergers = [index, ...others].map(async (through) => {
        while ((await through.mergeIntoGraph!(7)) > 0);
      });
      const writers = (async () => {
        // Deleted while merges run, and another written again (an embed job's retry).
        await db.prisma.document.delete({ where: { id: documents[0]!.id } });
        await others[0]!.upsert(indexed(documents[1]!.chunks));
        await db.prisma.document.delete({ where: { id: documents[2]!.id } });
        await others[1]!.upsert(indexed(documents[3]!.chunks));
      })();
      await Promise.all([...mergers, writers]);
      while ((await index.mergeIntoGraph!(50)) > 0);
      expect(await index.graphBacklog!()).toBe(0);
      const counts = await index.countByDocument(workspaceId);
      for (const [position, document] of documents.entries()) expect(counts.get(document.id)).toBe(position === 0 || position === 2 ? undefined : 60);
      const [doubled] = await db.prisma.$queryRaw<{ count: number }[]>`
        SELECT count(*)::int AS count FROM chunk_index i JOIN chunk_index_fresh f USING (chunk_id)`;
      expect(doubled!.count).toBe(0);
    } finally {
      await Promise.all(others.map((other) => other.close()));
    }
  });

  it('is not started for an index without a graph of its own', () => {
    const { graphBacklog: _backlog, mergeIntoGraph: _merge, ...withoutGraph } = index;
    expect(startGraphMerge({ index: withoutGraph as VectorIndex, activity: { idleForMs: () => 0 }, log: createLogger('silent') })).toBeUndefined();
  });
});
