import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { MigrationsPendingError } from '../../db/migrations.js';
import { openElasticsearchIndex } from './elasticsearch-index.js';
import { layoutMigrations, type LayoutLockTiming, type LayoutMigration } from './elasticsearch-migrations.js';
import type { VectorIndex } from './vector-index.js';
import { elasticsearchIndexBed } from '../../../test/support/elasticsearch.js';

// The Elasticsearch index's layout migrations against a real node: the version an index records,
// later migrations applied once under the lock by several processes at once, KB_MIGRATE=off, and
// the lock's renewal, its takeover from a holder that died, and a holder that lost it. The
// Elasticsearch leg only.
const { url, run, model, cluster, dropAfter } = elasticsearchIndexBed();
const opened: VectorIndex[] = [];
afterAll(() => Promise.allSettled(opened.map((index) => index.close())));

/** Migrations that each add a keyword field, and say when they run; `during` runs inside the first. */
function fieldMigrations(ran: string[], during: () => Promise<unknown> = async () => {}): LayoutMigration[] {
  const adding = (version: number, field: string): LayoutMigration => ({
    version,
    name: `add_${field}`,
    apply: async (client, index) => {
      ran.push(field);
      if (version === 2) await during();
      await client.indices.putMapping({ index, properties: { [field]: { type: 'keyword' } } });
    },
  });
  return [...layoutMigrations, adding(2, 'tag'), adding(3, 'note')];
}

async function open(name: string, migrations: readonly LayoutMigration[], { migrate = true, layoutLock }: { migrate?: boolean; layoutLock?: LayoutLockTiming } = {}) {
  const alias = `${run}_${name}`;
  dropAfter(alias);
  const index = await openElasticsearchIndex(cluster([url], 0, alias), model, { timeoutMs: 10_000, migrate, migrations, layoutLock });
  opened.push(index);
  return index;
}

async function mappingOf(name: string) {
  const found = (await (await fetch(`${url}/${run}_${name}/_mapping`)).json()) as Record<string, { mappings: { _meta: Record<string, unknown>; properties: Record<string, unknown> } }>;
  return Object.values(found)[0]!.mappings;
}

const lockUrl = (name: string) => `${url}/${run}_${name}-lock/_doc/layout`;

/**
 * Version 1's layout as it was made, frozen here (`IndexLayout.create` may change after it): the
 * migrations must bring an index of it to what a new index is made with.
 */
const versionOneIndex = {
  settings: { number_of_replicas: 0, similarity: { kb_bm25: { type: 'BM25', k1: 0.9, b: 0.4 } }, 'mapping.source.mode': 'synthetic' },
  mappings: {
    _meta: { model: model.model, dimensions: model.dimensions },
    dynamic: 'strict',
    properties: {
      chunk_id: { type: 'keyword' },
      document_id: { type: 'keyword' },
      workspace_id: { type: 'keyword' },
      embedding: { type: 'dense_vector', dims: model.dimensions, index: true, similarity: 'cosine', index_options: { type: 'int8_hnsw' } },
      terms: { type: 'text', analyzer: 'whitespace', similarity: 'kb_bm25' },
    },
  },
};

