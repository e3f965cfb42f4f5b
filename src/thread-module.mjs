// What a worker thread or a child process started from the TypeScript sources (vitest, tsx
// scripts) runs: neither inherits the loader registered in the main thread. When dist/ was built
// from the sources as they are now (npm test builds it first), it loads the module's compiled twin
// there; otherwise it registers tsx and loads the source. Every import of a thread or process that
// loads through tsx goes through tsx's loader: the parsing threads took 3.3 s to start that way
// here, 0.7 s compiled, and the model's threads 1.9 s against 0.6 s. The compiled service (dist/)
// never comes here: it starts its threads and processes on their own modules.
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { builtFrom, serviceSourcesFingerprint } from '../scripts/source-stamp.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Imports the module at `sourceUrl` (a .ts file under src/), compiled when dist/ is current. */
export async function importThreadModule(sourceUrl) {
  const dist = path.join(root, 'dist');
  if (builtFrom(dist) === serviceSourcesFingerprint(root)) {
    const compiled = path.join(dist, path.relative(path.join(root, 'src'), fileURLToPath(sourceUrl)).replace(/\.ts$/, '.js'));
    return import(pathToFileURL(compiled).href);
  }
  const { register } = await import('tsx/esm/api');
  register();
  return import(sourceUrl);
}
