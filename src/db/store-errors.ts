import { AppError } from '../errors.js';

/** How long a client is told to wait before trying again while the store cannot be reached. */
export const storeRetryAfterSeconds = 5;

// Prisma's codes for a store it cannot reach or that stopped answering: cannot reach, timed out
// reaching, operation timed out, connection closed, no free connection in time.
const prismaCodes = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024']);
// The same from `pg` directly: failures to connect, SQLSTATE class 08 (connection exception; not
// 08P01, a protocol violation, which is a fault of the statement) and 57P01-57P03 (the server
// shutting down or not yet accepting connections). A reset or broken socket is left out: a client
// leaving mid-request reports the same codes; pg reports its own as "Connection terminated".
const socketCodes = new Set(['ECONNREFUSED', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);
const sqlStates = /^(08(?!P01)...|57P0[123])$/;
// Raw queries through a driver adapter report the driver's failure in words only (code P2010 or
// none); these are Prisma's and pg's words for the cases above.
const unreachableWords = /Can't reach database server|Connection terminated|terminating connection due to administrator command|the database system is (?:starting up|shutting down)|Timed out fetching a new connection|Server has closed the connection|connect ECONNREFUSED|timeout exceeded when trying to connect/;

/**
 * A 503 with `Retry-After` when `error` says the store (PostgreSQL) cannot be reached or dropped
 * the connection: the service is unavailable for now, not broken, and a retry once the store is
 * back is the right answer.
 * Undefined for every other error, which stays a 500.
 */
export function storeUnavailable(error: unknown): AppError | undefined {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 4; cause = cause.cause, depth++) {
    const code = (cause as { code?: unknown }).code;
    const known =
      (typeof code === 'string' && (prismaCodes.has(code) || socketCodes.has(code) || sqlStates.test(code))) || unreachableWords.test(cause.message);
    if (known) {
      return new AppError('service_unavailable', 'the database cannot be reached; try again shortly', {
        retryAfterSeconds: storeRetryAfterSeconds,
      });
    }
  }
  return undefined;
}

/** DATABASE_URL names a database this process cannot open. */
export class StoreOpenError extends Error {
  override name = 'StoreOpenError';
}

export class StoreLockedError extends Error {
  constructor(readonly directory: string) {
    super(`the embedded store at ${directory} is open in another process`);
  }
}
