// `npm run build`: compiles src/ (the Prisma client in src/generated/prisma included) to dist/
// with tsc, so `kb` and the server start from JavaScript. Emit only (tsconfig.build.json sets
// noCheck): `npm run typecheck` is the type check, and checking here as well would double the
// time of every build.
//
// Runs at install (postinstall, after `prisma generate`), before `npm test` (pretest), and from
// the test support before a test spawns `kb`. With --if-stale it does nothing when dist/ was
// built from the sources as they are now (dist/.sources holds their fingerprint).
//
// Other processes may run `kb` from dist/ meanwhile (test files, engineers sharing the
// checkout), so tsc writes to a directory beside it that is then renamed into place, and builds
// take a lock so that two of them never run at once.
import { spawn } from 'node:child_process';
import { existsSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import lockfile from 'proper-lockfile';
import { builtFrom, serviceSourcesFingerprint, stampFile } from './source-stamp.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = path.join(root, 'dist');
const ifStale = process.argv.includes('--if-stale');

const fingerprint = () => serviceSourcesFingerprint(root);

function tscPath() {
  try {
    return createRequire(import.meta.url).resolve('typescript/bin/tsc');
  } catch {
    return null;
  }
}

async function build() {
  const tsc = tscPath();
  if (!tsc) {
    if (existsSync(dist)) {
      process.stderr.write('build: typescript is not installed (devDependencies omitted?); keeping the existing dist/\n');
      return 0;
    }
    process.stderr.write('build: typescript is not installed (devDependencies omitted?), and kb runs from dist/: install without --omit=dev\n');
    return 1;
  }
  const started = performance.now();
  const sources = fingerprint(); // before tsc reads them: a file saved during the build makes the next check stale
  const output = path.join(root, `.dist-build-${process.pid}`);
  const previous = path.join(root, `.dist-old-${process.pid}`);
  rmSync(output, { recursive: true, force: true });
  // Asynchronous, so that the lock's heartbeat keeps running during the compile.
  const status = await new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--outDir', output], { cwd: root, stdio: 'inherit' });
    child.on('error', reject);
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
  if (status !== 0) {
    rmSync(output, { recursive: true, force: true });
    process.stderr.write('build: tsc failed; dist/ is unchanged\n');
    return status;
  }
  writeFileSync(path.join(output, stampFile), sources);
  if (existsSync(dist)) renameSync(dist, previous);
  renameSync(output, dist);
  rmSync(previous, { recursive: true, force: true });
  process.stderr.write(`build: dist/ in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
  return 0;
}

if (ifStale && builtFrom(dist) === fingerprint()) process.exit(0);

const release = await lockfile.lock(root, {
  lockfilePath: path.join(root, '.dist.lock'),
  stale: 30_000,
  retries: { retries: 600, minTimeout: 200, maxTimeout: 500 },
});
let status;
try {
  // Another process may have built while this one waited for the lock.
  status = ifStale && builtFrom(dist) === fingerprint() ? 0 : await build();
} finally {
  await release();
}
process.exit(status);
