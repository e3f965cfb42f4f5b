import type { Viewer } from '../auth/authenticate.js';
import { AppError } from '../errors.js';
import type { Logger } from '../logger.js';
import { parseEventId } from '../modules/agent/event-log.js';
import type { IdempotencyStore, StoredResponse } from '../modules/idempotency/store.js';
import { hashRequest, idempotencyKeyHeader, isKeptStatus, replayedHeader, requestIdentity } from './idempotency.js';

/** The variables of POST /agent/stream's operation (routes.ts). */
export type StreamVariables = { input: unknown; lastEventId: string | null };

type IdempotentStream = {
  request: Request;
  viewer: Viewer;
  key: string;
  variables: StreamVariables;
  log: Pick<Logger, 'error'>;
};

/**
 * POST /agent/stream with an `Idempotency-Key` (docs/agent.md, "Idempotency-Key"). The key is
 * claimed in the store the other creating POSTs use (src/rest/idempotency.ts), but what it keeps
 * is the run's job id, as soon as the run has begun: a retry with the key starts nothing and is
 * charged nothing; it resumes the first run's stream from its first event (or after the retry's
 * `Last-Event-ID`, when that names the same run), from the run's event log, and follows the run
 * live while it goes on. A refusal before any run (402, 404) is kept and replayed as the other
 * routes keep theirs; other refusals (400, 401, 403, 429, 5xx) forget the key. The same key with
 * another body is 422 `idempotency_key_reused`; a retry while the first request has not begun
 * its run yet (a few milliseconds) is 409 `idempotency_key_in_use`.
 *
 * `execute` runs the route's operation with the given variables and the request's signal: a
 * disconnect does what it does without a key (docs/agent.md), the key only prevents a second run.
 */
export async function answerStreamIdempotently(
  store: IdempotencyStore,
  { request, viewer, key, variables, log }: IdempotentStream,
  execute: (variables: StreamVariables) => Promise<Response>,
): Promise<Response | AppError> {
  const { path, credential } = requestIdentity(request, viewer);
  // The body identifies the request: a retry may carry a Last-Event-ID that the first did not.
  const requestHash = await hashRequest([request.method, path, credential], { input: variables.input });
  const begun = await store.begin({ userId: viewer.userId, key, method: request.method, path, requestHash });
  if (begun.kind === 'mismatch') {
    return new AppError(
      'idempotency_key_reused',
      `${idempotencyKeyHeader} ${JSON.stringify(key)} was already used for another request (another method, path, body or credential); use a new key for a new request`,
    );
  }
  if (begun.kind === 'in_progress') {
    return new AppError('idempotency_key_in_use', `a request with ${idempotencyKeyHeader} ${JSON.stringify(key)} is still being answered; retry it shortly`, {
      retryAfterSeconds: 1,
    });
  }
  if (begun.kind === 'replay') {
    const jobId = begun.response.status === 200 ? jobOf(begun.response.body) : undefined;
    if (!jobId) {
      const headers = new Headers(begun.response.headers);
      headers.set(replayedHeader, 'true');
      return new Response(begun.response.status === 204 ? null : Buffer.from(begun.response.body), { status: begun.response.status, headers });
    }
    // Resumed after the event the retry names, when it names one of this run; else from the start.
    const position = variables.lastEventId === null ? null : parseEventId(variables.lastEventId);
    const after = position?.jobId === jobId ? position.seq : 0;
    return replayed(await execute({ input: variables.input, lastEventId: `${jobId}:${after}` }));
  }
  const { claim } = begun;
  const release = () => claim.release().catch((error: unknown) => log.error('idempotency: releasing a key failed', error));
  let response: Response;
  try {
    response = await execute(variables);
  } catch (error) {
    await release();
    throw error;
  }
  if (!response.headers.get('content-type')?.startsWith('text/event-stream')) {
    if (!isKeptStatus(response.status)) {
      await release();
      return response;
    }
    const body = new Uint8Array(await response.arrayBuffer());
    const headers: StoredResponse['headers'] = {};
    response.headers.forEach((value, name) => {
      if (name === 'content-type') headers[name] = value;
    });
    await claim
      .complete({ status: response.status, headers, body })
      .catch((error: unknown) => log.error('idempotency: storing a response failed; a retry will run the request again', error));
    return new Response(response.status === 204 ? null : body, { status: response.status, headers: response.headers });
  }
  // The stream's first event is there at once (job_started of a new run): its id names the job.
  const reader = response.body!.getReader();
  const first = await reader.read();
  const eventId = first.done ? undefined : /^id: ([^\n]*)\n/m.exec(new TextDecoder().decode(first.value))?.[1];
  const jobId = eventId === undefined ? undefined : parseEventId(eventId)?.jobId;
  // Not awaited: the stream does not wait on the store (a retry meanwhile is told to wait).
  if (jobId) {
    void claim
      .complete({ status: 200, headers: { 'content-type': 'application/json' }, body: new TextEncoder().encode(JSON.stringify({ job_id: jobId })) })
      .catch((error: unknown) => log.error('idempotency: keeping the job of a stream failed; a retry will start another run', error));
  } else {
    void release();
  }
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      if (first.done) controller.close();
      else controller.enqueue(first.value);
    },
    async pull(controller) {
      const { value, done } = await reader.read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, headers: response.headers });
}

/** The job a kept stream points at. */
function jobOf(body: Uint8Array): string | undefined {
  try {
    const kept = JSON.parse(Buffer.from(body).toString('utf8')) as { job_id?: unknown };
    return typeof kept.job_id === 'string' ? kept.job_id : undefined;
  } catch {
    return undefined;
  }
}

function replayed(response: Response): Response {
  const headers = new Headers(response.headers);
  headers.set(replayedHeader, 'true');
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}
