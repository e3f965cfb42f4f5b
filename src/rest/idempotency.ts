import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import type { Viewer } from '../auth/authenticate.js';
import { AppError, badRequest } from '../errors.js';
import type { IdempotencyStore, StoredResponse } from '../modules/idempotency/store.js';

/** The request header, as Stripe names it. */
export const idempotencyKeyHeader = 'Idempotency-Key';
/** On a replayed response, as Stripe names it. */
export const replayedHeader = 'Idempotent-Replayed';
export const maxIdempotencyKeyLength = 255;

/**
 * The key a request carries: undefined without the header, a 400 naming the header when its
 * value is not 1 to 255 printable ASCII characters. (The HTTP parser has already taken off
 * white space around the value and refused most control characters.)
 */
export function idempotencyKeyOf(request: Request): string | AppError | undefined {
  const value = request.headers.get(idempotencyKeyHeader);
  if (value === null) return undefined;
  const problem = (detail: string) =>
    badRequest(idempotencyKeyHeader, `must be 1 to ${maxIdempotencyKeyLength} printable ASCII characters (${detail})`);
  if (value.length === 0) return problem('it is empty');
  if (value.length > maxIdempotencyKeyLength) return problem(`it has ${value.length}`);
  const wrong = /[^\x20-\x7e]/.exec(value);
  if (wrong) {
    // Header values arrive as bytes, one character each (`é` in UTF-8 is the bytes 0xC3 0xA9).
    const code = wrong[0].charCodeAt(0);
    const hex = code.toString(16).toUpperCase().padStart(2, '0');
    return problem(code < 0x80 ? `found the control character U+00${hex} at position ${wrong.index + 1}` : `found the byte 0x${hex}, which is not ASCII, at position ${wrong.index + 1}`);
  }
  return value;
}

/**
 * Statuses whose answer is kept and replayed: what the operation decided once it ran (success, a
 * 404, a 409 conflict, a 402). Every other status, refusals made before anything ran (400, 401,
 * 403, 413, 415, 429) and failures of the server (5xx), forgets the key: the client may fix the
 * request, or wait, and send it again with the same key.
 */
export const isKeptStatus = (status: number) => (status >= 200 && status < 300) || status === 402 || status === 404 || status === 409;

/** Headers of an answer that are about the connection or this one sending of it, never replayed. */
const unreplayedHeaders = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'date', 'x-request-id', 'retry-after']);

type IdempotentRequest = {
  request: Request;
  viewer: Viewer;
  key: string;
  /** The operation's variables: the path's ids and the body, files included. */
  variables: unknown;
  /** KB_JWT_SECRET: what stored answers of requests made with a JWT are sealed with. */
  jwtSecret: string | undefined;
};

/**
 * Answers a request that carries an Idempotency-Key (a refusal comes back as an AppError): the first time by `execute`, keeping the
 * answer when its status is kept (isKeptStatus); afterwards, for the same request, by that
 * answer. The same key with another request is 422 `idempotency_key_reused`; while the first
 * request is being answered, 409 `idempotency_key_in_use`.
 *
 * `execute` gets a signal that never aborts: once started, the request is carried to its end
 * even if the client goes away, so that its retry finds the answer rather than half a request.
 */
/**
 * What, beside the body, makes a request the same one: its path as the route reads it (ids in any
 * case, a trailing slash or not) and the credential: the same API key, or a JWT of the user with
 * the same scopes (a replay must not hand a less trusted token what a more trusted one created,
 * such as a new key's raw value).
 */
export function requestIdentity(request: Request, viewer: Viewer): { path: string; credential: string } {
  const path = new URL(request.url).pathname.replace(/\/+$/, '').toLowerCase();
  const credential = viewer.credential.kind === 'api_key' ? `api_key:${viewer.credential.apiKeyId}` : `jwt:${[...viewer.scopes].sort().join(' ')}`;
  return { path, credential };
}

