import { errors, type TransportRequestOptions } from '@elastic/elasticsearch';
import { IndexUnavailableError } from './vector-index.js';

/** `work`, or a rejection as soon as `signal` aborts (`work` then settles unobserved). */
function untilAborted<T>(signal: AbortSignal, work: Promise<T>): Promise<T> {
  work.catch(() => {});
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(signal.reason);
    signal.addEventListener('abort', abort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort));
  });
}

/** Whether Elasticsearch answered with one of `statuses`. */
export const answeredWith = (error: unknown, ...statuses: number[]) => error instanceof errors.ResponseError && statuses.includes(error.statusCode ?? 0);

/** Whether a create was refused because the index is there already (another process made it). */
export const indexExisted = (error: unknown) => error instanceof errors.ResponseError && error.body?.error?.type === 'resource_already_exists_exception';

export function unavailable(url: string, error: unknown): IndexUnavailableError {
  const reason = error instanceof errors.ResponseError ? `${error.statusCode} ${JSON.stringify(error.body)}` : (error as Error).message;
  return new IndexUnavailableError(`Elasticsearch at ${url} did not answer: ${reason}`, { cause: error });
}

/**
 * A read that ends within the timeout whatever the caller passes, with its failures (a
 * timeout or an abort included: the signal the service passes carries its deadline) as
 * IndexUnavailableError. One retry for a dropped keep-alive connection, but the client sleeps
 * 1-2 s before it without heeding the signal: hence the race as well.
 */
export async function readWithin<T>(
  url: string,
  timeoutMs: number,
  what: string,
  signal: AbortSignal | undefined,
  work: (options: TransportRequestOptions) => Promise<T>,
): Promise<T> {
  const deadline = AbortSignal.timeout(timeoutMs);
  const aborted = signal ? AbortSignal.any([signal, deadline]) : deadline;
  try {
    return await untilAborted(aborted, work({ signal: aborted, maxRetries: 1 }));
  } catch (error) {
    if (deadline.aborted) {
      throw new IndexUnavailableError(`Elasticsearch at ${url} did not answer within ${timeoutMs / 1000} s`, { cause: error });
    }
    if (signal?.aborted) throw new IndexUnavailableError(`the ${what} was cancelled: ${String(signal.reason)}`, { cause: error });
    throw unavailable(url, error);
  }
}
