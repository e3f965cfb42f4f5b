import contentType from 'content-type';
import { shouldRenderGraphiQL } from 'graphql-yoga';
import { authenticate } from '../auth/authenticate.js';
import { AppError, authenticationRequired, badRequest, payloadTooLarge, unsupportedMediaType } from '../errors.js';
import { checkJsonCharset, mediaTypeOf, readBodyBytes, refuseDeclaredSize } from '../http/body.js';
import type { AppServices } from './context.js';
import { graphqlEndpoint, graphqlStreamEndpoint } from './endpoints.js';
import { graphqlUploadLimit, type Yoga } from './yoga.js';

/**
 * `/graphql` and `/graphql/stream` as HTTP: what is wrong with the request itself is answered
 * here, before Yoga reads the document, in the order REST uses: 401 for a missing or invalid
 * credential (introspection and field suggestions included), then 415 and 413. Only the
 * GraphiQL page (which runs nothing) and CORS preflights need no credential.
 */
export async function handleGraphQLHttpRequest(request: Request, app: AppServices, yoga: Yoga): Promise<Response> {
  const { pathname } = new URL(request.url);
  if (request.method === 'OPTIONS' || (pathname === graphqlEndpoint && shouldRenderGraphiQL(request))) return yoga.fetch(request, {});
  try {
    const viewer = await authenticate(request.headers.get('authorization'), app.auth);
    if (!viewer) throw authenticationRequired();
    const overflow: { limit?: number } = {};
    const body = await checkedBody(request, app, yoga, pathname === graphqlStreamEndpoint, overflow);
    const response = await yoga.fetch(body, { viewer });
    // Yoga reports an upload cut short by `bounded` as invalid multipart data: it was too large.
    if (overflow.limit !== undefined) throw payloadTooLarge(overflow.limit);
    return response;
  } catch (error) {
    if (error instanceof AppError) return httpErrorResponse(error);
    throw error;
  }
}

/**
 * A POST body must be JSON (in UTF-8, the only charset it may declare) or, on /graphql, a GraphQL multipart
 * upload; JSON is read here up to KB_MAX_JSON_BYTES, an upload is held to the upload limits.
 * Returns the request to hand to Yoga, with the media type written the way Yoga matches it.
 */
async function checkedBody(request: Request, app: AppServices, yoga: Yoga, isStream: boolean, overflow: { limit?: number }): Promise<Request> {
  if (request.method !== 'POST') return request;
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
    return new Request(request.url, { method: 'POST', headers, body: text, signal: request.signal });
  }
  if (mediaType === 'multipart/form-data' && !isStream) {
    const limit = graphqlUploadLimit(app.config);
    if (Number(request.headers.get('content-length') ?? 0) > limit) await refuseDeclaredSize(request, limit);
    // Yoga matches the media type in lower case; the body streams on, counted.
    headers.set('content-type', contentType.format(contentType.parse(request.headers.get('content-type')!)));
    return new Request(request.url, { method: 'POST', headers, body: bounded(request.body, limit, overflow), signal: request.signal, duplex: 'half' } as RequestInit);
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

/** The body, erroring once it passes `limit` bytes; `overflow.limit` is set when it did. */
function bounded(body: ReadableStream<Uint8Array> | null, limit: number, overflow: { limit?: number }): ReadableStream<Uint8Array> | null {
  if (!body) return body;
  let size = 0;
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        size += chunk.byteLength;
        if (size > limit) {
          overflow.limit = limit;
          controller.error(payloadTooLarge(limit));
        } else {
          controller.enqueue(chunk);
        }
      },
    }),
  );
}

/**
 * An HTTP-level refusal on /graphql. The body serves REST-style clients (`error`, `message`)
 * and GraphQL clients (`errors[]` with `extensions.code`) alike.
 */
export function httpErrorResponse(error: AppError): Response {
  const headers = new Headers();
  // The rest of an oversized body was never read, so this connection cannot carry another request.
  if (error.code === 'payload_too_large') headers.set('connection', 'close');
  return Response.json(error.toGraphQLHttpBody(), { status: error.status, headers });
}
