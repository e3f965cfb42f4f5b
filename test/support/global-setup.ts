import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { loadConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/database.js';
import { embeddedStoreDirectory } from '../../src/db/embedded-store.js';
import { createLogger } from '../../src/logger.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** An embedded store with every migration applied and nothing else, for test servers to copy (server.ts). */
    migratedEmbeddedStore: string | null;
  }
}

/**
 * Once per run, before any test file: on the embedded leg, a store made and migrated. A new
 * embedded store took 5.3 s to create and migrate here, a copy of this one 0.4 s (and 1.7 s to
 * open), and most test files start a server or more.
 */
export default async function setup(project: TestProject) {
  if (process.env.DATABASE_URL) {
    project.provide('migratedEmbeddedStore', null);
    return;
  }
  const dataDir = await mkdtemp(path.join(tmpdir(), 'kb-test-template-'));
  const config = loadConfig({ ...process.env, KB_DATA_DIR: dataDir, KB_LOG_LEVEL: 'silent' });
  const db = await openDatabase(config, createLogger('silent'));
  // The store analyses tables it has never analysed as soon as it opens, and a new store's are
  // such tables: after that first pass (maintain waits for it), the template's tables are marked
  // never analysed again, so that a copy starts as a new store does.
  await db.maintain();
  await db.prisma.$executeRawUnsafe(
    "UPDATE pg_class SET reltuples = -1, relpages = 0 WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'm', 'p')",
  );
  await db.prisma.$executeRawUnsafe("DELETE FROM pg_statistic WHERE starelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'public'::regnamespace)");
  await db.close();
  project.provide('migratedEmbeddedStore', embeddedStoreDirectory(dataDir));
  return () => rm(dataDir, { recursive: true, force: true });
}
