import { nameKey } from '../input-limits.js';
import type { SqlRunner } from './migrations.js';

/**
 * The work of migrations that SQL cannot do, by migration name: each runs right after its
 * migration's SQL, in the same transaction (src/db/migrations.ts).
 */
export const migrationSteps: Readonly<Record<string, (runner: SqlRunner) => Promise<void>>> = {
  '20261127020100_workspace_name_keys': writeWorkspaceNameKeys,
};

/**
 * Every workspace's `name_key` as nameKey computes it now. Two workspaces of one user whose
 * names are the same under it (`Papers` and `Pa\u200Bpers`, `Straße` and `STRASSE`) were both
 * allowed before: both stay, with their names, documents and everything else. The older keeps
 * the name's key; each later one gets the key, U+0001 and its id, which no name can have, so that
 * it takes no other workspace's name from the user. Renaming either then follows the usual rule
 * (409 for a name the other has).
 */
async function writeWorkspaceNameKeys(runner: SqlRunner): Promise<void> {
  const workspaces = await runner.query<{ id: string; user_id: string; name: string }>(
    'SELECT id, user_id, name FROM workspaces ORDER BY user_id, created_at, id',
  );
  const taken = new Set<string>();
  const keys = workspaces.map((workspace) => {
    const key = nameKey(workspace.name);
    const owned = JSON.stringify([workspace.user_id, key]);
    if (!taken.has(owned)) {
      taken.add(owned);
      return key;
    }
    return `${key}\u0001${workspace.id}`;
  });
  await runner.query(
    'UPDATE workspaces AS w SET name_key = k.name_key FROM unnest($1::uuid[], $2::text[]) AS k(id, name_key) WHERE w.id = k.id',
    [workspaces.map((workspace) => workspace.id), keys],
  );
}
