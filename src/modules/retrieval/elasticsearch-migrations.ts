import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@elastic/elasticsearch';
import { MigrationsPendingError } from '../../db/migrations.js';
import type { IndexLayout } from './elasticsearch-layout.js';
import { answeredWith, indexExisted } from './elasticsearch-requests.js';

/**
 * A change of the index's layout that a live index takes as it is: a field added to the mapping,
 * a dynamic setting changed. `apply` gets the client and the concrete index the alias names. A
 * process that dies between applying a migration and recording it applies it again at its next
 * start, so `apply` must be idempotent (adding a field that is there already is). A change no
 * live index can take (a field's type, the shard count, the source mode) is not a migration: it
 * changes what `IndexLayout.create` makes, and `kb reindex` puts the next generation in service
 * at the new layout.
 *
 * An index records in its mapping's `_meta.layout_version` the last migration it has taken; an
 * index made at this version records the latest, and one made before versions were recorded
 * counts as at version 1. A new version appends a migration; an applied one is never edited.
 */
export type LayoutMigration = { version: number; name: string; apply: (client: Client, index: string) => Promise<void> };

/** Version 1: the layout of the indexes made before versions were recorded (the chunks' fields, kb_bm25, synthetic source). */
export const layoutMigrations: readonly LayoutMigration[] = [{ version: 1, name: 'chunks', apply: async () => {} }];

export const latestLayoutVersion = (migrations: readonly LayoutMigration[]) => Math.max(...migrations.map((migration) => migration.version));

const migrationName = (migration: LayoutMigration) => `${migration.version}_${migration.name}`;

/**
 * The migrations' lock: its holder rewrites it every `renewMs`; a lock that a waiter sees
 * unchanged for `staleMs` (by the waiter's own clock) is taken to be held by a process that died,
 * and is taken over.
 */
export type LayoutLockTiming = { staleMs: number; renewMs: number };
export const layoutLockTiming: LayoutLockTiming = { staleMs: 5 * 60_000, renewMs: 30_000 };
const lockRetryMs = 200;

/**
 * Brings the index the alias names (`found`, as the caller found it) to the latest layout: the
 * migrations after the version it records, in order, each recorded as it is applied. Several processes may open the index at
 * once: the migrations run under a lock held in Elasticsearch itself, and the version is read
 * again once it is held, so each runs once, unless its process dies before recording it. A
 * holder whose lock was taken over stops before its next step. With `migrate` false
 * (KB_MIGRATE=off) a pending migration is refused instead. Returns the names of the migrations
 * this call applied.
 */
export async function migrateLayout(
  client: Client,
  layout: IndexLayout,
  found: string,
  migrations: readonly LayoutMigration[],
  { migrate, lockTiming = layoutLockTiming }: { migrate: boolean; lockTiming?: LayoutLockTiming },
): Promise<string[]> {
  const pendingAfter = (version: number | undefined) => migrations.filter((migration) => migration.version > (version ?? 1)).sort((a, b) => a.version - b.version);
  const concrete = async () => {
    const index = await layout.current();
    if (index === null) throw new Error(`the alias ${layout.alias} names no index`);
    return index;
  };
  const recorded = await layout.recordedLayoutVersion(found);
  const pending = pendingAfter(recorded);
  if (pending.length === 0) {
    // An index made before versions were recorded: version 1, recorded (by any process, alike).
    if (recorded === undefined && migrate) await layout.recordLayoutVersion(found, 1);
    return [];
  }
  if (!migrate) {
    throw new MigrationsPendingError(`the Elasticsearch index ${layout.alias} lacks ${pending.length} layout migrations of this version (${pending.map(migrationName).join(', ')})`);
  }
  const lock = await takeLayoutLock(client, `${layout.alias}-lock`, lockTiming);
  const applied: string[] = [];
  try {
    // One concrete index throughout: a swap by `kb reindex` meanwhile must not send half of the steps to the next generation.
    const index = await concrete();
    for (const migration of pendingAfter(await layout.recordedLayoutVersion(index))) {
      await lock.check();
      await migration.apply(client, index);
      await lock.check();
      await layout.recordLayoutVersion(index, migration.version);
      applied.push(migrationName(migration));
    }
  } catch (error) {
    await lock.release().catch(() => undefined);
    throw error;
  }
  // A lock left behind would hold every start up for `staleMs`: a failed release is an error.
  await lock.release();
  return applied;
}

