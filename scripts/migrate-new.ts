// Writes prisma/migrations/<timestamp>_<name>/migration.sql with the SQL that takes a database
// from the committed migrations to prisma/schema.prisma. Prisma's own `migrate dev` needs a
// native engine that cannot be downloaded here, so this runs the same engine compiled to WASM
// against an in-memory PGlite shadow database.
//
//   npm run migrate:new -- <name>     write a new migration (nothing when already in sync)
//   npm run migrate:new -- --check    exit 1 when the schema has changes without a migration
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { migrationDiff } from '../src/db/schema-diff.js';

const args = process.argv.slice(2);
const checkOnly = args.includes('--check');
const name = args.find((arg) => !arg.startsWith('--'));
if (!checkOnly && (!name || !/^[a-z0-9_]+$/.test(name))) {
  console.error('usage: npm run migrate:new -- <name in snake_case> | --check');
  process.exit(2);
}

const sql = await migrationDiff();
if (!sql.trim() || sql.trim() === '-- This is an empty migration.') {
  console.log('prisma/migrations is in sync with prisma/schema.prisma');
  process.exit(0);
}
if (checkOnly) {
  console.error('prisma/schema.prisma has changes without a migration:\n' + sql);
  process.exit(1);
}
const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 14);
const directory = path.join('prisma', 'migrations', `${stamp}_${name}`);
await mkdir(directory, { recursive: true });
await writeFile(path.join(directory, 'migration.sql'), sql);
console.log(`wrote ${directory}/migration.sql`);
