import { EventSourceParserStream } from 'eventsource-parser/stream';

/**
 * A graphql-sse single-connection client, as requests: reserve a stream (PUT), open it (GET),
 * send an operation to it (POST) or stop one (DELETE), each at `/graphql/stream` of `serverUrl`.
 */
export const streamEndpoint = (serverUrl: string) => new URL('/graphql/stream', serverUrl);

const tokenHeader = 'x-graphql-event-stream-token';

/** A `PUT` reserving a stream; with `token`, reserving that one again. */
export function reserveStream(serverUrl: string, key: string, token?: string) {
  return fetch(streamEndpoint(serverUrl), { method: 'PUT', headers: { authorization: `Bearer ${key}`, ...(token && { [tokenHeader]: token }) } });
}

export function sendToStream(serverUrl: string, key: string, token: string, operationId: string, body: { query: string; variables?: unknown }) {
  return fetch(streamEndpoint(serverUrl), {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', [tokenHeader]: token },
    body: JSON.stringify({ ...body, extensions: { operationId } }),
  });
}

export function stopOnStream(serverUrl: string, key: string, token: string, operationId: string) {
  const url = streamEndpoint(serverUrl);
  url.searchParams.set('operationId', operationId);
  return fetch(url, { method: 'DELETE', headers: { authorization: `Bearer ${key}`, [tokenHeader]: token } });
}

export function openStream(serverUrl: string, key: string, token: string, signal?: AbortSignal) {
  return fetch(streamEndpoint(serverUrl), { headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream', [tokenHeader]: token }, signal });
}

/** Reads a stream's `next` payloads by operation until every one of `operationIds` has completed. */
export async function readUntilComplete(response: Response, operationIds: string[]) {
  const results = new Map<string, any[]>(operationIds.map((id) => [id, []]));
  const pending = new Set(operationIds);
  const reader = response.body!.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
  while (pending.size > 0) {
    const { done, value: message } = await reader.read();
    if (done) break;
    if (!message.event || !message.data) continue;
    const parsed = JSON.parse(message.data);
    if (message.event === 'next') results.get(parsed.id)?.push(parsed.payload);
    if (message.event === 'complete') pending.delete(parsed.id);
  }
  await reader.cancel();
  return results;
}
