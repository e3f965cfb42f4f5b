import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';

export type MultipartPart = { name: string; value: string } | { name: string; file: File };

/**
 * A multipart/form-data body, streamed, with its length. Written here rather than by FormData,
 * whose encoder puts a file name between quotes as it is: a name holding `"` (`a".txt`) came out
 * at the other end cut short or escaped. RFC 5987's `filename*` carries any name unchanged, and
 * the upload reader takes it (rest/upload-body.ts).
 */
export function multipartBody(parts: readonly MultipartPart[]): { body: Readable; contentType: string; contentLength: number } {
  const { chunks, contentType, contentLength } = multipartChunks(parts);
  // A Node stream: Yoga's fetch implementation takes one as a body (not a Blob's web stream).
  const body = Readable.from(
    (async function* () {
      for (const item of chunks) {
        if (item instanceof File) yield* item.stream() as unknown as AsyncIterable<Uint8Array>;
        else yield item;
      }
    })(),
  );
  return { body, contentType, contentLength };
}

/** The same body as a Blob, for a fetch Request. */
export function multipartBlob(parts: readonly MultipartPart[]): { body: Blob; contentType: string } {
  const { chunks, contentType } = multipartChunks(parts);
  return { body: new Blob(chunks as BlobPart[]), contentType };
}

function multipartChunks(parts: readonly MultipartPart[]) {
  const boundary = `kb-${randomUUID()}`;
  const header = (disposition: string, type: string) =>
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; ${disposition}\r\nContent-Type: ${type}\r\n\r\n`);
  const chunks: (Buffer | File)[] = [];
  for (const part of parts) {
    if ('file' in part) {
      chunks.push(header(`name="${part.name}"; filename*=UTF-8''${encodeRfc5987(part.file.name)}`, 'application/octet-stream'), part.file);
    } else {
      chunks.push(header(`name="${part.name}"`, 'application/json'), Buffer.from(part.value));
    }
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  const contentLength = chunks.reduce((sum, item) => sum + (item instanceof File ? item.size : item.byteLength), 0);
  return { chunks, contentType: `multipart/form-data; boundary=${boundary}`, contentLength };
}

/** RFC 5987 `value-chars`: UTF-8, percent-encoded except for attr-chars. */
export const encodeRfc5987 = (text: string) =>
  encodeURIComponent(text).replace(/['()*]/g, (character) => `%${character.charCodeAt(0).toString(16).toUpperCase()}`);