type HeldLock = { check(): Promise<void>; release(): Promise<void> };

/**
 * Takes the lock: a document that only one `create` can make. Its holder rewrites it every
 * `renewMs`, each time on the condition that it is still the version it wrote last; a failed
 * condition means another process took it over. `check` reads it, and throws when it is no longer
 * the holder's. A waiter that sees the document unchanged for `staleMs` deletes it on the same
 * condition and tries again. The release deletes only the holder's own version.
 */
async function takeLayoutLock(client: Client, lockIndex: string, timing: LayoutLockTiming): Promise<HeldLock> {
  try {
    await client.indices.create({ index: lockIndex, settings: { number_of_shards: 1, auto_expand_replicas: '0-1' } });
  } catch (error) {
    if (!indexExisted(error)) throw error;
  }
  const id = 'layout';
  const holder = randomUUID();
  /** The lock document as it stands; undefined when nobody holds it. */
  const readLock = () =>
    client.get({ index: lockIndex, id }).catch((error: unknown) => {
      if (answeredWith(error, 404)) return undefined;
      throw error;
    });
  let version: { if_seq_no?: number; if_primary_term?: number } | undefined;
  let seen: { seqNo?: number; primaryTerm?: number; since: number } | undefined;
  while (!version) {
    try {
      const taken = await client.create({ index: lockIndex, id, document: { holder, renewals: 0 } });
      version = { if_seq_no: taken._seq_no, if_primary_term: taken._primary_term };
      break;
    } catch (error) {
      if (!answeredWith(error, 409)) throw error;
    }
    const held = await readLock();
    if (held && (seen?.seqNo !== held._seq_no || seen?.primaryTerm !== held._primary_term)) {
      seen = { seqNo: held._seq_no, primaryTerm: held._primary_term, since: Date.now() };
    } else if (held && Date.now() - seen!.since >= timing.staleMs) {
      await client.delete({ index: lockIndex, id, if_seq_no: held._seq_no, if_primary_term: held._primary_term }).catch((error: unknown) => {
        if (!answeredWith(error, 404, 409)) throw error;
      });
      seen = undefined;
      continue;
    }
    await sleep(lockRetryMs);
  }
  let lost = false;
  let renewals = 0;
  const renew = async () => {
    try {
      const renewed = await client.index({ index: lockIndex, id, document: { holder, renewals: ++renewals }, ...version });
      version = { if_seq_no: renewed._seq_no, if_primary_term: renewed._primary_term };
    } catch (error) {
      // Taken over (or deleted) by another process; any other failure is tried again at the next renewal.
      if (answeredWith(error, 404, 409)) lost = true;
    }
  };
  const verify = async () => {
    const held = await readLock();
    if (held?._seq_no !== version!.if_seq_no || held?._primary_term !== version!.if_primary_term) lost = true;
  };
  // Renewals and checks one after another: each reads the version the one before wrote.
  let renewing = Promise.resolve();
  const timer = setInterval(() => (renewing = renewing.then(renew)), timing.renewMs);
  return {
    async check() {
      if (!lost) {
        const checked = renewing.then(verify);
        renewing = checked.catch(() => undefined);
        await checked;
      }
      if (lost) throw new Error(`the lock of the Elasticsearch index's layout migrations (${lockIndex}) was taken over by another process; the next start carries on`);
    },
    async release() {
      clearInterval(timer);
      await renewing;
      if (lost) return;
      await client.delete({ index: lockIndex, id, ...version }).catch((error: unknown) => {
        if (!answeredWith(error, 404, 409)) throw error;
      });
    },
  };
}
