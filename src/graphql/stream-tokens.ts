import { useGraphQLSSE } from '@graphql-yoga/plugin-graphql-sse';
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Response as SseResponse } from 'graphql-sse';
import { getOperationAST, parse, type ExecutionResult } from 'graphql';
import { createGraphQLError, type Plugin } from 'graphql-yoga';
import type { Viewer } from '../auth/authenticate.js';
import { sameCredential } from '../auth/policy.js';
import type { Config } from '../config.js';
import { AppError, authenticationRequired, badRequest } from '../errors.js';
import { isUuid } from '../ids.js';
import type { GraphQLServerContext } from './context.js';
import { graphqlStreamEndpoint } from './endpoints.js';
import type { ForwardedAnswer, StreamRouting } from './stream-routing.js';

const tokenHeader = 'x-graphql-event-stream-token';

/**
 * A stream reserved with PUT (graphql-sse's single connection mode). `queuedBytes` counts results
 * handed to graphql-sse that the stream's reader has not taken yet (all of them, while it is not
 * open): a subscription's next event waits for the stream to be open and for room, a query's
 * result is dropped with an error when there is none.
 */
type Reservation = {
  token: string;
  viewer: Viewer;
  opened: boolean;
  /** Ended: its stream closed, or it was never opened in time. Waiting results are refused. */
  ended: boolean;
  queuedBytes: number;
  /** Aborted when it ends: the operations sent to it stop (an agent run is cancelled). */
  lifetime: AbortController;
  wake: Set<() => void>;
  expiry: NodeJS.Timeout;
  /** Opened by another process (`routing`): what was sent here meanwhile goes there. */
  openedElsewhere: boolean;
};

/** What a result costs in the queue: its JSON and graphql-sse's framing of it. */
const resultBytes = (result: unknown) => Buffer.byteLength(JSON.stringify(result)) + 64;

/**
 * graphql-sse at /graphql/stream. Tokens come from a secure random source and are bound to the
 * credential that reserved them (policy.ts `sameCredential`): another credential presenting one
 * (to open the stream, or to send or stop operations on it) is told no such stream exists. A
 * user holds at most `streamsPerUser` reservations; one not opened within `unopenedSeconds` is
 * dropped with its operations (an agent run sent there is cancelled and refunded); a stream
 * holds at most `queueBytes` of results its reader has not taken (or one larger result for a
 * reader that has taken everything). docs/api.md, "Event streams of graphql-sse".
 *
 * With `routing` (several processes on one PostgreSQL), a stream's requests may reach any
 * process: a stream opened on another process than the one that reserved it is reserved again
 * there, and operations and stops for a stream held elsewhere are forwarded to its holder.
 */
