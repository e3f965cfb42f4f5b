import { mkdtemp, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { embeddedCacheMb, embeddedStoreDirectory, openDatabase } from '../src/db/database.js';

// The embedded store on every leg of the matrix: PostgreSQL's own cache is its administrator's.
let dataDir: string;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'kb-cache-'));
});

afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

const pageCache = async (environment: Record<string, string>) => {
  const db = await openDatabase(loadConfig({ ...process.env, KB_DATA_DIR: dataDir, DATABASE_URL: '', ...environment }));
  try {
    const [row] = await db.prisma.$queryRawUnsafe<{ shared_buffers: string }[]>('SHOW shared_buffers');
    return row!.shared_buffers;
  } finally {
    await db.close();
  }
};

describe("the embedded store's page cache", () => {
  it('is as large as the tables on disk, in steps of 64 MB, from 128 MB to 1 GB', () => {
    const mb = 1024 * 1024;
    expect(embeddedCacheMb(0)).toBe(128);
    expect(embeddedCacheMb(129 * mb)).toBe(192);
    expect(embeddedCacheMb(839 * mb)).toBe(832 + 64);
    expect(embeddedCacheMb(1024 * mb)).toBe(1024);
    expect(embeddedCacheMb(50 * 1024 * mb)).toBe(1024);
  });

  it('reaches PGlite: sized from the store at each start unless KB_STORE_CACHE_MB sets it', async () => {
    expect(await pageCache({ KB_STORE_CACHE_MB: '' })).toBe('128MB');
    expect(await pageCache({ KB_STORE_CACHE_MB: '48' })).toBe('48MB');
    // A store grown past the floor gets a larger cache at its next start (a sparse file stands in for its tables).
    const grown = path.join(embeddedStoreDirectory(dataDir), 'base', 'grown');
    await writeFile(grown, '');
    await truncate(grown, 300 * 1024 * 1024);
    expect(await pageCache({ KB_STORE_CACHE_MB: '' })).toBe('384MB');
  }, 120_000);
});
