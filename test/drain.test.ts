import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer, type TestUser } from './support/server.js';
import { createWorkspace } from './support/fixtures.js';

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// SIGTERM's way out (kb serve calls close({ drain: true })): the load balancer is told first, then
// what is in flight finishes.
describe('a server that drains', () => {
  let server: TestServer;
  let user: TestUser;

  beforeAll(async () => {
    server = await startTestServer({ KB_DRAIN_SECONDS: '30', KB_DRAIN_NOTICE_SECONDS: '1' });
    user = await server.createUser();
  }, 60_000);

  afterAll(async () => {
    await server?.close();
  });

  it('says it is leaving on /readyz, takes no new connections, and finishes an upload it was receiving', async () => {
    const workspace = (await createWorkspace(server, user.key, 'drained')).id;
    const url = new URL(server.url);
    const boundary = `drain-${randomUUID()}`;
    const content = 'The grey heron stands still in the shallows and waits for a fish. '.repeat(4_000);
    const head = `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="slow.txt"\r\ncontent-type: text/plain\r\n\r\n`;
    const tail = `\r\n--${boundary}--\r\n`;
    const upload = http.request({
      host: url.hostname,
      port: url.port,
      method: 'POST',
      path: `/v1/kb/workspaces/${workspace}/documents`,
      headers: {
        authorization: `Bearer ${user.key}`,
        'content-type': `multipart/form-data; boundary=${boundary}`,
        'content-length': String(Buffer.byteLength(head + content + tail)),
      },
    });
    const answered = new Promise<{ status: number; connection: string | undefined; body: any }>((resolve, reject) => {
      upload.on('error', reject);
      upload.on('response', (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (part) => (text += part));
        response.on('end', () => resolve({ status: response.statusCode!, connection: response.headers.connection, body: JSON.parse(text) }));
      });
    });
    // Half the body, then the server is told to stop.
    const half = content.length / 2;
    upload.write(head + content.slice(0, half));
    await pause(300);
    const closing = server.app.close({ drain: true });

    // The notice: still answering, but not ready, so a load balancer's health check takes it out.
    const readiness = await fetch(new URL('/readyz', server.url));
    expect(readiness.status).toBe(503);
    expect(readiness.headers.get('connection')).toBe('close');
    expect(await readiness.json()).toEqual({ error: 'service_unavailable', message: expect.stringContaining('shutting down') });

    // After it: no new connection is accepted.
    await pause(1_500);
    await expect(fetch(new URL('/healthz', server.url))).rejects.toThrow();

    // The upload in flight is received whole and stored.
    upload.end(content.slice(half) + tail);
    const answer = await answered;
    expect(answer.status).toBe(202);
    expect(answer.connection).toBe('close');
    expect(answer.body).toEqual([expect.objectContaining({ filename: 'slow.txt', size_bytes: Buffer.byteLength(content) })]);
    await closing;
  }, 60_000);
});
