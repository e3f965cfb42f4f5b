import { readFile } from 'node:fs/promises';
import { finished, type Readable } from 'node:stream';
import busboy from 'busboy';
import { AppError, badRequest, fileTooLarge } from '../errors.js';
import { mediaTypeOf, parseJsonBody, spoolBody } from '../http/body.js';
import { checkFilename, checkMetadata, maxMetadataBytes } from '../input-limits.js';
import { bodyInput } from './request-input.js';

export type UploadBody = { files: File[]; metadata: unknown };

type Limits = { maxFileBytes: number; maxFiles: number };

// The metadata part as sent, with room for indentation; its compact JSON is then held to
// maxMetadataBytes by checkMetadata, in the same words as over JSON and GraphQL.
const maxMetadataPartBytes = 4 * maxMetadataBytes;

/**
 * An upload is `multipart/form-data` with one or more `file` parts and an optional `metadata`
 * part holding a JSON object, or JSON `{filename, content, metadata?}` for text. The body is
 * written to a file under `spoolDirectory` as it arrives (an unfinished upload holds no memory)
 * and read from there once complete; the file is removed before this returns.
 */
export async function readUploadBody(request: Request, limits: Limits, spoolDirectory: string): Promise<UploadBody> {
  const type = request.headers.get('content-type') ?? '';
  const mediaType = mediaTypeOf(request);
  if (mediaType !== 'multipart/form-data' && mediaType !== 'application/json') {
    throw new AppError('unsupported_media_type', `Content-Type must be multipart/form-data or application/json (got ${type || 'none'})`);
  }
  const maxBytes = mediaType === 'multipart/form-data' ? limits.maxFiles * limits.maxFileBytes + maxMetadataPartBytes : limits.maxFileBytes + maxMetadataPartBytes;
  const spooled = await spoolBody(request, maxBytes, spoolDirectory);
  try {
    if (mediaType === 'multipart/form-data') {
      if (!spooled) throw badRequest('file', 'at least one file part is required');
      return await readMultipart(spooled.open(), type, limits);
    }
    const body = parseJsonBody(request, spooled ? await readFile(spooled.path) : undefined);
    const input = bodyInput<{ filename?: unknown; content?: unknown; metadata?: unknown }>(body, {
      filename: 'filename',
      content: 'content',
      metadata: 'metadata',
    });
    if (typeof input.filename !== 'string') throw badRequest('filename', 'is required and must be a string');
    if (typeof input.content !== 'string') throw badRequest('content', 'is required and must be a string');
    const filename = checkFilename(input.filename);
    return { files: [new File([input.content], filename, { type: 'text/plain' })], metadata: checkMetadata(input.metadata) };
  } finally {
    await spooled?.remove();
  }
}

/** The multipart body, read from its spool file (complete: its size was checked as it arrived). */
function readMultipart(source: Readable, type: string, limits: Limits): Promise<UploadBody> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: { 'content-type': type },
        // Keep the client's file names whole: a name with a path in it is refused, not trimmed.
        preservePath: true,
        // Browsers and curl send the file name's UTF-8 bytes as they are inside filename="...";
        // busboy would read them as Latin-1 (résumé.txt as rÃ©sumÃ©.txt). `filename*=UTF-8''...`
        // (RFC 5987) names its charset and is preferred when both are sent.
        defParamCharset: 'utf8',
        // busboy reports `partsLimit` when the count of parts reaches the limit, not when a part
        // goes past it: with maxFiles + 1, a full upload (every file and the metadata part) was
        // refused. One more is never reached by a valid upload, and a part beyond it is a file
        // or a field too many, which `filesLimit` and `fieldsLimit` name first.
        limits: { fileSize: limits.maxFileBytes, files: limits.maxFiles, fields: 1, fieldSize: maxMetadataPartBytes, parts: limits.maxFiles + 2 },
      });
    } catch (error) {
      reject(badRequest('body', `not a multipart body: ${(error as Error).message}`));
      return;
    }
    const files: File[] = [];
    let metadata: unknown;
    let settled = false;
    const finish = (error?: AppError) => {
      if (settled) return;
      settled = true;
      if (error) {
        // busboy reports limits from inside its own write; tear it down once that write has
        // returned, or the half-parsed chunk throws into the source.
        setImmediate(() => {
          source.unpipe(parser);
          parser.destroy();
          source.destroy();
          finished(source, () => reject(error));
        });
      } else {
        // No metadata part is `{}`, as a JSON upload without `metadata`: the same upload either way.
        resolve({ files, metadata: metadata ?? {} });
      }
    };
    parser.on('file', (name, stream, info) => {
      // Once the upload is refused the parser is destroyed and an unfinished part errors.
      stream.on('error', () => {});
      if (name !== 'file') {
        stream.resume();
        finish(badRequest(name, 'is not a known part (send files as "file" and options as "metadata")'));
        return;
      }
      let filename: string;
      try {
        filename = checkFilename(info.filename ?? '');
      } catch (error) {
        stream.resume();
        finish(error as AppError);
        return;
      }
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('limit', () => finish(fileTooLarge(filename, limits.maxFileBytes)));
      stream.on('close', () => {
        if (!settled) files.push(new File(chunks as unknown as BlobPart[], filename, { type: info.mimeType }));
      });
    });
    parser.on('field', (name, value, info) => {
      if (name !== 'metadata') return finish(badRequest(name, 'is not a known part (send files as "file" and options as "metadata")'));
      if (info.valueTruncated) return finish(badRequest('metadata', `must be at most ${maxMetadataBytes} bytes as JSON`));
      let parsed: unknown;
      try {
        parsed = JSON.parse(value);
      } catch {
        return finish(badRequest('metadata', 'must be a JSON object'));
      }
      try {
        metadata = checkMetadata(parsed);
      } catch (error) {
        finish(error as AppError);
      }
    });
    parser.on('filesLimit', () => finish(badRequest('file', `at most ${limits.maxFiles} files per upload`)));
    parser.on('partsLimit', () => finish(badRequest('body', 'too many parts')));
    parser.on('fieldsLimit', () => finish(badRequest('body', 'only one metadata part is accepted')));
    parser.on('error', (error: Error) => finish(badRequest('body', `malformed multipart body: ${error.message}`)));
    parser.on('close', () => finish());
    source.on('error', (error) => finish(badRequest('body', `the upload was interrupted: ${error.message}`)));
    source.pipe(parser);
  });
}
