import { z } from 'zod';
import type { Viewer } from '../auth/authenticate.js';
import type { AppServices } from '../graphql/context.js';
import { encodeRfc5987 } from '../http/multipart-body.js';
import { documentSourceSlice, documentSourceStream } from '../modules/documents/service.js';
import { documentTypes } from '../modules/ingestion/types.js';
import type { FileResult } from './route.js';

/**
 * An uploaded file as it was received, read from the store one slice at a time as the client
 * takes it (HEAD reads none of it: the length is the document's). It is the caller's content,
 * not the service's: sandboxed, so that an HTML file opened from this URL is a page of a unique
 * origin that runs no script and loads nothing (CSP `sandbox`), and never sniffed as another
 * type. Only text and JSON, which the browser shows itself under that policy, are `inline`; any
 * other type is an `attachment`: a browser hands an inline PDF to its PDF viewer, which runs the
 * document's own scripts whatever the policy says.
 */
export async function fileResponse(file: FileResult, app: AppServices, viewer: Viewer, head: boolean): Promise<Response> {
  const store = { prisma: app.db.prisma, fileReads: app.fileReads };
  const contentType = file.content_type.startsWith('text/')
    ? textContentType(file.content_type, await documentSourceSlice(store, file.document_id, 0, 2))
    : file.content_type;
  const disposition = file.content_type.startsWith('text/') || file.content_type === 'application/json' ? 'inline' : 'attachment';
  return new Response(head ? null : documentSourceStream(store, viewer, file.document_id, file.size_bytes), {
    status: 200,
    headers: {
      'content-type': contentType,
      'content-length': String(file.size_bytes),
      'content-disposition': `${disposition}; filename="${asciiFilename(file.filename)}"; filename*=UTF-8''${encodeRfc5987(file.filename)}`,
      'x-content-type-options': 'nosniff',
      'content-security-policy': "sandbox; default-src 'none'",
      // A file cut short (its document deleted while it is sent) must not leave the client
      // waiting for the rest on a connection kept open.
      connection: 'close',
    },
  });
}

/**
 * A text type with the charset its bytes are in (uploads take text as UTF-8, or UTF-16 with a
 * byte-order mark, which `start` holds when there is one), so that a browser does not guess one.
 */
function textContentType(type: string, start: Uint8Array): string {
  if (start[0] === 0xff && start[1] === 0xfe) return `${type}; charset=utf-16le`;
  if (start[0] === 0xfe && start[1] === 0xff) return `${type}; charset=utf-16be`;
  return `${type}; charset=utf-8`;
}

/** The `filename=` fallback of RFC 6266 for clients without `filename*`: printable ASCII, with `_` for anything else and for `"`, `\` and `%`. */
const asciiFilename = (name: string) => name.replace(/[^\x20-\x7e]|["\\%]/gu, '_');

/** The headers of a `file` response, as fileResponse writes them. */
export const fileHeaders = {
  'Content-Length': { description: 'The size of the file in bytes.', required: true, schema: { type: 'integer' as const, minimum: 0 } },
  'Content-Disposition': {
    description:
      "`inline; filename=\"<ASCII fallback>\"; filename*=UTF-8''<the file name, percent-encoded>` (RFC 6266) for text and JSON; `attachment; ...` for PDF and DOCX.",
    required: true,
    schema: { type: 'string' as const },
  },
  'X-Content-Type-Options': { description: 'Never sniffed as another type.', required: true, schema: { type: 'string' as const, enum: ['nosniff'] } },
  'Content-Security-Policy': {
    description: 'Served sandboxed: an HTML file opened from this URL runs no script and loads nothing.',
    required: true,
    schema: { type: 'string' as const, enum: ["sandbox; default-src 'none'"] },
  },
};

/**
 * A file's body under each type a document can have: bytes (text types with a `charset`
 * parameter); a JSON file is any JSON value, as uploaded.
 */
export function fileContent() {
  return Object.fromEntries(
    documentTypes.map((type) => [
      type,
      {
        schema:
          type === 'application/json'
            ? z.unknown().describe('The JSON file as it was uploaded.')
            : z.string().meta({ format: 'binary' }).describe(type.startsWith('text/') ? 'The file as it was uploaded; `charset` names its encoding.' : 'The file as it was uploaded.'),
      },
    ]),
  );
}
