// The typed client: every REST endpoint through openapi-fetch, typed by the types generated from
// the service's OpenAPI description (./schema.ts), and a helper for the agent's event stream
// that yields typed events and resumes a dropped connection where it stopped.
import createFetchClient, { type Client } from 'openapi-fetch';
import { createParser } from 'eventsource-parser';
import type { components, paths } from './schema.js';

export type { components, paths } from './schema.js';

/** One event of an agent run (`job_started`, `reasoning`, `token`, `sources`, `done`, `error`). */
export type AgentEvent = components['schemas']['AgentEvent'];
export type AgentEventOf<Type extends AgentEvent['type']> = Extract<AgentEvent, { type: Type }>;
/** The body of `POST /agent/stream`. */
export type AgentRequest = NonNullable<paths['/agent/stream']['post']['requestBody']>['content']['application/json'];
/** Every refusal's body. */
export type ErrorBody = components['schemas']['Error'];

/** A refusal from the service: its status, machine code and message, and the request's id. */
export class KbApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly requestId: string | null,
  ) {
    super(message);
    this.name = 'KbApiError';
  }
}

export type KbClientOptions = {
  /** Where the service runs, e.g. `http://127.0.0.1:3000`. */
  baseUrl: string;
  /** An API key (`sk_...`) or a JWT. */
  apiKey: string;
  /** A fetch to use instead of the global one (tests, proxies). */
  fetch?: typeof globalThis.fetch;
};

export type StreamAgentOptions = {
  /** Stops the run (a resumable one is left to its grace period) and ends the iteration. */
  signal?: AbortSignal;
  /**
   * Ask for a resumable run and reconnect when the connection drops (default true): the run
   * goes on while the client is away, and the events missed are sent again on reconnecting.
   */
  resume?: boolean;
  /** How many reconnections in a row before giving up (default 5). */
  maxReconnects?: number;
  /** Sent as `Idempotency-Key`: a retried request then replays the same run instead of starting (and paying for) another. */
  idempotencyKey?: string;
};

export type KbClient = Client<paths> & {
  /** Asks the agent and yields its events as they arrive, ending after `done` or `error`. */
  streamAgent(request: AgentRequest, options?: StreamAgentOptions): AsyncGenerator<AgentEvent>;
  /** Follows a run already started (by id), from after the event `lastEventId` names. */
  followAgentRun(jobId: string, options?: { lastEventId?: string; signal?: AbortSignal; maxReconnects?: number }): AsyncGenerator<AgentEvent>;
};

export function createClient(options: KbClientOptions): KbClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const fetchImpl = options.fetch ?? globalThis.fetch;
  const authorization = `Bearer ${options.apiKey}`;
  const client = createFetchClient<paths>({ baseUrl, headers: { authorization }, fetch: fetchImpl });
  const connect = (path: string, init: RequestInit) =>
    fetchImpl(`${baseUrl}${path}`, { ...init, headers: { authorization, accept: 'text/event-stream', ...(init.headers as Record<string, string>) } });

  async function* follow(
    open: (lastEventId: string | undefined) => Promise<Response>,
    { signal, resume, maxReconnects }: { signal?: AbortSignal; resume: boolean; maxReconnects: number },
    reopen: (jobId: string, lastEventId: string | undefined) => Promise<Response>,
    known: { jobId?: string; lastEventId?: string } = {},
  ): AsyncGenerator<AgentEvent> {
    let { jobId, lastEventId } = known;
    let failures = 0;
    let response = await open(undefined);
    for (;;) {
      if (response.status === 204) return; // the run had ended and nothing was left to send
      if (!response.ok) throw await errorOf(response);
      const events: AgentEvent[] = [];
      const parser = createParser({
        onEvent(message) {
          if (message.id) lastEventId = message.id;
          events.push(JSON.parse(message.data) as AgentEvent);
        },
      });
      const decoder = new TextDecoder();
      try {
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
          parser.feed(decoder.decode(chunk, { stream: true }));
          while (events.length > 0) {
            const event = events.shift()!;
            failures = 0;
            if (event.type === 'job_started') jobId = event.jobId;
            yield event;
            if (event.type === 'done' || event.type === 'error') return;
          }
        }
      } catch (error) {
        if (signal?.aborted || !resume || !jobId) throw error;
      }
      // The stream ended without its last event: the connection dropped.
      if (!resume || !jobId) throw new KbApiError(0, 'stream_interrupted', 'the event stream ended before the run did', null);
      if (++failures > maxReconnects) throw new KbApiError(0, 'stream_interrupted', `the event stream dropped ${failures} times in a row`, null);
      await new Promise((resolve) => setTimeout(resolve, Math.min(250 * 2 ** (failures - 1), 4000)));
      response = await reopen(jobId, lastEventId);
    }
  }

  const reopenRun = (signal?: AbortSignal) => (jobId: string, lastEventId: string | undefined) =>
    connect(`/v1/agent/jobs/${encodeURIComponent(jobId)}/events`, {
      method: 'GET',
      ...(signal && { signal }),
      headers: lastEventId ? { 'last-event-id': lastEventId } : {},
    });

  return Object.assign(client, {
    streamAgent(request: AgentRequest, streamOptions: StreamAgentOptions = {}) {
      const resume = streamOptions.resume ?? true;
      const open = () =>
        connect('/agent/stream', {
          method: 'POST',
          ...(streamOptions.signal && { signal: streamOptions.signal }),
          headers: { 'content-type': 'application/json', ...(streamOptions.idempotencyKey && { 'idempotency-key': streamOptions.idempotencyKey }) },
          body: JSON.stringify({ ...request, ...(resume && { resumable: true }) }),
        });
      return follow(open, { signal: streamOptions.signal, resume, maxReconnects: streamOptions.maxReconnects ?? 5 }, reopenRun(streamOptions.signal));
    },
    followAgentRun(jobId: string, followOptions: { lastEventId?: string; signal?: AbortSignal; maxReconnects?: number } = {}) {
      const reopen = reopenRun(followOptions.signal);
      return follow(
        () => reopen(jobId, followOptions.lastEventId),
        { signal: followOptions.signal, resume: true, maxReconnects: followOptions.maxReconnects ?? 5 },
        reopen,
        { jobId, lastEventId: followOptions.lastEventId },
      );
    },
  });
}

async function errorOf(response: Response): Promise<KbApiError> {
  const requestId = response.headers.get('x-request-id');
  try {
    const body = (await response.json()) as Partial<ErrorBody>;
    return new KbApiError(response.status, String(body.error ?? 'unknown'), String(body.message ?? response.statusText), requestId);
  } catch {
    return new KbApiError(response.status, 'unknown', response.statusText, requestId);
  }
}

/** A REST call's refusal as an exception: `const me = unwrap(await client.GET('/v1/user/me'))`. */
export function unwrap<Data>(result: { data?: Data; error?: unknown; response: Response }): Data {
  if (result.error !== undefined || !result.response.ok) {
    const body = (result.error ?? {}) as Partial<ErrorBody>;
    throw new KbApiError(result.response.status, String(body.error ?? 'unknown'), String(body.message ?? result.response.statusText), result.response.headers.get('x-request-id'));
  }
  return result.data as Data;
}
