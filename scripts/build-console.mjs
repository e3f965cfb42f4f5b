// Builds the web console (console/) into console/dist/ with esbuild: one ES module bundle
// for the application, a chunk loaded on demand for PDF pages (pdf.js), pdf.js's worker, the
// stylesheet and index.html. The server serves that directory at / (src/http/console.ts);
// nothing is fetched from elsewhere at run time, so the console works offline.
//
// Runs at install (postinstall) and before the tests (pretest, with --if-stale: nothing to do
// when console/dist was built from the sources as they are now).
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { builtFrom, sourcesFingerprint, stampFile } from './source-stamp.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const consoleRoot = path.join(root, 'console');
const output = path.join(consoleRoot, 'dist');
const require = createRequire(import.meta.url);

/** Everything the build reads: the console's sources, the typed client's, and the locked dependencies. */
const fingerprint = () =>
  sourcesFingerprint(root, {
    directories: ['console/src', 'clients/typescript/src'],
    files: ['console/index.html', 'scripts/build-console.mjs', 'scripts/source-stamp.mjs', 'package-lock.json'],
  });

const sources = fingerprint();
if (process.argv.includes('--if-stale') && builtFrom(output) === sources) process.exit(0);

let esbuild;
try {
  esbuild = await import('esbuild');
} catch {
  if (existsSync(output)) {
    process.stderr.write('build-console: esbuild is not installed; keeping the existing console/dist\n');
    process.exit(0);
  }
  process.stderr.write('build-console: esbuild is not installed, and the console is served from console/dist: run npm install\n');
  process.exit(1);
}

const started = performance.now();
const staging = path.join(consoleRoot, `.dist-build-${process.pid}`);
rmSync(staging, { recursive: true, force: true });
mkdirSync(staging, { recursive: true });

const result = await esbuild.build({
  entryPoints: { app: path.join(consoleRoot, 'src/main.tsx'), styles: path.join(consoleRoot, 'src/styles.css') },
  outdir: path.join(staging, 'assets'),
  bundle: true,
  splitting: true,
  format: 'esm',
  target: ['es2022'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  minify: true,
  sourcemap: 'linked',
  legalComments: 'linked',
  chunkNames: 'chunk-[hash]',
  entryNames: '[name]',
  // The typed client is used from its sources, as the service's own reference client.
  alias: { '@kb/client': path.join(root, 'clients/typescript/src/index.ts') },
  logLevel: 'warning',
  metafile: true,
});
if (result.errors.length > 0) process.exit(1);

const pdfjsRoot = path.dirname(require.resolve('pdfjs-dist/package.json'));
copyFileSync(path.join(pdfjsRoot, 'legacy/build/pdf.worker.min.mjs'), path.join(staging, 'assets/pdf.worker.min.mjs'));
// Character maps and the standard fonts, for PDFs that use fonts they do not embed.
cpSync(path.join(pdfjsRoot, 'cmaps'), path.join(staging, 'assets/cmaps'), { recursive: true });
cpSync(path.join(pdfjsRoot, 'standard_fonts'), path.join(staging, 'assets/standard_fonts'), { recursive: true });
copyFileSync(path.join(consoleRoot, 'index.html'), path.join(staging, 'index.html'));
copyFileSync(path.join(consoleRoot, 'src/favicon.svg'), path.join(staging, 'assets/favicon.svg'));
// Compressed once here, so that the server never compresses on a request (the worker is 1.3 MB).
const compressible = /\.(?:html|js|mjs|css|map|json|svg|txt)$/;
const compressAll = (directory) => {
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    const full = path.join(directory, entry.name);
    if (entry.isDirectory()) compressAll(full);
    else if (compressible.test(entry.name) && statSync(full).size > 1024) writeFileSync(`${full}.gz`, gzipSync(readFileSync(full), { level: 9 }));
  }
};
compressAll(staging);
writeFileSync(path.join(staging, stampFile), sources);

const previous = path.join(consoleRoot, `.dist-old-${process.pid}`);
if (existsSync(output)) renameSync(output, previous);
renameSync(staging, output);
rmSync(previous, { recursive: true, force: true });

const bytes = Object.values(result.metafile.outputs).reduce((sum, file) => sum + file.bytes, 0);
process.stderr.write(`build-console: console/dist in ${((performance.now() - started) / 1000).toFixed(1)} s (${(bytes / 1024).toFixed(0)} KiB)\n`);