describe('the Elasticsearch index layout migrations', () => {
  it("brings an index of version 1's layout to the layout a new index is made with", async () => {
    const alias = `${run}_first`;
    dropAfter(alias);
    const made = await fetch(`${url}/${alias}-1`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...versionOneIndex, aliases: { [alias]: {} } }),
    });
    expect(made.status).toBe(200);
    await open('first', layoutMigrations);
    await open('new', layoutMigrations);
    const layoutOf = async (name: string) => {
      const settings = (await (await fetch(`${url}/${run}_${name}/_settings?flat_settings=true`)).json()) as Record<string, { settings: Record<string, string> }>;
      const { 'index.similarity.kb_bm25.type': type, 'index.similarity.kb_bm25.k1': k1, 'index.similarity.kb_bm25.b': b, 'index.mapping.source.mode': source } = Object.values(settings)[0]!.settings;
      return { mappings: await mappingOf(name), settings: { type, k1, b, source } };
    };
    expect(await layoutOf('first')).toEqual(await layoutOf('new'));
  });

  it('makes a new index at the latest layout version, and takes no migration then', async () => {
    const ran: string[] = [];
    const index = await open('fresh', fieldMigrations(ran));
    expect(index.appliedMigrations).toEqual([]);
    expect(ran).toEqual([]);
    expect((await mappingOf('fresh'))._meta).toEqual({ ...model, layout_version: 3 });
  });

  it('brings an index at an older layout up once, in order, when several processes open it at once', async () => {
    await open('older', layoutMigrations);
    expect((await mappingOf('older'))._meta).toEqual({ ...model, layout_version: 1 });
    const ran: string[] = [];
    const indexes = await Promise.all(Array.from({ length: 4 }, () => open('older', fieldMigrations(ran))));
    expect(ran).toEqual(['tag', 'note']);
    expect(indexes.flatMap((index) => index.appliedMigrations).sort()).toEqual(['2_add_tag', '3_add_note']);
    const mapping = await mappingOf('older');
    expect(mapping._meta).toEqual({ ...model, layout_version: 3 });
    expect(mapping.properties).toMatchObject({ tag: { type: 'keyword' }, note: { type: 'keyword' } });
    // The lock is released.
    expect((await fetch(lockUrl('older'))).status).toBe(404);
    // And a process opening it later finds nothing to do.
    expect((await open('older', fieldMigrations(ran))).appliedMigrations).toEqual([]);
    expect(ran).toEqual(['tag', 'note']);
  });

  it('refuses an index behind on its layout with KB_MIGRATE=off, naming what it lacks, and opens it once migrated', async () => {
    await open('pending', layoutMigrations);
    const ran: string[] = [];
    const refused = open('pending', fieldMigrations(ran), { migrate: false });
    await expect(refused).rejects.toBeInstanceOf(MigrationsPendingError);
    await expect(refused).rejects.toThrow(`the Elasticsearch index ${run}_pending lacks 2 layout migrations of this version (2_add_tag, 3_add_note); run kb migrate`);
    expect(ran).toEqual([]);
    expect((await open('pending', fieldMigrations(ran))).appliedMigrations).toEqual(['2_add_tag', '3_add_note']);
    expect((await open('pending', fieldMigrations(ran), { migrate: false })).appliedMigrations).toEqual([]);
  });

  it('waits for a live holder of the lock, and takes over a lock left unchanged for the stale time', async () => {
    await open('locked', layoutMigrations);
    const hold = () => fetch(lockUrl('locked'), { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ holder: 'elsewhere' }) });
    await fetch(`${url}/${run}_locked-lock`, { method: 'PUT' });
    expect((await hold()).status).toBe(201);
    const ran: string[] = [];
    const waiting = open('locked', fieldMigrations(ran).slice(0, 2));
    await sleep(1_000);
    expect(ran).toEqual([]);
    expect((await mappingOf('locked'))._meta).toEqual({ ...model, layout_version: 1 });
    // The holder lets go: the waiting process migrates.
    expect((await fetch(lockUrl('locked'), { method: 'DELETE' })).status).toBe(200);
    expect((await waiting).appliedMigrations).toEqual(['2_add_tag']);

    // Held by a process that died (it never renews the lock): taken over once it has not changed for the stale time.
    expect((await hold()).status).toBe(201);
    expect((await open('locked', fieldMigrations(ran), { layoutLock: { staleMs: 1_000, renewMs: 200 } })).appliedMigrations).toEqual(['3_add_note']);
    expect(ran).toEqual(['tag', 'note']);
    expect((await fetch(lockUrl('locked'))).status).toBe(404);
  });

  it('keeps the lock while a migration outlasts the stale time, by renewing it', async () => {
    await open('renewed', layoutMigrations);
    const ran: string[] = [];
    const layoutLock = { staleMs: 600, renewMs: 100 };
    const indexes = await Promise.all(Array.from({ length: 3 }, () => open('renewed', fieldMigrations(ran, () => sleep(2_000)), { layoutLock })));
    expect(ran).toEqual(['tag', 'note']);
    expect(indexes.flatMap((index) => index.appliedMigrations).sort()).toEqual(['2_add_tag', '3_add_note']);
  });

  it('stops before its next step when its lock is taken over, and leaves the new holder its lock', async () => {
    await open('usurped', layoutMigrations);
    const ran: string[] = [];
    const usurp = () => fetch(lockUrl('usurped'), { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ holder: 'usurper' }) });
    await expect(open('usurped', fieldMigrations(ran, usurp))).rejects.toThrow(/was taken over by another process/);
    expect(ran).toEqual(['tag']);
    // Applied but not recorded: the next start applies it again (migrations are idempotent).
    expect((await mappingOf('usurped'))._meta).toEqual({ ...model, layout_version: 1 });
    expect(((await (await fetch(lockUrl('usurped'))).json()) as { _source: unknown })._source).toEqual({ holder: 'usurper' });
    expect((await fetch(lockUrl('usurped'), { method: 'DELETE' })).status).toBe(200);
    expect((await open('usurped', fieldMigrations(ran))).appliedMigrations).toEqual(['2_add_tag', '3_add_note']);
    expect((await mappingOf('usurped'))._meta).toEqual({ ...model, layout_version: 3 });
  });
});
