// Prisma's CLI tries to download a native schema engine before every command; `generate`
// does not need it, so point it at an existing file and skip the telemetry check.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const projectRoot = fileURLToPath(new URL('..', import.meta.url));
const result = spawnSync('npx', ['prisma', 'generate'], {
  cwd: projectRoot,
  stdio: 'inherit',
  env: {
    ...process.env,
    PRISMA_SCHEMA_ENGINE_BINARY: fileURLToPath(new URL('../package.json', import.meta.url)),
    PRISMA_HIDE_UPDATE_MESSAGE: '1',
    CHECKPOINT_DISABLE: '1',
  },
});
process.exit(result.status ?? 1);
