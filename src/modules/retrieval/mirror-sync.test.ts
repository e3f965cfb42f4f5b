import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.js';
import { openDatabase, type Database } from '../../db/database.js';
import { unloaded } from './held-workspace.js';
import { catchUpWorkspace, loadWorkspace } from './mirror-sync.js';
import { openPgvectorIndex } from './pgvector-index.js';
import type { VectorIndex } from './vector-index.js';
import { indexedDocuments, model, unit } from '../../../test/support/vector-index.js';

// The in-memory keyword side of the pgvector index following the change log through a merge into
// the graph, on the leg's store (the embedded one, or PostgreSQL on the pgvector leg).
let dataDir: string;
let db: Database;
let index: VectorIndex & Required<Pick<VectorIndex, 'mergeIntoGraph'>>;
let userId: string;
const { workspaceWith, addDocuments } = indexedDocuments(() => ({ db, userId, index }));

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'kb-mirror-sync-'));
  const config = loadConfig({ ...process.env, KB_DATA_DIR: dataDir });
  db = await openDatabase(config);
  index = (await openPgvectorIndex(db.prisma, model, { keywordMemoryBytes: 1 << 20, loadAhead: false })) as typeof index;
  userId = (await db.prisma.user.create({ data: { email: `mirror-${Math.random()}@example.com`, name: 'Mirror' } })).id;
}, 60_000);

afterAll(async () => {
  await index?.close();
  await db?.close();
  await rm(dataDir, { recursive: true, force: true });
});

const loggedMoves = async (workspaceId: string) =>
  Object.fromEntries(
    (
      await db.prisma.$queryRaw<{ moved: boolean; rows: number }[]>`
        SELECT moved, count(*)::int AS rows FROM chunk_index_log WHERE workspace_id = ${workspaceId}::uuid GROUP BY moved`
    ).map((row) => [String(row.moved), row.rows]),
  );

describe("the keyword side's sync through a merge into the graph", () => {
  it("logs a merge's moves as moves, reads none of them again, and reads a moved chunk a load missed", async () => {
    const texts = Array.from({ length: 12 }, (_, i) => `heron ${i} wades the estuary`);
    const { workspaceId } = await workspaceWith('moves', [{ texts, vectors: texts.map((_, i) => unit(200 + i)) }]);
    expect(await loggedMoves(workspaceId)).toEqual({ false: 12 });

    const held = unloaded();
    await loadWorkspace(db.prisma, undefined, workspaceId, held);
    expect([held.postings.chunkCount, held.fresh.size]).toEqual([12, 12]);
    const chunks = await db.prisma.chunk.findMany({ where: { document: { workspaceId } }, orderBy: { chunkIndex: 'asc' }, select: { id: true } });
    // As a load that read the graph's table before the merge and the waiting chunks' after it would hold it.
    const missed = chunks[0]!.id;
    held.postings.remove(missed);
    held.fresh.delete(missed);

    while ((await index.mergeIntoGraph(5)) > 0);
    // Each moved chunk twice: out of the waiting chunks' table, into the graph's.
    expect(await loggedMoves(workspaceId)).toEqual({ false: 12, true: 24 });
    // Terms changed in place, as no write of the service does: a sync that read the moved rows again would take them.
    await db.prisma.$executeRaw`UPDATE chunk_index SET terms = '{unlogged}', freqs = '{1}', term_count = 1 WHERE workspace_id = ${workspaceId}::uuid`;

    await catchUpWorkspace(db.prisma, undefined, workspaceId, held);
    expect([held.postings.chunkCount, held.fresh.size]).toEqual([12, 0]);
    expect(held.postings.has(missed)).toBe(true);
    // Only the chunk the load missed was read, with the terms the table holds now.
    expect(held.postings.documentFrequency('unlogged')).toBe(1);
    expect(held.postings.documentFrequency('heron')).toBe(11);

    // A chunk moved and then deleted is read again, and goes.
    await addDocuments(workspaceId, [{ texts: ['egret on the mudflat'], vectors: [unit(230)] }]);
    while ((await index.mergeIntoGraph(5)) > 0);
    const [egret] = await db.prisma.chunk.findMany({ where: { content: 'egret on the mudflat', document: { workspaceId } }, select: { id: true } });
    await db.prisma.$executeRaw`DELETE FROM chunk_index WHERE chunk_id = ${egret!.id}::uuid`;
    await catchUpWorkspace(db.prisma, undefined, workspaceId, held);
    expect(held.postings.has(egret!.id)).toBe(false);
    expect(held.postings.chunkCount).toBe(12);
  });
});
