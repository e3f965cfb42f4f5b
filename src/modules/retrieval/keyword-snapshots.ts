import { mkdir, open, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { SnapshotFormatError, TermPostings } from './term-postings.js';

/** What a workspace's `<id>.json` says of its saved postings. */
type SavedEntry = {
  format: 1;
  /** The file holding the postings (TermPostings.encode), beside this entry. */
  file: string;
  bytes: number;
  /** The index's creation stamp and the sync horizon the postings were held at (HeldWorkspace). */
  generation: string;
  horizon: string;
};

/** A workspace's postings as saved, with what a catch-up from the store needs to bring them up to date. */
export type SavedPostings = { postings: TermPostings; file: string; generation: string; horizon: string };

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const postingsFilePattern = /^([0-9a-f-]{36})\.[0-9a-z-]+\.postings$/;
/** A postings file no entry names is removed once it is this old: a process may have just written it, its entry not yet. */
const orphanAfterMs = 10 * 60_000;

const missing = (error: unknown) => (error as NodeJS.ErrnoException).code === 'ENOENT';

function savedEntry(text: string, workspaceId: string): SavedEntry | undefined {
  let entry: Partial<SavedEntry>;
  try {
    entry = JSON.parse(text) as Partial<SavedEntry>;
  } catch {
    return undefined;
  }
  const named = typeof entry.file === 'string' ? postingsFilePattern.exec(entry.file) : null;
  if (
    entry.format !== 1 ||
    named?.[1] !== workspaceId ||
    !Number.isSafeInteger(entry.bytes) ||
    typeof entry.generation !== 'string' ||
    typeof entry.horizon !== 'string' ||
    !/^\d{1,20}$/.test(entry.horizon)
  )
    return undefined;
  return entry as SavedEntry;
}

/**
 * Workspaces' keyword postings kept on disk, so that a process which starts, or loads a workspace
 * again after dropping it from memory, reads one file and catches up with the store's change log
 * instead of reading every chunk's terms from the store (4-6 s at 100,000 chunks, against about
 * 0.2 s). A cache: anything missing, unreadable, of another index or too old for the log is
 * ignored and the workspace loaded from the store as before.
 *
 * Per workspace, `<id>.<writer>.postings` holds the postings and `<id>.json` names that file with
 * the index generation and horizon it was held at. Both are written whole under a new name and
 * renamed, so a reader never meets half a file, and several processes sharing the directory
 * (PostgreSQL with one data directory) replace each other's saves without harm.
 */
export class KeywordSnapshots {
  constructor(readonly directory: string) {}

  #entryPath(workspaceId: string) {
    return path.join(this.directory, `${workspaceId}.json`);
  }

  async #entry(workspaceId: string): Promise<SavedEntry | undefined> {
    try {
      return savedEntry(await readFile(this.#entryPath(workspaceId), 'utf8'), workspaceId);
    } catch (error) {
      if (missing(error)) return undefined;
      throw error;
    }
  }

  /**
   * The workspace's saved postings, or undefined when none are saved or they cannot be read
   * whole (then removed). `pause` runs between slices of the decoding.
   */
  async read(workspaceId: string, pause?: () => Promise<void>): Promise<SavedPostings | undefined> {
    if (!uuidPattern.test(workspaceId)) return undefined;
    const entry = await this.#entry(workspaceId);
    if (!entry) return undefined;
    let bytes: Buffer;
    try {
      bytes = await readFile(path.join(this.directory, entry.file));
    } catch (error) {
      if (missing(error)) return undefined;
      throw error;
    }
    try {
      if (bytes.length !== entry.bytes) throw new SnapshotFormatError(`it holds ${bytes.length} bytes where ${entry.bytes} were written`);
      const postings = await TermPostings.decode(bytes, pause);
      return { postings, file: entry.file, generation: entry.generation, horizon: entry.horizon };
    } catch (error) {
      if (!(error instanceof SnapshotFormatError)) throw error;
      await this.remove(workspaceId);
      return undefined;
    }
  }

  /** Saves the encoded postings (TermPostings.encode) held at `generation` and `horizon`; returns the file's name. */
  async write(workspaceId: string, parts: readonly Uint8Array[], held: { generation: string; horizon: string }): Promise<string> {
    await mkdir(this.directory, { recursive: true });
    const previous = await this.#entry(workspaceId);
    const file = `${workspaceId}.${process.pid}-${Date.now().toString(36)}.postings`;
    const written = path.join(this.directory, `${file}.partial`);
    const bytes = parts.reduce((sum, part) => sum + part.byteLength, 0);
    try {
      const handle = await open(written, 'w');
      try {
        await writeFile(handle, parts);
        // On disk before its entry names it: after a power cut the entry names a whole file or none.
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(written, path.join(this.directory, file));
    } catch (error) {
      // A full disk: what was written of the file goes, not to fill the disk again at each try.
      await rm(written, { force: true });
      throw error;
    }
    await this.#writeEntry(workspaceId, { format: 1, file, bytes, generation: held.generation, horizon: held.horizon });
    // A reader that opened the file it replaces reads on; one about to open it loads from the store.
    if (previous && previous.file !== file) await rm(path.join(this.directory, previous.file), { force: true });
    await this.#removeUnnamed(workspaceId, file);
    return file;
  }

  /**
   * Moves the horizon of the postings saved in `file` forward, the postings held having stayed
   * the same since: a catch-up from an old horizon would find it behind the change log's cleanup.
   * Nothing is done when another save has replaced `file` meanwhile.
   */
  async advance(workspaceId: string, file: string, horizon: string) {
    const entry = await this.#entry(workspaceId);
    if (entry?.file !== file) return;
    await this.#writeEntry(workspaceId, { ...entry, horizon });
  }

  async #writeEntry(workspaceId: string, entry: SavedEntry) {
    const written = `${this.#entryPath(workspaceId)}.${process.pid}.partial`;
    await writeFile(written, JSON.stringify(entry));
    await rename(written, this.#entryPath(workspaceId));
  }

  /** Removes the workspace's saved postings. */
  async remove(workspaceId: string) {
    await rm(this.#entryPath(workspaceId), { force: true });
    await this.#removeUnnamed(workspaceId, undefined, 0);
  }

  /** Removes what is saved of workspaces not in `kept`: deleted ones, or all after the index was emptied. */
  async keepOnly(kept: ReadonlySet<string>) {
    for (const name of await this.#names()) {
      const workspaceId = name.slice(0, 36);
      if (uuidPattern.test(workspaceId) && !kept.has(workspaceId)) await rm(path.join(this.directory, name), { force: true });
    }
  }

  async #names(): Promise<string[]> {
    try {
      return await readdir(this.directory);
    } catch (error) {
      if (missing(error)) return [];
      throw error;
    }
  }

  /** Removes the workspace's postings files other than `named`, once older than `olderThanMs`. */
  async #removeUnnamed(workspaceId: string, named: string | undefined, olderThanMs = orphanAfterMs) {
    for (const name of await this.#names()) {
      if (name === named || !name.startsWith(`${workspaceId}.`) || !(name.endsWith('.postings') || name.endsWith('.partial'))) continue;
      const file = path.join(this.directory, name);
      const modified = await stat(file).then((stats) => stats.mtimeMs, () => undefined);
      if (modified !== undefined && Date.now() - modified >= olderThanMs) await rm(file, { force: true });
    }
  }
}
