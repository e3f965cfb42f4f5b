// What the builds (scripts/build.mjs, scripts/build-console.mjs) use to tell whether their
// output was made from the sources as they are now: a fingerprint of the names, sizes and
// modification times of what they read, kept in the output as `.sources`.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

export const stampFile = '.sources';

/**
 * The fingerprint of every file under `directories` that `include` takes (by name), and of
 * `files`; all paths relative to `root`.
 */
export function sourcesFingerprint(root, { directories, files, include = () => true }) {
  const hash = createHash('sha256');
  const add = (file) => {
    try {
      const stats = statSync(file);
      hash.update(`${path.relative(root, file)}\0${stats.size}\0${stats.mtimeMs}\n`);
    } catch (error) {
      if (error.code !== 'ENOENT') throw error; // deleted while we looked: the next check sees it
    }
  };
  const walk = (directory) => {
    const entries = readdirSync(directory, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const entry of entries) {
      const full = path.join(directory, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (include(entry.name)) add(full);
    }
  };
  for (const directory of directories) walk(path.join(root, directory));
  for (const file of files) add(path.join(root, file));
  return hash.digest('hex');
}

/** The fingerprint the output in `directory` was built from, or null when there is none. */
export function builtFrom(directory) {
  try {
    return readFileSync(path.join(directory, stampFile), 'utf8');
  } catch {
    return null;
  }
}

/** Everything the service's build (scripts/build.mjs) reads: its sources (not its tests) and the compiler settings. */
export function serviceSourcesFingerprint(root) {
  return sourcesFingerprint(root, {
    directories: ['src'],
    files: ['tsconfig.json', 'tsconfig.build.json', 'scripts/build.mjs', 'scripts/source-stamp.mjs'],
    include: (name) => name.endsWith('.ts') && !name.endsWith('.test.ts'),
  });
}
