import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import * as schemaEngineBindings from '@prisma/schema-engine-wasm/schema_engine_bg';
import { createRequire } from 'node:module';
import { bindMigrationAwareSqlAdapterFactory } from '@prisma/driver-adapter-utils';
import { PrismaPGlite } from 'pglite-prisma-adapter';

const prismaDirectory = fileURLToPath(new URL('../../prisma/', import.meta.url));
const migrationsDirectory = path.join(prismaDirectory, 'migrations');

// The package targets bundlers (it imports its .wasm as a module), so instantiate it by hand.
async function loadSchemaEngine() {
  const require = createRequire(import.meta.url);
  const wasmPath = path.join(path.dirname(require.resolve('@prisma/schema-engine-wasm/schema_engine_bg')), 'schema_engine_bg.wasm');
  const { instance } = await WebAssembly.instantiate(await readFile(wasmPath), {
    './schema_engine_bg.js': schemaEngineBindings as unknown as WebAssembly.ModuleImports,
  });
  schemaEngineBindings.__wbg_set_wasm(instance.exports);
  (instance.exports.__wbindgen_start as () => void)();
  return schemaEngineBindings.SchemaEngine;
}

export async function migrationDiff(): Promise<string> {
  const SchemaEngine = await loadSchemaEngine();
  const schemaPath = path.join(prismaDirectory, 'schema.prisma');
  const schema = await readFile(schemaPath, 'utf8');
  const migrationDirectories = await readMigrationDirectories();
  const shadow = new PGlite();
  const adapter = bindMigrationAwareSqlAdapterFactory(new PrismaPGlite(shadow));
  const engine = await SchemaEngine.new({ datamodels: [[schemaPath, schema]] }, () => {}, adapter);
  try {
    const result = await engine.diff({
      from: {
        tag: 'migrations',
        baseDir: migrationsDirectory,
        lockfile: { path: 'migration_lock.toml', content: 'provider = "postgresql"\n' },
        shadowDbInitScript: '',
        migrationDirectories,
      },
      to: { tag: 'schemaDatamodel', files: [{ path: schemaPath, content: schema }] },
      script: true,
      exitCode: null,
      filters: { externalTables: [], externalEnums: [] },
    });
    return result.stdout ?? '';
  } finally {
    engine.free();
    await shadow.close();
  }
}

async function readMigrationDirectories() {
  const entries = await readdir(migrationsDirectory, { withFileTypes: true }).catch(() => []);
  const directories = entries.filter((entry) => entry.isDirectory()).map((entry) => entry.name).sort();
  return Promise.all(
    directories.map(async (directory) => ({
      path: directory,
      migrationFile: {
        path: 'migration.sql',
        content: { tag: 'ok' as const, value: await readFile(path.join(migrationsDirectory, directory, 'migration.sql'), 'utf8') },
      },
    })),
  );
}
