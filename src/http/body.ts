import contentType from 'content-type';
import { AppError, payloadTooLarge } from '../errors.js';

/**
 * Reads a JSON request body, stopping as soon as it passes `maxBytes` so an oversized upload
 * is never held in memory. `undefined` when the request has no body at all.
 */
export async function readJsonBody(request: Request, maxBytes: number): Promise<unknown> {
  const bytes = await readBodyBytes(request, maxBytes);
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