export function graphqlSseStreams(
  limits: Config['graphqlSse'],
  routing?: StreamRouting,
): {
  plugins: Plugin<Record<string, unknown>, GraphQLServerContext>[];
  /** The server's own request handler, through which an unopened reservation is dropped. */
  attach(fetch: (request: Request, context: GraphQLServerContext) => Promise<Response> | Response): void;
} {
  const viewers = new WeakMap<Request, Viewer | undefined>();
  const reservations = new Map<string, Reservation>();
  const dropping = new WeakSet<Request>();
  /** This process's own `PUT`s taking over a reservation made on another process, for a stream opened here. */
  const adopting = new WeakSet<Request>();
  let yogaFetch: ((request: Request, context: GraphQLServerContext) => Promise<Response> | Response) | undefined;

  const refusal = (error: AppError): SseResponse => [
    JSON.stringify(error.toGraphQLHttpBody()),
    {
      status: error.status,
      statusText: STATUS_CODES[error.status] ?? '',
      headers: {
        'content-type': 'application/json',
        ...(error.details.retryAfterSeconds !== undefined && { 'retry-after': String(error.details.retryAfterSeconds) }),
      },
    },
  ];
  const noSuchStream = () => refusal(new AppError('not_found', 'no event stream with this token for this credential'));
  const tokenOf = (request: { headers: { get(name: string): string | null | undefined }; url: string }) =>
    request.headers.get(tokenHeader) ?? new URL(request.url, 'http://localhost').searchParams.get('token');

  const wakeAll = (reservation: Reservation) => {
    for (const wake of reservation.wake) wake();
    reservation.wake.clear();
  };

  const heldBy = new Map<string, number>();
  /** Frees one of the user's places (see `reserve`). */
  const release = (userId: string) => {
    const held = (heldBy.get(userId) ?? 1) - 1;
    if (held > 0) heldBy.set(userId, held);
    else heldBy.delete(userId);
  };
  const end = (reservation: Reservation) => {
    if (reservation.ended) return;
    reservation.ended = true;
    clearTimeout(reservation.expiry);
    reservation.lifetime.abort(new StreamEnded());
    reservations.delete(reservation.token);
    routing?.ended(reservation.token).catch(() => {});
    release(reservation.viewer.userId);
    wakeAll(reservation);
  };

  /**
   * graphql-sse lets go of a stream (and completes its operations) when its reader leaves: a
   * reservation that was never opened is dropped by opening it and leaving at once.
   */
  const dropUnopened = async (reservation: Reservation) => {
    if (reservation.opened || reservation.ended || !yogaFetch) return;
    end(reservation);
    const request = new Request(`http://localhost${graphqlStreamEndpoint}`, { method: 'GET', headers: { accept: 'text/event-stream', [tokenHeader]: reservation.token } });
    dropping.add(request);
    try {
      const response = await yogaFetch(request, { viewer: reservation.viewer } as GraphQLServerContext);
      await response.body?.cancel();
    } catch {
      // The stream had gone already.
    }
  };

  /** The answer a stream's holder gave to a request forwarded to it, as graphql-sse returns answers. */
  const answered = (answer: ForwardedAnswer | null): SseResponse =>
    answer ? [answer.body === '' ? null : answer.body, { status: answer.status, statusText: STATUS_CODES[answer.status] ?? '', headers: answer.headers }] : noSuchStream();

  /**
   * A POST or DELETE for a stream this process does not hold open: sent to the process that does
   * (once it is opened somewhere, if it is only reserved), or 404 when it is nowhere.
   */
  const forwarded = async (request: { raw: unknown; method: string; url: string }, token: string, viewer: Viewer): Promise<SseResponse | null> => {
    if (!routing) return null;
    const found = await routing.find(token);
    if (!found || !sameCredential(found.viewer, viewer)) return noSuchStream();
    const raw = request.raw as Request;
    const holder = found.holder ?? (await routing.holderOf(token, raw.signal));
    if (holder === null) return noSuchStream();
    // Opened here meanwhile: served here.
    if (holder === routing.instance) return null;
    const headers: Record<string, string> = { [tokenHeader]: token };
    for (const name of ['content-type', 'accept']) {
      const value = raw.headers.get(name);
      if (value !== null) headers[name] = value;
    }
    const url = new URL(request.url, 'http://localhost');
    const body = request.method === 'POST' ? await raw.text() : '';
    return answered(await routing.forward(holder, token, { method: request.method, url: url.pathname + url.search, headers, body }, viewer, raw.signal));
  };

  /** What graphql-sse answers a `PUT` for a token reserved already, here or (the same answer) on another process. */
  const alreadyRegistered = (): SseResponse => [
    JSON.stringify({ errors: [{ message: 'Stream already registered' }] }),
    { status: 409, statusText: 'Conflict', headers: { 'content-type': 'application/json; charset=utf-8' } },
  ];

  const reserve = async (viewer: Viewer, token: string, adopt: boolean): Promise<string | SseResponse> => {
    const held = heldBy.get(viewer.userId) ?? 0;
    if (held >= limits.streamsPerUser) {
      return refusal(
        new AppError('rate_limited', `at most ${limits.streamsPerUser} event streams may be reserved at once; open or close some first`, {
          retryAfterSeconds: Math.ceil(limits.unopenedSeconds),
        }),
      );
    }
    // Counted before the store is asked, so that PUTs arriving meanwhile see the place taken.
    heldBy.set(viewer.userId, held + 1);
    let taken: boolean;
    try {
      taken = (await routing?.reserved(token, viewer, limits.unopenedSeconds, { adopt })) ?? true;
    } catch (error) {
      release(viewer.userId);
      throw error;
    }
    if (!taken) {
      // A live stream of another process holds the token: its owner is told it exists, anyone else that it does not.
      release(viewer.userId);
      const found = await routing!.find(token);
      return found && sameCredential(found.viewer, viewer) ? alreadyRegistered() : noSuchStream();
    }
    const reservation: Reservation = {
      token,
      viewer,
      opened: false,
      ended: false,
      queuedBytes: 0,
      lifetime: new AbortController(),
      wake: new Set(),
      expiry: undefined as unknown as NodeJS.Timeout,
      openedElsewhere: false,
    };
    reservation.expiry = setTimeout(() => void dropUnopened(reservation), limits.unopenedSeconds * 1000);
    reservation.expiry.unref();
    reservations.set(token, reservation);
    return token;
  };

  routing?.handle({
    async serve(request, viewer) {
      if (!yogaFetch) return { status: 503, headers: {}, body: '' };
      const response = await yogaFetch(
        new Request(`http://localhost${request.url}`, { method: request.method, headers: request.headers, body: request.method === 'POST' ? request.body : undefined }),
        { viewer } as GraphQLServerContext,
      );
      return { status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() };
    },
    openedElsewhere(token) {
      const reservation = reservations.get(token);
      if (!reservation || reservation.opened) return;
      reservation.openedElsewhere = true;
      void dropUnopened(reservation);
    },
  });

  const plugins: Plugin<Record<string, unknown>, GraphQLServerContext>[] = [
    {
      onRequest({ request, serverContext }) {
        viewers.set(request, serverContext.viewer);
        // An operation sent to a stream lives as long as the stream, not as long as its POST.
        const token = request.method === 'POST' ? tokenOf(request) : null;
        const reservation = token ? reservations.get(token) : undefined;
        if (reservation) serverContext.signal = reservation.lifetime.signal;
      },
      /** Counts what the reader of an open stream takes off it, and ends its reservation when it leaves. */
      onResponse({ request, response, setResponse }) {
        if (request.method !== 'GET' || dropping.has(request) || !response.body) return;
        if (!new URL(request.url).pathname.endsWith(graphqlStreamEndpoint)) return;
        const token = tokenOf(request);
        const reservation = token ? reservations.get(token) : undefined;
        if (!reservation || !response.headers.get('content-type')?.startsWith('text/event-stream')) return;
        const counted = response.body.pipeThrough(
          new TransformStream<Uint8Array, Uint8Array>({
            transform(chunk, controller) {
              reservation.queuedBytes = Math.max(0, reservation.queuedBytes - chunk.byteLength);
              wakeAll(reservation);
              controller.enqueue(chunk);
            },
            flush() {
              end(reservation);
            },
          }),
        );
        const reader = counted.getReader();
        const body = new ReadableStream<Uint8Array>({
          async pull(controller) {
            const { done, value } = await reader.read();
            if (done) controller.close();
            else controller.enqueue(value);
          },
          async cancel(reason) {
            end(reservation);
            await reader.cancel(reason);
          },
        }, { highWaterMark: 0 });
        setResponse(new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers }));
      },
    },
    useGraphQLSSE({
      endpoint: graphqlStreamEndpoint,
      authenticate: async (request) => {
        const raw = request.raw as Request;
        const viewer = viewers.get(raw);
        if (!viewer) return refusal(authenticationRequired());
        const given = tokenOf(request);
        if (given && dropping.has(raw)) return given;
        let reservation = given ? reservations.get(given) : undefined;
        // A token no live stream holds, on any process, may be reserved again, by anyone (it is
        // theirs from then on): a client reconnecting with the token it had, say.
        if (request.method === 'PUT' && !reservation) {
          if (given !== null && !isUuid(given)) return refusal(badRequest(tokenHeader, 'must be a token this server gave (a UUID)'));
          return reserve(viewer, given ?? randomUUID(), adopting.has(raw));
        }
        if (!given) return randomUUID();
        if (routing && isUuid(given) && (!reservation || !reservation.opened)) {
          const streamRequest = request.headers.get('accept') === 'text/event-stream';
          if (request.method === 'GET' && streamRequest && !reservation) {
            // Reserved on another process, opened here: reserved here too, then opened as usual.
            const found = await routing.find(given);
            if (found && !found.holder && sameCredential(found.viewer, viewer) && yogaFetch) {
              const adoption = new Request(`http://localhost${graphqlStreamEndpoint}`, { method: 'PUT', headers: { [tokenHeader]: given } });
              adopting.add(adoption);
              const put = await yogaFetch(adoption, { viewer } as GraphQLServerContext);
              await put.body?.cancel();
              reservation = reservations.get(given);
            }
          } else if ((request.method === 'POST' || request.method === 'DELETE') && (!reservation || reservation.openedElsewhere)) {
            const answer = await forwarded(request, given, viewer);
            if (answer) return answer;
            reservation = reservations.get(given);
          }
        }
        if (!reservation || !sameCredential(reservation.viewer, viewer)) return noSuchStream();
        if (request.method === 'GET' && request.headers.get('accept') === 'text/event-stream' && !reservation.opened) {
          reservation.opened = true;
          clearTimeout(reservation.expiry);
          wakeAll(reservation);
          await routing?.opened(given);
        }
        // An operation sent before its stream is open waits, unanswered and not run, until the
        // stream opens (here, or on another process, where it is then sent); a stream dropped
        // unopened answers it 404. Nothing runs for nobody.
        if (request.method === 'POST') {
          const waiting = reservation;
          while (!waiting.opened && !waiting.ended) await new Promise<void>((resolve) => waiting.wake.add(resolve));
          if (waiting.openedElsewhere) return (await forwarded(request, given, viewer)) ?? noSuchStream();
          if (waiting.ended) return noSuchStream();
        }
        return given;
      },
      // What graphql-sse hands back to onNext with each result of the operation.
      context: (_request: unknown, params: { query?: string; operationName?: string | null }): OperationKind => ({ subscription: isSubscription(params) }),
      onNext: async (context, request, result) => {
        const token = tokenOf(request);
        // Distinct connections mode: the request's own response carries the result.
        if (!token) return;
        const reservation = reservations.get(token);
        const size = resultBytes(result);
        const fits = (stream: Reservation) => stream.queuedBytes + size <= limits.queueBytes || (stream.opened && stream.queuedBytes === 0);
        if (!(context as OperationKind | undefined)?.subscription) {
          // A query's or a mutation's one result is queued for the stream (to be sent when it
          // opens), or dropped with an error when the stream already holds its fill.
          if (!reservation || reservation.ended) throw new StreamEnded();
          if (!fits(reservation)) return droppedResult(limits.queueBytes);
          reservation.queuedBytes += size;
          return;
        }
        // A subscription's events wait until the stream is open and its reader keeps up: what
        // waits here has not been taken, so an agent run streaming to nobody is never charged.
        for (;;) {
          if (!reservation || reservation.ended) throw new StreamEnded();
          if (reservation.opened && fits(reservation)) break;
          await new Promise<void>((resolve) => reservation.wake.add(resolve));
        }
        reservation.queuedBytes += size;
      },
    }) as Plugin<Record<string, unknown>, GraphQLServerContext>,
  ];
  return {
    plugins,
    attach(fetch) {
      yogaFetch = fetch;
    },
  };
}

type OperationKind = { subscription: boolean };

/** Whether the operation of a request's parameters is a subscription. */
function isSubscription(params: { query?: string; operationName?: string | null }): boolean {
  if (typeof params.query !== 'string') return false;
  try {
    return getOperationAST(parse(params.query), params.operationName ?? undefined)?.operation === 'subscription';
  } catch {
    // A document that does not parse has no result to send.
    return false;
  }
}

/** What a dropped result is replaced with: the operation's answer is an error saying why. */
function droppedResult(queueBytes: number): ExecutionResult {
  const message = `the event stream holds ${(queueBytes / 1024 / 1024).toFixed(2)} MiB of results its reader has not taken (or it is not open yet): this result was dropped; read the stream, then send the operation again`;
  return { data: null, errors: [createGraphQLError(message, { extensions: { code: 'rate_limited' } })] };
}

/** Thrown to graphql-sse for a result whose stream has ended: it lets go of the stream and its operations. */
class StreamEnded extends Error {
  constructor() {
    super('the event stream has ended');
  }
}
