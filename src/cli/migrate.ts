import type { Config } from '../config.js';
import { openDatabase } from '../db/database.js';
import { createEmbedder } from '../modules/embeddings/select.js';
import { openVectorIndex } from '../modules/retrieval/select.js';

/**
 * `kb migrate`: brings the database and the index to this version once, so that processes
 * started with KB_MIGRATE=off (a deploy's new replicas) find them ready. Migrations run under
 * the store's lock, so it is safe beside running servers. The index needs the configured model's
 * dimensions: a new one records them.
 */
export async function migrate(
  config: Config,
): Promise<{ appliedMigrations: string[]; appliedIndexMigrations: string[]; index: string; model: string; dimensions: number }> {
  const db = await openDatabase({ ...config, migrate: true });
  try {
    const embedder = await createEmbedder(config);
    try {
      const index = await openVectorIndex({ ...config, migrate: true }, db, embedder, { loadAhead: false });
      const built = index.builtWith;
      await index.close();
      return { appliedMigrations: db.appliedMigrations, appliedIndexMigrations: [...(index.appliedMigrations ?? [])], index: index.kind, model: built.model, dimensions: built.dimensions };
    } finally {
      await embedder.close();
    }
  } finally {
    await db.close();
  }
}
