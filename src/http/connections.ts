import { randomUUID } from 'node:crypto';
import { createServer, maxHeaderSize, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { isIPv6, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { createServerAdapter } from '@whatwg-node/server';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import type { Logger } from '../logger.js';

export type ServerLimits = Config['server'];

/** How often connections are looked at for the send timeout and the body rate. */
const sweepMs = 1_000;
/** Connections refused over the cap are counted, and logged at most this often. */
const dropReportMs = 60_000;

/** Why a request is refused before it is routed: its Host header or its target is unusable. */
export type RequestRefusal = { message: string; /** The target as sent, when it is not a path. */ target?: string };

/** What the Node server hands the request handler beside the request. */
export type ServerContext = { refusal?: RequestRefusal };

/**
 * The Node server around the request handler, with the limits of docs/api.md "Server limits":
 * a connection cap, headers, request and keep-alive timeouts, a send timeout and a minimum body
 * rate. The handler's URL is built from the Host header and the request target, and its path
 * must come from the request line alone: a request whose Host header is not a host, or whose
 * target is neither a path nor an absolute URL, reaches the handler with a URL made of the
 * server's own address and `refusal` set, so that it is refused, logged and counted as any
 * other request.
 */
export function createHttpServer(handler: (request: Request, context: ServerContext) => Promise<Response>, limits: ServerLimits, log: Pick<Logger, 'info'>): Server {
  const adapter = createServerAdapter<ServerContext>(handler);
  // The answer each connection is sending or sent last: the refusal of a request the parser
  // cannot read waits for that answer to end (see answerUnreadableRequest).
  const answering = new WeakMap<Duplex, ServerResponse>();
  const headersTimeout = limits.headersTimeoutSeconds * 1000;
  const server = createServer(
    {
      headersTimeout,
      requestTimeout: Math.max(limits.requestTimeoutSeconds * 1000, headersTimeout),
      keepAliveTimeout: limits.keepAliveTimeoutSeconds * 1000,
      // Node looks for requests past their timeouts this often (30 s unless told).
      connectionsCheckingInterval: Math.min(1_000, headersTimeout / 2),
      // A missing Host header is refused as a bad one is, with a JSON body (Node's own 400 has none).
      requireHostHeader: false,
    },
    (request, response) => {
      answering.set(request.socket, response);
      const refusal = checkRequestTarget(request);
      void adapter(request, response, refusal ? { refusal } : {});
    },
  );
  server.on('clientError', (error: Error & { code?: string; reason?: string }, socket: Duplex) => answerUnreadableRequest(error, socket, answering.get(socket), limits));
  server.maxConnections = limits.maxConnections;
  watchConnections(server, limits, log);
  return server;
}

/**
 * Makes the request's target a path and its Host header a host, or says why it cannot. An
 * absolute-form target (`GET http://host/path`) gives the path, and its authority replaces the
 * Host header (RFC 9112 section 3.2.2). A refused target becomes `/` and a refused Host header
 * is removed: the adapter then builds the URL from the server's own address.
 */
function checkRequestTarget(request: IncomingMessage): RequestRefusal | undefined {
  const target = request.url ?? '';
  if (/^https?:\/\//i.test(target)) {
    const absolute = URL.parse(target);
    if (!absolute) return refuseTarget(request, target, 'the request target is not a valid URL');
    request.url = `${absolute.pathname}${absolute.search}`;
    request.headers.host = absolute.host;
  } else if (!target.startsWith('/')) {
    return refuseTarget(request, target, 'the request target must be a path starting with "/" or an absolute http URL');
  }
  const host = request.headers.host;
  if (host === undefined) {
    // HTTP/1.0 has no Host header; HTTP/1.1 requires one (RFC 9112 section 3.2).
    return request.httpVersion === '1.0' ? undefined : { message: 'the Host header is required' };
  }
  const problem = hostProblem(host);
  if (!problem) return undefined;
  delete request.headers.host;
  return { message: problem };
}

function refuseTarget(request: IncomingMessage, target: string, message: string): RequestRefusal {
  request.url = '/';
  delete request.headers.host;
  return { message, target };
}

/**
 * A request that Node's HTTP parser refuses (malformed, headers over its limit, or not arrived
 * within the headers or request timeout) never reaches the handler. It gets the service's error
 * body here, where Node would send a bare status line, and the connection is closed: the parser
 * cannot tell where the next request would start. An answer to an earlier request on the
 * connection (pipelined) that is still under way is sent first, whole; the refusal follows it.
 */
function answerUnreadableRequest(error: Error & { code?: string; reason?: string }, socket: Duplex, inFlight: ServerResponse | undefined, limits: ServerLimits) {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  if (inFlight && !inFlight.writableFinished) {
    inFlight.once('finish', () => answerUnreadableRequest(error, socket, undefined, limits));
    inFlight.once('close', () => {
      if (!inFlight.writableFinished) socket.destroy();
    });
    return;
  }
  const refusal = unreadableRequestError(error, limits);
  const body = JSON.stringify(refusal.toBody());
  const head = [
    `HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status]}`,
    'content-type: application/json',
    `content-length: ${Buffer.byteLength(body)}`,
    `x-request-id: ${randomUUID()}`,
    'connection: close',
  ];
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`, () => socket.destroy());
}

function unreadableRequestError(error: Error & { code?: string; reason?: string }, limits: ServerLimits): AppError {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      return new AppError('headers_too_large', `the request's header section is over ${maxHeaderSize / 1024} KiB, the server's limit: send fewer or shorter headers`);
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return new AppError('payload_too_large', 'the chunk extensions of the request body are too large');
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new AppError(
        'request_timeout',
        `the request did not arrive in time: its headers must arrive within ${limits.headersTimeoutSeconds} s (KB_HEADERS_TIMEOUT_SECONDS), and all of it within ${limits.requestTimeoutSeconds} s (KB_REQUEST_TIMEOUT_SECONDS)`,
      );
    default:
      return new AppError('bad_request', `the request is not valid HTTP/1.1: ${error.reason ?? error.message}${error.code ? ` (${error.code})` : ''}`);
  }
}

// A DNS name or IPv4 address (RFC 3986 reg-name, less its rarely used characters), or an IPv6
// address in brackets, and an optional port. No nested quantifier: linear on any input.
const hostPattern = /^(?:\[([0-9A-Fa-f:.]{2,45})\]|([A-Za-z0-9._~-]{1,253}))(?::(\d{1,5}))?$/;

/** Why a Host header value is not `host[:port]`, or undefined when it is one. */
function hostProblem(host: string): string | undefined {
  const match = hostPattern.exec(host);
  const problem = `the Host header must be a host name or address with an optional port (got ${JSON.stringify(host.slice(0, 100))})`;
  if (!match) return problem;
  if (match[1] !== undefined && !isIPv6(match[1])) return problem;
  if (match[3] !== undefined && Number(match[3]) > 65_535) return problem;
  return undefined;
}

type ConnectionState = {
  /** The socket's sending (see sendProgress) when it was last seen to move, and since when it has not. */
  sent: number;
  unsentOfWrite: number;
  stalledSince: number | undefined;
  /** The request whose body is arriving, and `bytesRead` at the start of the current window. */
  request: IncomingMessage | undefined;
  readAtWindowStart: number;
  windowStart: number;
};

/**
 * One timer for the server looks at every connection once a second:
 * - an answer waiting to be sent (bytes queued on the socket) that has sent nothing for
 *   `sendTimeoutSeconds` closes the connection, which cancels the answer (a client that never
 *   reads would otherwise pin it in memory);
 * - a request body arriving slower than `minUploadBytesPerSecond` over a window closes it too;
 * - connections refused over the cap since the last report are logged, once a minute at most.
 */
function watchConnections(server: Server, limits: ServerLimits, log: Pick<Logger, 'info'>) {
  const connections = new Map<Socket, ConnectionState>();
  let dropped = 0;
  let droppedSince = 0;
  server.on('drop', () => {
    if (dropped === 0) droppedSince = performance.now();
    dropped += 1;
  });
  server.on('connection', (socket: Socket) => {
    connections.set(socket, { sent: 0, unsentOfWrite: 0, stalledSince: undefined, request: undefined, readAtWindowStart: 0, windowStart: 0 });
    socket.once('close', () => connections.delete(socket));
  });
  server.on('request', (request: IncomingMessage) => {
    const state = connections.get(request.socket);
    if (!state) return;
    state.request = hasBody(request) ? request : undefined;
    state.readAtWindowStart = request.socket.bytesRead;
    state.windowStart = performance.now();
  });
  const sendTimeoutMs = limits.sendTimeoutSeconds * 1000;
  const windowSeconds = limits.uploadRateWindowSeconds;
  const windowMs = windowSeconds * 1000;
  const timer = setInterval(() => {
    const now = performance.now();
    if (dropped > 0 && now - droppedSince >= dropReportMs) {
      log.info(`refused ${dropped} connections in ${Math.round((now - droppedSince) / 1000)} s: ${limits.maxConnections} were open (KB_MAX_CONNECTIONS)`);
      dropped = 0;
    }
    for (const [socket, state] of connections) {
      if (socket.destroyed) continue;
      const { sent, unsentOfWrite } = sendProgress(socket);
      if (socket.writableLength > 0 && sent === state.sent && unsentOfWrite === state.unsentOfWrite) {
        state.stalledSince ??= now;
        if (now - state.stalledSince >= sendTimeoutMs) {
          log.info(`closed a connection whose client took nothing of its answer for ${limits.sendTimeoutSeconds} s (${socket.writableLength} bytes waiting)`);
          // A reset rather than a FIN behind the unsent bytes: the kernel drops them at once.
          socket.resetAndDestroy();
          continue;
        }
      } else {
        state.sent = sent;
        state.unsentOfWrite = unsentOfWrite;
        state.stalledSince = undefined;
      }
      const request = state.request;
      if (!request || request.complete) continue;
      // Body bytes that arrived and wait to be read: the service is the slow side, not the client.
      if (request.readableLength > 0) {
        state.readAtWindowStart = socket.bytesRead;
        state.windowStart = now;
        continue;
      }
      if (now - state.windowStart < windowMs) continue;
      const received = socket.bytesRead - state.readAtWindowStart;
      if (received < limits.minUploadBytesPerSecond * windowSeconds) {
        log.info(`closed a connection whose request body arrived at ${Math.round(received / windowSeconds)} bytes/s (at least ${limits.minUploadBytesPerSecond} wanted)`);
        socket.destroy();
        continue;
      }
      state.readAtWindowStart = socket.bytesRead;
      state.windowStart = now;
    }
  }, sweepMs);
  timer.unref();
  server.once('close', () => clearInterval(timer));
}

/**
 * How far a socket's sending has got: the bytes of writes that completed (`bytesWritten` counts
 * queued bytes as written too, so the queue is taken off), and what libuv has still to send of
 * the write under way, which shrinks as a large write goes out in parts. Node's own socket
 * timeout watches the same `writeQueueSize` of the socket's handle.
 */
function sendProgress(socket: Socket): { sent: number; unsentOfWrite: number } {
  const handle = (socket as Socket & { _handle?: { writeQueueSize?: number } | null })._handle;
  return { sent: socket.bytesWritten - socket.writableLength, unsentOfWrite: handle?.writeQueueSize ?? 0 };
}

const hasBody = (request: IncomingMessage) =>
  request.headers['transfer-encoding'] !== undefined || (request.headers['content-length'] !== undefined && request.headers['content-length'] !== '0');
