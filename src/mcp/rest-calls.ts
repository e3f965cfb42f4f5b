import { EventSourceParserStream } from 'eventsource-parser/stream';

/** A refusal the REST layer answered (4xx, 5xx): its status and documented error body. */
export class RestRefusal extends Error {
  override name = 'RestRefusal';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

export type QueryValues = Record<string, string | number | boolean | undefined>;

export type RestCalls = {
  /**
   * A JSON endpoint's body (null for 204); a refusal throws RestRefusal. `next` is the Link
   * header's next-page cursor. `body` is sent as JSON, or as it is when `contentType` is given.
   */
  json<T = unknown>(method: string, path: string, options?: { query?: QueryValues; body?: unknown; contentType?: string }): Promise<{ body: T; next?: string }>;
  /** An event-stream endpoint's events, each the JSON of its `data:` line; a refusal before the stream opens throws RestRefusal. */
  events(path: string, body: unknown): Promise<AsyncIterable<Record<string, unknown>>>;
};

/**
 * The documented REST endpoints, called in this process for one caller: each call is a request
 * through the server's own handler (authentication, scopes, rate limits, costs, credits and
 * errors included) with the caller's Authorization header, ended when `signal` aborts.
 */
export function restCalls(
  dispatch: (request: Request) => Promise<Response>,
  origin: string,
  caller: { authorization: string; requestId?: string },
  signal: AbortSignal,
): RestCalls {
  const send = async (method: string, path: string, query: QueryValues = {}, body?: unknown, accept = 'application/json', contentType?: string) => {
    const url = new URL(path, origin);
    // An id of "." or ".." would make another path of the one built ("/v1/kb/documents/../file").
    if (url.pathname !== path) throw new RestRefusal(400, 'bad_request', 'an id must not be "." or ".."');
    for (const [name, value] of Object.entries(query)) if (value !== undefined) url.searchParams.set(name, String(value));
    const headers = new Headers({ authorization: caller.authorization, accept });
    // The MCP request's id: its REST requests are logged under it.
    if (caller.requestId) headers.set('x-request-id', caller.requestId);
    let payload: BodyInit | undefined;
    if (contentType !== undefined) {
      headers.set('content-type', contentType);
      payload = body as BodyInit;
    } else if (body !== undefined) {
      headers.set('content-type', 'application/json');
      payload = JSON.stringify(body);
    }
    const response = await dispatch(new Request(url, { method, headers, body: payload, signal }));
    if (response.status >= 400) throw await refusalOf(response);
    return response;
  };
  return {
    async json<T>(method: string, path: string, options: { query?: QueryValues; body?: unknown; contentType?: string } = {}) {
      const response = await send(method, path, options.query, options.body, 'application/json', options.contentType);
      const body = (response.status === 204 ? null : await response.json()) as T;
      return { body, next: nextCursor(response.headers.get('link')) };
    },
    async events(path: string, body: unknown) {
      const response = await send('POST', path, {}, body, 'text/event-stream');
      const reader = response.body!.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
      // Reading stops when the call is cancelled, whether or not the stream ends by itself then.
      const stop = () => void reader.cancel().catch(() => {});
      return (async function* () {
        signal.addEventListener('abort', stop, { once: true });
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) return;
            yield JSON.parse(value.data) as Record<string, unknown>;
          }
        } finally {
          signal.removeEventListener('abort', stop);
        }
      })();
    },
  };
}

async function refusalOf(response: Response): Promise<RestRefusal> {
  const retryAfter = Number(response.headers.get('retry-after'));
  const body = (await response.json().catch(() => ({}))) as { error?: string; message?: string };
  return new RestRefusal(response.status, body.error ?? 'internal_error', body.message ?? `HTTP ${response.status}`, Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : undefined);
}

/** The `cursor` of a `Link: <...?cursor=...>; rel="next"` header. */
function nextCursor(link: string | null): string | undefined {
  const match = link && /<([^>]+)>\s*;\s*rel="next"/.exec(link);
  if (!match) return undefined;
  return new URL(match[1]!, 'http://localhost').searchParams.get('cursor') ?? undefined;
}
