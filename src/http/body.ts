import contentType from 'content-type';
import { AppError, payloadTooLarge } from '../errors.js';

/**
 * Reads a JSON request body, stopping as soon as it passes `maxBytes` so an oversized upload
 * is never held in memory. `undefined` when the request has no body at all.
 */
export async function readJsonBody(request: Request, maxBytes: number): Promise<unknown> {
  const text = await readTextBody(request, maxBytes);
  if (text === undefined) return undefined;
  if (mediaTypeOf(request) !== 'application/json') {
    throw new AppError('unsupported_media_type', `Content-Type must be application/json (got ${request.headers.get('content-type') ?? 'none'})`);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new AppError('bad_request', `body: invalid JSON (${(error as Error).message})`, { field: 'body' });
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

async function readTextBody(request: Request, maxBytes: number): Promise<string | undefined> {
  const declared = request.headers.get('content-length');
  if (declared !== null && Number(declared) > maxBytes) throw payloadTooLarge(maxBytes);
  if (!request.body) return undefined;
  const reader = request.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel();
      throw payloadTooLarge(maxBytes);
    }
    parts.push(value);
  }
  if (size === 0) return undefined;
  return new TextDecoder('utf-8', { fatal: false }).decode(Buffer.concat(parts));
}
