import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The tests' OpenAI-compatible server (chat completions and embeddings alike): it takes each request's JSON body and hands it, with a
 * reply that speaks the wire format (a chat completion, a streamed one chunk by chunk, an
 * embeddings list, an error), to the test's own handler, which decides what the model says and
 * how it misbehaves. The service talks to it through the `openai` SDK as it would to a real one.
 */
export type ModelRequest = {
  /** The path asked for: `/v1/chat/completions`, `/v1/embeddings`. */
  path: string;
  /** The request as the SDK sent it: the tests read whichever fields they assert on. */
  body: any;
  /** The chat messages' contents joined, for handlers that answer from the prompt. */
  prompt: string;
  /** Whether the client went away before the reply ended. */
  aborted: boolean;
  /** Chunks of a streamed reply sent so far. */
  sent: number;
};

export type ModelReply = {
  /** Whether the client is gone (a streamed reply stops then). */
  readonly gone: boolean;
  /** A whole chat completion whose message is `content`. */
  completion(content: string): void;
  /** Starts a streamed chat completion; `token` sends a chunk of it, `end` the `[DONE]` line. */
  startStream(): void;
  token(content: string): void;
  end(): void;
  /** Any JSON answer, or a body sent as it is (a string). */
  json(status: number, payload: unknown): void;
  /** The response itself, for misbehaviour the methods above cannot express. */
  raw: ServerResponse;
};

export type FakeModel = { baseUrl: string; requests: ModelRequest[]; close(): Promise<void> };

export async function startFakeModel(handler: (request: ModelRequest, reply: ModelReply) => void | Promise<void>, model = 'fake-chat'): Promise<FakeModel> {
  const requests: ModelRequest[] = [];
  const chunk = (content: string) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
  const server = createServer((request, response) => {
    let text = '';
    request.on('data', (part) => (text += part));
    request.on('end', () => {
      const body = JSON.parse(text || '{}');
      const messages: { content: string }[] = Array.isArray(body.messages) ? body.messages : [];
      const record: ModelRequest = { path: request.url ?? '', body, prompt: messages.map((message) => message.content).join('\n'), aborted: false, sent: 0 };
      requests.push(record);
      response.on('close', () => {
        if (!response.writableFinished) record.aborted = true;
      });
      const reply: ModelReply = {
        get gone() {
          return record.aborted || response.destroyed;
        },
        completion(content) {
          reply.json(200, { id: 'c0', object: 'chat.completion', created: 1, model, choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }] });
        },
        startStream() {
          response.writeHead(200, { 'content-type': 'text/event-stream' });
        },
        token(content) {
          response.write(chunk(content));
          record.sent += 1;
        },
        end() {
          response.end('data: [DONE]\n\n');
        },
        json(status, payload) {
          response.writeHead(status, { 'content-type': 'application/json' });
          response.end(typeof payload === 'string' ? payload : JSON.stringify(payload));
        },
        raw: response,
      };
      void handler(record, reply);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // A reply a handler holds back (a slow model) would keep the server open.
        server.closeAllConnections();
      }),
  };
}
