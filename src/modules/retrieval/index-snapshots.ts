import { createReadStream } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { isStoredUuid } from '../../ids.js';
import { SnapshotFormatError, TermPostings } from './term-postings.js';

/** A graph saved beside the postings (VectorGraph.save): USearch's file and the ids that go with it. */
type SavedGraphEntry = {
  file: string;
  bytes: number;
  /** CRC-32 of `file`: checked before native code reads it. */
  crc32: number;
  ids: string;
  idsBytes: number;
  idsCrc32: number;
};

/** What a workspace's `<id>.json` says of its saved postings, and of its graph when one was saved with them. */
type SavedEntry = {
  format: 1;
  /** The file holding the postings (TermPostings.encode), beside this entry. */
  file: string;
  bytes: number;
  /** The index's creation stamp and the sync horizon the postings (and graph) were held at (HeldWorkspace). */
  generation: string;
  horizon: string;
  graph?: SavedGraphEntry;
};

/** A workspace's index as saved, with what a catch-up from the store needs to bring it up to date. */
export type SavedWorkspace = {
  postings: TermPostings;
  file: string;
  generation: string;
  horizon: string;
  /** The graph saved with the postings, not read yet (`readGraph`). */
  graph?: SavedGraph | undefined;
};

/** A graph saved with a workspace's postings, as its entry names it. */
export type SavedGraph = SavedGraphEntry & { workspaceId: string; postingsFile: string };

/** Writes a graph to the file named, returning its ids (VectorGraph.save); undefined when it writes none after all. */
export type GraphWriter = (file: string) => Uint8Array | undefined;

const savedFilePattern = (suffix: string) => new RegExp(`^([0-9a-f-]{36})\\.[0-9a-z-]+\\.${suffix}$`);
const postingsFilePattern = savedFilePattern('postings');
const graphFilePattern = savedFilePattern('graph');
const graphIdsFilePattern = savedFilePattern('graph-ids');
/** The files of a save, beside its entry. */
const savedFileSuffixes = ['.postings', '.graph', '.graph-ids', '.partial'];
/** Bytes of a graph's file read between two pauses while its CRC is computed. */
const crcSliceBytes = 8 * 1024 * 1024;
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
  // A graph entry that is not whole leaves the postings usable: the graph is built from the store.
  if (entry.graph !== undefined && !savedGraphEntry(entry.graph, workspaceId)) delete entry.graph;
  return entry as SavedEntry;
}

function savedGraphEntry(graph: Partial<SavedGraphEntry>, workspaceId: string): boolean {
  return (
    typeof graph.file === 'string' &&
    graphFilePattern.exec(graph.file)?.[1] === workspaceId &&
    typeof graph.ids === 'string' &&
    graphIdsFilePattern.exec(graph.ids)?.[1] === workspaceId &&
    Number.isSafeInteger(graph.bytes) &&
    Number.isSafeInteger(graph.idsBytes) &&
    Number.isInteger(graph.crc32) &&
    Number.isInteger(graph.idsCrc32)
  );
}

/** CRC-32 of a file, read a slice at a time with `pause` between slices. */
async function fileCrc32(file: string, pause?: () => Promise<void>): Promise<{ crc: number; bytes: number }> {
  let crc = 0;
  let bytes = 0;
  for await (const slice of createReadStream(file, { highWaterMark: crcSliceBytes }) as AsyncIterable<Buffer>) {
    crc = crc32(slice, crc);
    bytes += slice.length;
    await pause?.();
  }
  return { crc, bytes };
}

/**
 * Workspaces' keyword postings, and their graphs in memory, kept on disk, so that a process which
 * starts, or loads a workspace again after dropping it from memory, reads a few files and catches
 * up with the store's change log instead of reading every chunk's terms from the store (4-6 s at
 * 100,000 chunks, against about 0.2 s) and building its graph again (43-46 s in slices, against
 * about 0.25 s). A cache: anything missing, unreadable, of another index or too old for the log
 * is ignored and the workspace loaded from the store as before.
 *
 * Per workspace, `<id>.<writer>.postings` holds the postings, `<id>.<writer>.graph` and
 * `.graph-ids` the graph (USearch's file, and the chunk and document of each of its keys), and
 * `<id>.json` names those files with the index generation and horizon they were held at. Each is
 * written whole under a new name and renamed, so a reader never meets half a file, and several
 * processes sharing the directory (PostgreSQL with one data directory) replace each other's saves
 * without harm. The graph's file is checked against its CRC before native code reads it.
 */
