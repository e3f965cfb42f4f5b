import { defineConfig } from 'prisma/config';

// The service chooses its database at run time (src/db/database.ts); the CLI only needs the
// schema, for `prisma generate`.
export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
});
