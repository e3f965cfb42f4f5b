import contentType from 'content-type';
import { authenticate } from '../auth/authenticate.js';
import { storeUnavailable } from '../db/store-errors.js';
import { AppError, authenticationRequired, badRequest, unsupportedMediaType } from '../errors.js';
import { checkJsonCharset, mediaTypeOf, readBodyBytes, spoolBody, type SpooledBody } from '../http/body.js';
import type { AppServices } from './context.js';
import { graphqlStreamEndpoint } from './endpoints.js';
import { graphqlUploadLimit, type Yoga } from './yoga.js';

/**
 * `/graphql` and `/graphql/stream` as HTTP: what is wrong with the request itself is answered
 * here, before Yoga reads the document, in the order REST uses: 401 for a missing or invalid
 * credential (introspection and field suggestions included), then 415 and 413. Only CORS
 * preflights need no credential (and the GraphiQL page, which runs nothing: src/http/graphiql.ts
 * serves it before a request gets here).
 */
export async function handleGraphQLHttpRequest(request: Request, app: AppServices, yoga: Yoga): Promise<Response> {
  const { pathname } = new URL(request.url);
  if (request.method === 'OPTIONS') return yoga.fetch(request, {});
  try {
    const viewer = await authenticate(request.headers.get('authorization'), app.auth);
    if (!viewer) throw authenticationRequired();
    const { body, spooled } = await checkedBody(request, app, yoga, pathname === graphqlStreamEndpoint);
    try {
      return await yoga.fetch(body, { viewer });
    } finally {
      // Yoga has read the whole upload by the time it answers (its files are the operation's input),
      // or has refused it, perhaps unread.
      await spooled?.remove();
    }
  } catch (error) {
    const known = error instanceof AppError ? error : storeUnavailable(error);
    if (known) return httpErrorResponse(known);
    throw error;
  }
}

/**
 * A POST body must be JSON (in UTF-8, the only charset it may declare) or, on /graphql, a GraphQL multipart
 * upload; JSON is read here up to KB_MAX_JSON_BYTES, an upload is written to a spool file as it
 * arrives (held to the upload limits) and handed to Yoga from there once complete.
 * Returns the request to hand to Yoga, with the media type written the way Yoga matches it.
 */
async function checkedBody(request: Request, app: AppServices, yoga: Yoga, isStream: boolean): Promise<{ body: Request; spooled?: SpooledBody }> {
  if (request.method !== 'POST') return { body: request };
  // Yoga's own Request parses multipart with busboy, which reads RFC 5987 `filename*`; the
  // global one (undici) refuses such a body as invalid form data.
  const { Request } = yoga.fetchAPI;
  const mediaType = mediaTypeOf(request);
  const headers = new Headers(request.headers);
  if (mediaType === 'application/json') {
    checkJsonCharset(request);
    const text = await readBounded(request, app.config.maxJsonBytes);
    headers.set('content-type', 'application/json');
    headers.delete('content-length');
    return { body: new Request(request.url, { method: 'POST', headers, body: text, signal: request.signal }) };
  }
  if (mediaType === 'multipart/form-data' && !isStream) {
    const limit = graphqlUploadLimit(app.config);
    const spooled = await spoolBody(request, limit, app.config.server.uploadSpoolDir);
    // Yoga matches the media type in lower case.
    headers.set('content-type', contentType.format(contentType.parse(request.headers.get('content-type')!)));
    headers.set('content-length', String(spooled?.size ?? 0));
    // A Node stream: Yoga's fetch implementation takes one as a body.
    const body = spooled ? spooled.open() : '';
    return { body: new Request(request.url, { method: 'POST', headers, body: body as BodyInit, signal: request.signal, duplex: 'half' } as RequestInit), spooled };
  }
  throw unsupportedMediaType(isStream ? 'application/json' : 'application/json or multipart/form-data', request.headers.get('content-type'));
}

async function readBounded(request: Request, maxBytes: number): Promise<string> {
  const bytes = (await readBodyBytes(request, maxBytes)) ?? Buffer.alloc(0);
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw badRequest('body', 'is not valid UTF-8');
  }
}

/**
 * An HTTP-level refusal on /graphql. The body serves REST-style clients (`error`, `message`)
 * and GraphQL clients (`errors[]` with `extensions.code`) alike.
 */
export function httpErrorResponse(error: AppError): Response {
  const headers = new Headers();
  if (error.details.retryAfterSeconds !== undefined) headers.set('retry-after', String(error.details.retryAfterSeconds));
  // The rest of an oversized body was never read, so this connection cannot carry another request.
  if (error.code === 'payload_too_large') headers.set('connection', 'close');
  return Response.json(error.toGraphQLHttpBody(), { status: error.status, headers });
}