export class IndexSnapshots {
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
   * The workspace's saved postings, with the graph saved beside them named (read by `readGraph`),
   * or undefined when no postings are saved or they cannot be read whole (then removed). `pause`
   * runs between slices of the decoding.
   */
  async read(workspaceId: string, pause?: () => Promise<void>): Promise<SavedWorkspace | undefined> {
    if (!isStoredUuid(workspaceId)) return undefined;
    const entry = await this.#entry(workspaceId);
    if (!entry) return undefined;
    let bytes: Buffer;
    try {
      bytes = await readFile(path.join(this.directory, entry.file));
    } catch (error) {
      if (missing(error)) return undefined;
      throw error;
    }
    let postings: TermPostings;
    try {
      if (bytes.length !== entry.bytes) throw new SnapshotFormatError(`it holds ${bytes.length} bytes where ${entry.bytes} were written`);
      postings = await TermPostings.decode(bytes, pause);
    } catch (error) {
      if (!(error instanceof SnapshotFormatError)) throw error;
      await this.remove(workspaceId);
      return undefined;
    }
    const graph = entry.graph && { ...entry.graph, workspaceId, postingsFile: entry.file };
    return { postings, file: entry.file, generation: entry.generation, horizon: entry.horizon, graph };
  }

  /**
   * The saved graph's file, checked against its size and CRC, and its ids, checked the same way
   * (VectorGraph.restore takes both). Throws SnapshotFormatError when they are not the files
   * written (`dropGraph` then), and undefined when they are gone (another save replaced them).
   */
  async readGraph(graph: SavedGraph, pause?: () => Promise<void>): Promise<{ path: string; ids: Uint8Array } | undefined> {
    const graphPath = path.join(this.directory, graph.file);
    try {
      const ids = await readFile(path.join(this.directory, graph.ids));
      if (ids.length !== graph.idsBytes || crc32(ids) !== graph.idsCrc32) throw new SnapshotFormatError(`the graph's ids are not those written (${ids.length} bytes where ${graph.idsBytes} were written, or another CRC)`);
      const read = await fileCrc32(graphPath, pause);
      if (read.bytes !== graph.bytes || read.crc !== graph.crc32) throw new SnapshotFormatError(`the graph's file is not the one written (${read.bytes} bytes, CRC ${read.crc}; written ${graph.bytes}, ${graph.crc32})`);
      return { path: graphPath, ids: new Uint8Array(ids.buffer, ids.byteOffset, ids.byteLength) };
    } catch (error) {
      if (missing(error)) return undefined;
      throw error;
    }
  }

  /**
   * Saves the encoded postings (TermPostings.encode) held at `generation` and `horizon`, and the
   * graph that `graph` writes where given (held at the same horizon); returns the postings file's name.
   */
  async write(
    workspaceId: string,
    parts: readonly Uint8Array[],
    held: { generation: string; horizon: string },
    graph?: { write: GraphWriter; pause?: () => Promise<void> },
  ): Promise<string> {
    await mkdir(this.directory, { recursive: true });
    const previous = await this.#entry(workspaceId);
    // Unique across processes sharing the directory, also where each runs as pid 1 (containers).
    const writer = `${Date.now().toString(36)}-${randomUUID().slice(0, 8)}`;
    const file = `${workspaceId}.${writer}.postings`;
    const written: string[] = [];
    let savedGraph: SavedGraphEntry | undefined;
    try {
      const bytes = await this.#writeWhole(file, parts, written);
      if (graph) savedGraph = await this.#writeGraph(`${workspaceId}.${writer}`, graph, written);
      await this.#writeEntry(workspaceId, { format: 1, file, bytes, generation: held.generation, horizon: held.horizon, ...(savedGraph && { graph: savedGraph }) });
    } catch (error) {
      // A full disk: what was written goes, not to fill the disk again at each try.
      for (const name of written) await rm(name, { force: true });
      throw error;
    }
    // A reader that opened the files replaced reads on; one about to open them loads from the store.
    if (previous) for (const name of filesOf(previous)) if (!filesOf({ file, graph: savedGraph }).includes(name)) await rm(path.join(this.directory, name), { force: true });
    await this.#removeUnnamed(workspaceId, filesOf({ file, graph: savedGraph }));
    return file;
  }