export async function answerIdempotently(
  store: IdempotencyStore,
  { request, viewer, key, variables, jwtSecret }: IdempotentRequest,
  execute: (signal: AbortSignal) => Promise<Response>,
): Promise<Response | AppError> {
  const { path, credential } = requestIdentity(request, viewer);
  const requestHash = await hashRequest([request.method, path, credential], variables);
  const begun = await store.begin({ userId: viewer.userId, key, method: request.method, path, requestHash });
  const seal = sealer(viewer.credential.kind === 'api_key' ? bearerToken(request) : jwtSecret, viewer.userId, key);
  if (begun.kind === 'mismatch') return keyReused(key);
  if (begun.kind === 'in_progress') {
    return new AppError('idempotency_key_in_use', `a request with ${idempotencyKeyHeader} ${JSON.stringify(key)} is still being answered; retry it shortly`, {
      retryAfterSeconds: 1,
    });
  }
  if (begun.kind === 'replay') {
    const body = seal.open(begun.response.body);
    // Sealed with a JWT secret that has since changed: the answer cannot be given again.
    if (!body) return keyReused(key);
    const headers = new Headers(begun.response.headers);
    headers.set(replayedHeader, 'true');
    return new Response(begun.response.status === 204 ? null : body, { status: begun.response.status, headers });
  }
  const { claim } = begun;
  let response: Response;
  try {
    response = await execute(new AbortController().signal);
  } catch (error) {
    await claim.release().catch((releaseError: unknown) => store.logger.error('idempotency: releasing a key failed', releaseError));
    throw error;
  }
  if (!isKeptStatus(response.status)) {
    await claim.release().catch((error: unknown) => store.logger.error('idempotency: releasing a key failed', error));
    return response;
  }
  const body = new Uint8Array(await response.arrayBuffer());
  const headers: StoredResponse['headers'] = {};
  response.headers.forEach((value, name) => {
    if (!unreplayedHeaders.has(name)) headers[name] = value;
  });
  await claim
    .complete({ status: response.status, headers, body: seal.close(body) })
    .catch((error: unknown) => store.logger.error('idempotency: storing a response failed; a retry will run the request again', error));
  return new Response(response.status === 204 ? null : body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

const keyReused = (key: string) =>
  new AppError(
    'idempotency_key_reused',
    `${idempotencyKeyHeader} ${JSON.stringify(key)} was already used for another request (another method, path, body or credential); use a new key for a new request`,
  );

/**
 * SHA-256 over what identifies the request: the method, the path, the credential and the
 * operation's variables as canonical JSON (object keys sorted). A file counts by its name, size
 * and SHA-256, computed from its stream, so an upload is not copied to be hashed.
 */
export async function hashRequest(parts: string[], variables: unknown): Promise<string> {
  const files = new Map<File, string>();
  for (const file of filesOf(variables)) {
    const digest = createHash('sha256');
    for await (const chunk of file.stream() as unknown as AsyncIterable<Uint8Array>) digest.update(chunk);
    files.set(file, digest.digest('hex'));
  }
  const canonical = JSON.stringify(variables ?? null, (_name, value: unknown) => {
    // A key with NUL cannot come from a caller (input limits refuse it), so no body can pass for a file.
    if (value instanceof File) return { '\u0000file': [value.name, value.size, files.get(value)] };
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      return Object.fromEntries(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    }
    return value;
  });
  return createHash('sha256').update(JSON.stringify(['kb idempotency 1', ...parts])).update('\n').update(canonical).digest('hex');
}

/** The files among the variables, found without recursion. */
function filesOf(variables: unknown): File[] {
  const files: File[] = [];
  const stack = [variables];
  while (stack.length > 0) {
    const value = stack.pop();
    if (value instanceof File) files.push(value);
    else if (value && typeof value === 'object') stack.push(...Object.values(value));
  }
  return files;
}

const bearerToken = (request: Request) => /^Bearer[ \t]+(\S+)/i.exec(request.headers.get('authorization') ?? '')?.[1];

/**
 * Stored answers are sealed (AES-256-GCM) with a key derived from a secret the store does not
 * hold: the caller's API key (the store has only its SHA-256) or the JWT secret. A created API
 * key's answer holds the raw key, which must not lie readable in the store for 24 hours.
 */
function sealer(secret: string | undefined, userId: string, key: string) {
  const sealingKey = secret ? Buffer.from(hkdfSync('sha256', secret, userId, `kb idempotency ${key}`, 32)) : undefined;
  return {
    close(body: Uint8Array): Uint8Array {
      if (!sealingKey) return body;
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', sealingKey, iv);
      const sealed = Buffer.concat([cipher.update(body), cipher.final()]);
      return Buffer.concat([iv, cipher.getAuthTag(), sealed]);
    },
    open(stored: Uint8Array): Buffer<ArrayBuffer> | undefined {
      if (!sealingKey) return Buffer.from(stored);
      try {
        const bytes = Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength);
        const decipher = createDecipheriv('aes-256-gcm', sealingKey, bytes.subarray(0, 12));
        decipher.setAuthTag(bytes.subarray(12, 28));
        return Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]);
      } catch {
        return undefined;
      }
    },
  };
}
