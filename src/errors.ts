import { GraphQLError } from 'graphql';

/** Every error the service reports: a stable code and the HTTP status REST answers with. */
export const errorCatalogue = {
  bad_request: 400,
  unauthorized: 401,
  payment_required: 402,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  not_acceptable: 406,
  conflict: 409,
  /** A request whose headers or body did not arrive within the server's time limits (docs/api.md, Server limits). */
  request_timeout: 408,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  /** A request whose header section is over the HTTP server's limit (16 KiB). */
  headers_too_large: 431,
  internal_error: 500,
  service_unavailable: 503,
  /** An Idempotency-Key whose first request is still being answered (docs/api.md, Idempotency). */
  idempotency_key_in_use: 409,
  /** An Idempotency-Key sent again with another request (method, path, body or credential). */
  idempotency_key_reused: 422,
  /** A retry of a document that has not failed (queued, processing or ready): only a failed document is processed again. */
  document_not_failed: 409,
  /** A rename of a document that is queued, processing, or being indexed after a rename: that work has read the old name. */
  document_busy: 409,
} as const;

export type ErrorCode = keyof typeof errorCatalogue;

export class AppError extends Error {
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: { field?: string; retryAfterSeconds?: number } = {},
  ) {
    super(message);
    this.name = 'AppError';
    this.status = errorCatalogue[code];
  }

  /** The GraphQL shape: same message, the code in `extensions.code`. */
  toGraphQLError(): GraphQLError {
    return new GraphQLError(this.message, {
      extensions: {
        code: this.code,
        ...(this.details.field !== undefined && { field: this.details.field }),
        ...(this.details.retryAfterSeconds !== undefined && { retryAfterSeconds: this.details.retryAfterSeconds }),
      },
    });
  }

  /** The REST shape. */
  toBody() {
    return { error: this.code, message: this.message };
  }

  /** A refusal of a GraphQL HTTP request: the REST fields and GraphQL's `errors`, for either kind of client. */
  toGraphQLHttpBody() {
    return { ...this.toBody(), errors: [{ message: this.message, extensions: { code: this.code } }] };
  }
}

export const badRequest = (field: string, problem: string) => new AppError('bad_request', `${field}: ${problem}`, { field });
/** An id this long (a pasted document sent as an id) is cut in messages, not echoed whole. */
const longestIdShown = 120;

/** A caller's text in a message: over 120 characters, its first 100 and its length. */
export const shownText = (text: string) => {
  const characters = [...text];
  return characters.length > longestIdShown ? `${characters.slice(0, 100).join('')}... (${characters.length} characters)` : text;
};

/** A size in a message: `8.00 MiB`. */
export const shownMebibytes = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(2)} MiB`;

/** `workspace <id> not found`; an id over 120 characters shows its first 100 and its length. */
export const notFound = (kind: string, id?: string) =>
  new AppError('not_found', id === undefined ? `${kind} not found` : `${kind} ${shownText(id)} not found`);

/** No endpoint at this path (with the path cut as ids are). */
export const noEndpoint = (method: string, pathname: string) => new AppError('not_found', `no endpoint at ${method} ${shownText(pathname)}`);
export const authenticationRequired = () =>
  new AppError('unauthorized', 'authentication required: send Authorization: Bearer <key>');
export const missingScope = (scope: string) => new AppError('forbidden', `this credential lacks the ${scope} scope`);
export const payloadTooLarge = (maxBytes: number) =>
  new AppError('payload_too_large', `request body exceeds the limit of ${maxBytes} bytes`);
export const unsupportedMediaType = (accepted: string, got: string | null) =>
  new AppError('unsupported_media_type', `Content-Type must be ${accepted} (got ${got ?? 'none'})`);
export const fileTooLarge = (filename: string, maxBytes: number) =>
  new AppError('payload_too_large', `${filename} is larger than the limit of ${maxBytes} bytes`);

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(errorCatalogue, value);
}