  /** Writes the graph's file and its ids as `<name>.graph` and `<name>.graph-ids`, each whole; undefined when the writer wrote none. */
  async #writeGraph(name: string, graph: { write: GraphWriter; pause?: () => Promise<void> }, written: string[]): Promise<SavedGraphEntry | undefined> {
    const file = `${name}.graph`;
    const partial = path.join(this.directory, `${file}.partial`);
    // Native code writing the whole graph at once: after the searches in progress.
    await graph.pause?.();
    written.push(partial);
    const ids = graph.write(partial);
    if (!ids) return undefined;
    await syncFile(partial);
    const { crc, bytes } = await fileCrc32(partial, graph.pause);
    await rename(partial, path.join(this.directory, file));
    written.push(path.join(this.directory, file));
    const idsFile = `${name}.graph-ids`;
    const idsBytes = await this.#writeWhole(idsFile, [ids], written);
    return { file, bytes, crc32: crc, ids: idsFile, idsBytes, idsCrc32: crc32(ids) };
  }

  /** Writes `parts` to `file` under a partial name, flushed to disk, then renames it; its bytes. */
  async #writeWhole(file: string, parts: readonly Uint8Array[], written: string[]): Promise<number> {
    const partial = path.join(this.directory, `${file}.partial`);
    written.push(partial);
    const handle = await open(partial, 'w');
    try {
      await writeFile(handle, parts);
      // On disk before its entry names it: after a power cut the entry names a whole file or none.
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(partial, path.join(this.directory, file));
    written.push(path.join(this.directory, file));
    return parts.reduce((sum, part) => sum + part.byteLength, 0);
  }

  /** Takes the graph out of its entry (its files are not whole, or not a graph), keeping the postings. */
  async dropGraph(graph: SavedGraph) {
    const entry = await this.#entry(graph.workspaceId);
    if (entry?.file !== graph.postingsFile || entry.graph?.file !== graph.file) return;
    const { graph: dropped, ...withoutGraph } = entry;
    await this.#writeEntry(graph.workspaceId, withoutGraph);
    for (const name of [dropped.file, dropped.ids]) await rm(path.join(this.directory, name), { force: true });
  }

  /**
   * Moves the horizon of the postings saved in `file` forward, the postings held having stayed
   * the same since: a catch-up from an old horizon would find it behind the change log's cleanup.
   * Nothing is done, and false returned, when another save has replaced `file` meanwhile.
   */
  async advance(workspaceId: string, file: string, horizon: string): Promise<boolean> {
    const entry = await this.#entry(workspaceId);
    if (entry?.file !== file) return false;
    await this.#writeEntry(workspaceId, { ...entry, horizon });
    return true;
  }

  async #writeEntry(workspaceId: string, entry: SavedEntry) {
    const written = `${this.#entryPath(workspaceId)}.${randomUUID().slice(0, 8)}.partial`;
    await writeFile(written, JSON.stringify(entry));
    await rename(written, this.#entryPath(workspaceId));
  }

  /** Removes the workspace's saved postings. */
  async remove(workspaceId: string) {
    await rm(this.#entryPath(workspaceId), { force: true });
    await this.#removeUnnamed(workspaceId, [], 0);
  }

  /**
   * Removes what is saved of workspaces not in `kept` (deleted ones, or all after the index was
   * emptied), and files a write left partial (a process killed while writing) once they are old.
   */
  async keepOnly(kept: ReadonlySet<string>) {
    for (const name of await this.#names()) {
      const workspaceId = name.slice(0, 36);
      if (!isStoredUuid(workspaceId)) continue;
      if (!kept.has(workspaceId)) await rm(path.join(this.directory, name), { force: true });
      else if (name.endsWith('.partial')) await this.#removeIfOld(name);
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

  /** Removes the workspace's saved files other than `named`, once older than `olderThanMs`. */
  async #removeUnnamed(workspaceId: string, named: readonly string[], olderThanMs = orphanAfterMs) {
    for (const name of await this.#names()) {
      if (named.includes(name) || !name.startsWith(`${workspaceId}.`) || !savedFileSuffixes.some((suffix) => name.endsWith(suffix))) continue;
      await this.#removeIfOld(name, olderThanMs);
    }
  }

  async #removeIfOld(name: string, olderThanMs = orphanAfterMs) {
    const file = path.join(this.directory, name);
    const modified = await stat(file).then((stats) => stats.mtimeMs, () => undefined);
    if (modified !== undefined && Date.now() - modified >= olderThanMs) await rm(file, { force: true });
  }
}

/** The files an entry names. */
const filesOf = (entry: { file: string; graph?: SavedGraphEntry | undefined }) => [entry.file, ...(entry.graph ? [entry.graph.file, entry.graph.ids] : [])];

async function syncFile(file: string) {
  const handle = await open(file, 'r+');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
