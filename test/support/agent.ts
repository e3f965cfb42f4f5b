import { expect } from 'vitest';
import type { TestServer } from './server.js';

export type AgentEvent = { type: string; [field: string]: any };

export type AgentStream = {
  status: number;
  headers: Headers;
  /** The JSON error body of a refusal. */
  body?: any;
  events: AgentEvent[];
  /** Each event's SSE `id:` (`<jobId>:<seq>`), in the order of `events` (undefined for an event without one). */
  ids: (string | undefined)[];
  /** Comment lines (heartbeats) seen between events. */
  comments: number;
};

/**
 * POSTs to /agent/stream and reads the SSE stream to its end (or until `stopAfter` returns true
 * for an event: the connection is then closed, as a client that goes away closes it).
 */
export async function streamAgent(
  server: TestServer,
  key: string | null,
  body: unknown,
  options: { stopAfter?: (event: AgentEvent) => boolean; headers?: Record<string, string> } = {},
): Promise<AgentStream> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...options.headers };
  if (key) headers.authorization = `Bearer ${key}`;
  return readEventStream(new URL('/agent/stream', server.url), { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) }, options);
}

/**
 * Sends a request whose answer may be an SSE stream and reads the stream to its end, or until
 * `stopAfter` returns true for an event (the connection is then closed). An answer that is not a
 * stream comes back with its status and JSON body.
 */
export async function readEventStream(url: URL, init: RequestInit, options: { stopAfter?: (event: AgentEvent) => boolean } = {}): Promise<AgentStream> {
  const abort = new AbortController();
  const response = await fetch(url, { ...init, signal: abort.signal });
  if (!response.headers.get('content-type')?.startsWith('text/event-stream')) {
    const text = await response.text();
    return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined, events: [], ids: [], comments: 0 };
  }
  const events: AgentEvent[] = [];
  const ids: (string | undefined)[] = [];
  let comments = 0;
  let buffer = '';
  const decoder = new TextDecoder();
  const reader = response.body!.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let id: string | undefined;
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) comments += 1;
          else if (line.startsWith('id: ')) {
            expect(id, 'one id per event').toBeUndefined();
            id = line.slice(4);
          } else if (line.startsWith('data: ')) {
            const event = JSON.parse(line.slice(6)) as AgentEvent;
            events.push(event);
            ids.push(id);
            if (options.stopAfter?.(event)) {
              abort.abort();
              return { status: response.status, headers: response.headers, events, ids, comments };
            }
          } else if (line !== '') throw new Error(`unexpected line in the stream: ${JSON.stringify(line)}`);
        }
      }
    }
  } catch (error) {
    if (!abort.signal.aborted) throw error;
  }
  expect(buffer, 'the stream ends after a complete event').toBe('');
  return { status: response.status, headers: response.headers, events, ids, comments };
}

/** The protocol every successful stream keeps: job_started first, reasoning (deep) before tokens, sources, then done, once. */
export function expectProtocol(stream: AgentStream, mode: 'fast' | 'deep' = 'fast') {
  expect(stream.status).toBe(200);
  const types = stream.events.map((event) => event.type);
  expect(types[0]).toBe('job_started');
  const terminal = types.filter((type) => type === 'done' || type === 'error');
  expect(terminal, JSON.stringify(stream.events.at(-1))).toEqual(['done']);
  expect(types.at(-1)).toBe('done');
  expect(types.at(-2)).toBe('sources');
  const firstToken = types.indexOf('token');
  expect(firstToken).toBeGreaterThan(0);
  expect(types.slice(firstToken, -2).every((type) => type === 'token')).toBe(true);
  const reasoning = types.filter((type) => type === 'reasoning').length;
  if (mode === 'deep') {
    expect(reasoning).toBeGreaterThan(0);
    expect(types.slice(1, 1 + reasoning).every((type) => type === 'reasoning')).toBe(true);
  } else {
    expect(reasoning).toBe(0);
  }
  const done = stream.events.at(-1)!;
  expect(done.jobId).toBe(stream.events[0]!.jobId);
  return {
    answer: stream.events.filter((event) => event.type === 'token').map((event) => event.content as string).join(''),
    sources: stream.events.at(-2)!.sources as { doc_id: string; filename: string; pages: number[]; passages: { citation: number; chunk_index: number; page: number | null; cells: string | null; quote: string; start: number; end: number }[] }[],
    done,
    steps: stream.events.filter((event) => event.type === 'reasoning').flatMap((event) => event.steps),
  };
}

/** Every cited passage's quote occurs verbatim in its stored chunk at the offsets given. */
export async function expectVerbatimQuotes(server: TestServer, key: string, workspaceIds: string[], sources: ReturnType<typeof expectProtocol>['sources']) {
  for (const source of sources) {
    let chunks: { chunk_index: number; content: string }[] | undefined;
    for (const workspaceId of workspaceIds) {
      const response = await server.request('GET', `/v1/kb/documents/${source.doc_id}/chunks?workspace_id=${workspaceId}`, { key });
      if (response.status === 200) chunks = response.body;
    }
    expect(chunks, `chunks of ${source.filename}`).toBeDefined();
    expect(source.passages.length).toBeGreaterThan(0);
    for (const passage of source.passages) {
      const chunk = chunks!.find((candidate) => candidate.chunk_index === passage.chunk_index)!;
      expect(chunk.content.slice(passage.start, passage.end)).toBe(passage.quote);
    }
  }
}

/**
 * Every answer stored on this server (every run that reached `done`): each cited passage's quote
 * is the stored chunk's content at its offsets. Returns how many quotes were checked.
 */
export async function expectEveryStoredQuoteVerbatim(server: TestServer): Promise<number> {
  const prisma = server.app.db.prisma;
  const answers = await prisma.chatMessage.findMany({ where: { role: 'assistant', jobId: { not: null } }, select: { sources: true } });
  let checked = 0;
  for (const answer of answers) {
    for (const source of answer.sources as { doc_id: string; passages: { chunk_index: number; quote: string; start: number; end: number }[] }[]) {
      for (const passage of source.passages) {
        const chunk = await prisma.chunk.findFirst({ where: { documentId: source.doc_id, chunkIndex: passage.chunk_index }, select: { content: true } });
        expect(chunk?.content.slice(passage.start, passage.end)).toBe(passage.quote);
        checked += 1;
      }
    }
  }
  return checked;
}
