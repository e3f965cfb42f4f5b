import contentType from 'content-type';
import { randomUUID } from 'node:crypto';
import { createReadStream, type ReadStream } from 'node:fs';
import { mkdir, open, readdir, rm, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { AppError, payloadTooLarge } from '../errors.js';

/**
 * Reads a JSON request body, stopping as soon as it passes `maxBytes` so an oversized upload
 * is never held in memory. `undefined` when the request has no body at all.
 */
export async function readJsonBody(request: Request, maxBytes: number): Promise<unknown> {
  return parseJsonBody(request, await readBodyBytes(request, maxBytes));
}

/** A JSON request body read already (`undefined`: none), checked and parsed as readJsonBody does. */
export function parseJsonBody(request: Request, bytes: Uint8Array | undefined): unknown {
  if (bytes === undefined) return undefined;
  if (mediaTypeOf(request) !== 'application/json') {
    throw new AppError('unsupported_media_type', `Content-Type must be application/json (got ${request.headers.get('content-type') ?? 'none'})`);
  }
  checkJsonCharset(request);
  // JSON text is UTF-8 (RFC 8259). Bytes that are not (an overlong "\xc0\xae", a stray
  // "\xff") are refused rather than stored as U+FFFD.
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new AppError('bad_request', 'body: is not valid UTF-8', { field: 'body' });
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new AppError('bad_request', `body: invalid JSON (${(error as Error).message})`, { field: 'body' });
  }
}

/**
 * Refuses (415) a JSON body declared in a charset other than UTF-8: JSON text is UTF-8 (RFC
 * 8259), and such a body would otherwise be read as UTF-8 regardless. For a request whose media
 * type was found to be application/json.
 */
export function checkJsonCharset(request: Request) {
  const charset = contentType.parse(request.headers.get('content-type')!).parameters.charset;
  if (charset !== undefined && charset.toLowerCase() !== 'utf-8' && charset.toLowerCase() !== 'utf8') {
    throw new AppError('unsupported_media_type', `Content-Type's charset must be utf-8, as JSON is (got ${JSON.stringify(charset)})`);
  }
}

/** The media type of the request's Content-Type (`application/json`), without parameters; undefined when missing or malformed. */
export function mediaTypeOf(request: Request): string | undefined {
  const header = request.headers.get('content-type');
  if (!header) return undefined;
  try {
    return contentType.parse(header).type;
  } catch {
    return undefined;
  }
}

/**
 * After an upload is refused, the rest of its body is read and dropped up to this much before
 * the answer goes out. A server that answers and closes while the client is still sending
 * resets the connection, and the client then loses the answer; past this much it is dropped.
 */
export const maxDrainBytes = 256 * 1024 * 1024;

/** Reads and drops what is left of a refused body (see maxDrainBytes), then throws `error`. */
export async function refuseAfterDraining(
  error: AppError,
  reader: ReadableStreamDefaultReader<Uint8Array> | undefined,
  alreadyRead = 0,
): Promise<never> {
  if (reader) {
    let drained = alreadyRead;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        drained += value.byteLength;
        if (drained > maxDrainBytes) {
          await reader.cancel();
          break;
        }
      }
    } catch {
      // The client went away; there is nobody left to answer.
    }
  }
  throw error;
}

/**
 * Refuses a body for its declared size: drained first when the declared size is within what
 * is worth reading, refused at once when it is past it.
 */
export function refuseDeclaredSize(request: Request, maxBytes: number): Promise<never> {
  const declared = Number(request.headers.get('content-length') ?? 0);
  return refuseAfterDraining(payloadTooLarge(maxBytes), declared > maxDrainBytes ? undefined : request.body?.getReader());
}

export async function readBodyBytes(request: Request, maxBytes: number): Promise<Buffer | undefined> {
  const declared = request.headers.get('content-length');
  if (declared !== null && Number(declared) > maxBytes) {
    return refuseDeclaredSize(request, maxBytes);
  }
  if (!request.body) return undefined;
  const reader = request.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) return refuseAfterDraining(payloadTooLarge(maxBytes), reader, size);
    parts.push(value);
  }
  if (size === 0) return undefined;
  return Buffer.concat(parts);
}

/**
 * A request body written to a file as it arrived (see spoolBody). `open` reads it as a stream;
 * `remove` closes the streams opened and deletes the file.
 */
export type SpooledBody = { path: string; size: number; open(): ReadStream; remove(): Promise<void> };

/**
 * Writes a request body to a new file under `directory` as it arrives, so that an upload still
 * arriving (or never finished) holds no memory but the stream's buffers. Past `maxBytes` the
 * file is removed and the body refused as readBodyBytes refuses it (413, after draining).
 * `undefined` for a request without a body or with an empty one.
 */
export async function spoolBody(request: Request, maxBytes: number, directory: string): Promise<SpooledBody | undefined> {
  const declared = request.headers.get('content-length');
  if (declared !== null && Number(declared) > maxBytes) return refuseDeclaredSize(request, maxBytes);
  if (!request.body) return undefined;
  await mkdir(directory, { recursive: true });
  const file = path.join(directory, `upload-${randomUUID()}`);
  const remove = () => rm(file, { force: true });
  const reader = request.body.getReader();
  let size = 0;
  let output: FileHandle | undefined;
  try {
    output = await open(file, 'wx', 0o600);
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) {
        await output.close();
        output = undefined;
        await remove();
        return await refuseAfterDraining(payloadTooLarge(maxBytes), reader, size);
      }
      await output.write(value);
    }
    await output.close();
    output = undefined;
  } catch (error) {
    await output?.close().catch(() => undefined);
    await remove();
    throw error;
  }
  if (size === 0) {
    await remove();
    return undefined;
  }
  const opened: ReadStream[] = [];
  return {
    path: file,
    size,
    open() {
      const stream = createReadStream(file);
      opened.push(stream);
      return stream;
    },
    async remove() {
      for (const stream of opened) stream.destroy();
      await remove();
    },
  };
}

/**
 * Removes the spool files under `directory` last written more than `olderThanMs` ago: a process
 * that stopped while receiving them left them there. A body still arriving, in this process or
 * another one sharing the directory, is written to at least once per request timeout. Returns
 * how many were removed.
 */
export async function removeStaleSpoolFiles(directory: string, olderThanMs: number): Promise<number> {
  const names = await readdir(directory).catch(() => [] as string[]);
  let removed = 0;
  for (const name of names.filter((entry) => entry.startsWith('upload-'))) {
    const file = path.join(directory, name);
    const modified = await stat(file).then((info) => info.mtimeMs, () => undefined);
    if (modified === undefined || Date.now() - modified < olderThanMs) continue;
    await rm(file, { force: true });
    removed += 1;
  }
  return removed;
}
