import type { ExecutionResult } from 'graphql';
import { errorOf, type GraphQLResponseBody } from './error-response.js';

/** The alias of each event's SSE `id:` line in the stream operations (routes/agent.ts); it is taken out of the `data:` line. */
export const eventIdAlias = 'event_id';

/**
 * A subscription's events as Server-Sent Events: each event's `result` as a `data: <json>` line,
 * preceded by an `id: <event_id>` line when the event has an `event_id` (which the `data:` line
 * then leaves out: the agent's events, docs/agent.md), and a comment line whenever the stream has
 * been silent for `heartbeatMs`, so that proxies and clients do not take a long search for a dead
 * connection. A client that goes away cancels the subscription (and with it the agent's run).
 * A subscription that ends without any event (a reconnection after a run's last event) is
 * answered `204 No Content`, which tells EventSource to stop reconnecting.
 */
export async function eventStreamResponse(events: AsyncIterableIterator<ExecutionResult>, heartbeatMs: number): Promise<Response> {
  // The first event decides between 204 and a stream (a new run's job_started is there at once;
  // a reconnection finds out from the store); a stream whose first event takes longer than this
  // starts without it.
  const first = events.next();
  let wait: ReturnType<typeof setTimeout> | undefined;
  const early = await Promise.race([first, new Promise<undefined>((resolve) => (wait = setTimeout(() => resolve(undefined), 250)))]);
  clearTimeout(wait);
  if (early?.done) return new Response(null, { status: 204, headers: { 'cache-control': 'no-cache, no-transform' } });
  const encoder = new TextEncoder();
  let heartbeat: NodeJS.Timeout | undefined;
  let closed = false;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      const write = (text: string) => {
        if (closed) return;
        controller.enqueue(encoder.encode(text));
        heartbeat?.refresh();
      };
      /** Writes an event; false when the stream cannot go on. */
      const send = (value: ExecutionResult): boolean => {
        const failure = errorOf(value as GraphQLResponseBody);
        if (failure) {
          // An event the schema could not give: the run cannot be followed any further.
          write(`data: ${JSON.stringify({ type: 'error', code: failure.code, message: failure.message })}\n\n`);
          return false;
        }
        const { [eventIdAlias]: eventId, ...data } = (value.data as { result: Record<string, unknown> }).result;
        write(`${typeof eventId === 'string' ? `id: ${eventId}\n` : ''}data: ${JSON.stringify(data)}\n\n`);
        return true;
      };
      heartbeat = setInterval(() => write(': heartbeat\n\n'), heartbeatMs);
      // Written at once: a first event already there goes out with the headers.
      let going = early ? send(early.value) : true;
      void (async () => {
        try {
          if (!going) {
            await events.return?.();
            return;
          }
          for (let next = early ? events.next() : first; ; next = events.next()) {
            const { value, done } = await next;
            if (done || closed) break;
            going = send(value);
            if (!going) {
              await events.return?.();
              break;
            }
          }
        } finally {
          clearInterval(heartbeat);
          if (!closed) {
            closed = true;
            controller.close();
          }
        }
      })();
    },
    cancel() {
      closed = true;
      clearInterval(heartbeat);
      void events.return?.();
    },
  });
  return new Response(body, {
    status: 200,
    headers: {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      // nginx and others buffer responses unless told not to.
      'x-accel-buffering': 'no',
    },
  });
}
