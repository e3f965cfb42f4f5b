import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { removeStaleSpoolFiles } from '../src/http/body.js';
import { upload, waitForDocuments } from './support/documents.js';
import { startFakeModel, type FakeModel } from './support/fake-openai.js';
import { startTestServer, type TestServer, type TestUser } from './support/server.js';
import { createWorkspace } from './support/fixtures.js';

/**
 * The HTTP server's own limits (docs/api.md, "Server limits"), through raw sockets: the Host
 * header and the request target, the connection cap, the headers timeout, the minimum upload
 * rate, uploads spooled to disk as they arrive, and the send timeout. The limits are set small, so
 * that each acts within seconds; a chat model that answers a word a second makes an agent event
 * stream that outlasts the send timeout several times.
 */
const headersTimeoutSeconds = 2;
const sendTimeoutSeconds = 2;
const rateWindowSeconds = 2;
const maxConnections = 100;

let server: TestServer;
let model: FakeModel | undefined;
let user: TestUser;
let workspaceId: string;
let host: string;
let port: number;

/** Words of the slow model's answer, one a second: an event stream several times the send timeout long. */
const slowAnswer = 'The Zephyr-9 reactor is cooled by lead-bismuth [1].'.split(/(?= )/);

/** An OpenAI-compatible chat server that streams its answer slowly. */
async function startSlowModel(): Promise<string> {
  model = await startFakeModel((request, reply) => {
    reply.startStream();
    const next = () => {
      if (reply.gone) return;
      if (request.sent === slowAnswer.length) return reply.end();
      reply.token(slowAnswer[request.sent]!);
      setTimeout(next, 1_000);
    };
    next();
  }, 'slow-chat');
  return model.baseUrl;
}

beforeAll(async () => {
  const modelUrl = await startSlowModel();
  server = await startTestServer({
    OPENAI_BASE_URL: modelUrl,
    OPENAI_CHAT_MODEL: 'slow-chat',
    KB_AGENT_HEARTBEAT_SECONDS: '0.3',
    KB_HEADERS_TIMEOUT_SECONDS: String(headersTimeoutSeconds),
    KB_SEND_TIMEOUT_SECONDS: String(sendTimeoutSeconds),
    KB_MIN_UPLOAD_RATE_WINDOW_SECONDS: String(rateWindowSeconds),
    KB_MAX_CONNECTIONS: String(maxConnections),
    // The access log is asserted on.
    KB_LOG_LEVEL: 'info',
    // Room for the large answer the send timeout is tried with.
    KB_MAX_GRAPHQL_RESPONSE_BYTES: String(64 * 1024 * 1024),
  });
  host = new URL(server.url).hostname;
  port = Number(new URL(server.url).port);
  user = await server.createUser({ credits: 10 });
  workspaceId = (await createWorkspace(server, user.key, 'limits')).id;
}, 300_000);

afterAll(async () => {
  await server?.close();
  await model?.close();
});

type RawExchange = { socket: Socket; received: () => string; closed: Promise<number> };

/** A socket to the server that collects what it receives (or, with `read: false`, reads nothing). */
function rawSocket(options: { read?: boolean } = {}): Promise<RawExchange> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    let text = '';
    const opened = performance.now();
    const closed = new Promise<number>((done) => socket.once('close', () => done((performance.now() - opened) / 1000)));
    socket.on('error', () => undefined);
    if (options.read !== false) socket.on('data', (data: Buffer) => (text += data.toString('latin1')));
    socket.once('connect', () => resolve({ socket, received: () => text, closed }));
    socket.once('error', reject);
  });
}

/** One request on a new socket; the raw answer once the server closes it or `ms` pass. */
async function exchange(request: string, ms = 5_000): Promise<string> {
  const raw = await rawSocket();
  raw.socket.write(request);
  await Promise.race([raw.closed, new Promise((resolve) => setTimeout(resolve, ms))]);
  raw.socket.destroy();
  return raw.received();
}

/** Whether a raw answer has arrived whole: its last chunk, or as many bytes as its Content-Length. */
function isWhole(received: Buffer): boolean {
  const split = received.indexOf('\r\n\r\n');
  if (split < 0) return false;
  const head = received.toString('latin1', 0, split);
  const length = /^content-length: (\d+)$/im.exec(head);
  if (length) return received.length - split - 4 >= Number(length[1]);
  return received.subarray(-5).toString('latin1') === '0\r\n\r\n';
}

const statusOf = (answer: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
/** The body of a raw answer, its chunks joined when it was sent chunked. */
function bodyOf(answer: string): string {
  const split = answer.indexOf('\r\n\r\n');
  let rest = answer.slice(split + 4);
  if (!/^transfer-encoding: chunked$/im.test(answer.slice(0, split))) return rest;
  let body = '';
  for (;;) {
    const lineEnd = rest.indexOf('\r\n');
    const size = parseInt(rest.slice(0, lineEnd), 16);
    if (!size) return body;
    body += rest.slice(lineEnd + 2, lineEnd + 2 + size);
    rest = rest.slice(lineEnd + 2 + size + 2);
  }
}
const auth = () => `Authorization: Bearer ${user.key}`;

describe('the request target and the Host header', () => {
  it('takes the path from the request line: a Host holding a path is 400, logged and counted by the real path', async () => {
    const written: string[] = [];
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    let forged: string;
    let profile: string;
    try {
      forged = await exchange(`GET /v1/kb/workspaces HTTP/1.1\r\nHost: x/metrics?\r\n${auth()}\r\nX-Request-Id: forged-metrics\r\nConnection: close\r\n\r\n`);
      profile = await exchange(`GET /healthz HTTP/1.1\r\nHost: x/v1/user/me?\r\n${auth()}\r\nX-Request-Id: forged-profile\r\nConnection: close\r\n\r\n`);
    } finally {
      spy.mockRestore();
    }
    expect(statusOf(forged)).toBe(400);
    expect(JSON.parse(bodyOf(forged))).toMatchObject({ error: 'bad_request', message: expect.stringContaining('Host header') });
    expect(forged).not.toContain('# HELP');
    expect(statusOf(profile)).toBe(400);
    expect(profile).not.toContain(user.email);
    const lines = written.join('').split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line));
    expect(lines.find((line) => line.request_id === 'forged-metrics')).toMatchObject({ route: '/v1/kb/workspaces', path: '/v1/kb/workspaces', status: 400 });
    expect(lines.find((line) => line.request_id === 'forged-profile')).toMatchObject({ route: '/healthz', path: '/healthz', status: 400 });
    const metrics = (await server.request('GET', '/metrics')).text;
    // The series of one route and status, whatever the order of its labels (kb_instance among them).
    const count = (route: string) =>
      metrics
        .split('\n')
        .filter((line) => line.startsWith('kb_http_request_duration_seconds_count{'))
        .filter((line) => ['method="GET"', `route="${route}"`, 'status="400"', 'kb_instance='].every((label) => line.includes(label)))
        .map((line) => Number(line.split(' ').at(-1)));
    expect(count('/v1/kb/workspaces')).toEqual([1]);
    expect(count('/healthz')).toEqual([1]);
    expect(metrics).not.toMatch(/route="\/v1\/user\/me"/);
    for (const bad of ['a b', 'x@y', 'host:99999', '[zz::1]', 'x#y', '']) {
      const answer = await exchange(`GET /healthz HTTP/1.1\r\nHost: ${bad}\r\nConnection: close\r\n\r\n`);
      expect(statusOf(answer), bad).toBe(400);
    }
  });

  it('accepts host names, addresses and ports, and an absolute-form target by its path', async () => {
    for (const good of ['localhost', `127.0.0.1:${port}`, '[::1]:80', 'kb.example.com', 'under_score.local:8080']) {
      const answer = await exchange(`GET /healthz HTTP/1.1\r\nHost: ${good}\r\nConnection: close\r\n\r\n`);
      expect(statusOf(answer), good).toBe(200);
    }
    const absolute = await exchange(`GET http://kb.example.com/v1/user/me HTTP/1.1\r\nHost: ignored\r\n${auth()}\r\nConnection: close\r\n\r\n`);
    expect(statusOf(absolute)).toBe(200);
    expect(bodyOf(absolute)).toContain(user.email);
    const star = await exchange(`OPTIONS * HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
    expect(statusOf(star)).toBe(400);
    expect(JSON.parse(bodyOf(star))).toMatchObject({ error: 'bad_request', message: expect.stringContaining('request target') });
    // HTTP/1.1 requires a Host header; HTTP/1.0 does not.
    const hostless = await exchange(`GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n`);
    expect(statusOf(hostless)).toBe(400);
    expect(JSON.parse(bodyOf(hostless))).toEqual({ error: 'bad_request', message: 'the Host header is required' });
    expect(statusOf(await exchange(`GET /healthz HTTP/1.0\r\n\r\n`))).toBe(200);
  });
});

describe('requests the HTTP parser refuses', () => {
  /** The status, the headers (lower case) and the parsed body of a raw answer. */
  const parsed = (answer: string) => {
    const split = answer.indexOf('\r\n\r\n');
    const headers = answer.slice(0, split).toLowerCase();
    return { status: statusOf(answer), headers, body: JSON.parse(answer.slice(split + 4)) as { error: string; message: string } };
  };

  it('answers a header section over 16 KiB with 431 and the error body, and closes the connection', async () => {
    const answer = parsed(await exchange(`GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Padding: ${'a'.repeat(20_000)}\r\n\r\n`));
    expect(answer.status).toBe(431);
    expect(answer.body).toEqual({ error: 'headers_too_large', message: "the request's header section is over 16 KiB, the server's limit: send fewer or shorter headers" });
    expect(answer.headers).toMatch(/^content-type: application\/json$/m);
    expect(answer.headers).toMatch(/^x-request-id: [0-9a-f-]{36}$/m);
    expect(answer.headers).toMatch(/^connection: close$/m);
  });

  it('answers malformed HTTP with 400 naming the fault, after the answers to the requests before it on the connection', async () => {
    const malformed = parsed(await exchange('GET /healthz HTTP/1.1\r\nHost: localhost\r\nBad Header: x\r\n\r\n'));
    expect(malformed.status).toBe(400);
    expect(malformed.body.error).toBe('bad_request');
    expect(malformed.body.message).toMatch(/^the request is not valid HTTP\/1\.1: .+ \(HPE_[A-Z_]+\)$/);

    // A good request, then a broken one on the same connection: the first answer arrives whole.
    const answer = await exchange('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\nGET /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: x\r\n\r\n');
    const second = answer.indexOf('HTTP/1.1', 1);
    expect(statusOf(answer)).toBe(200);
    expect(answer.slice(0, second)).toContain('{"status":"ok"}');
    expect(parsed(answer.slice(second)).status).toBe(400);
    expect(parsed(answer.slice(second)).body.error).toBe('bad_request');
  });

  it(`answers headers that do not arrive within ${headersTimeoutSeconds} s with 408 and the error body`, async () => {
    const raw = await rawSocket();
    raw.socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n');
    const seconds = await Promise.race([raw.closed, new Promise<number>((resolve) => setTimeout(() => resolve(Infinity), 15_000))]);
    raw.socket.destroy();
    expect(seconds).toBeLessThan(headersTimeoutSeconds + 3);
    const answer = parsed(raw.received());
    expect(answer.status).toBe(408);
    expect(answer.body.error).toBe('request_timeout');
    expect(answer.body.message).toContain(`within ${headersTimeoutSeconds} s (KB_HEADERS_TIMEOUT_SECONDS)`);
  }, 30_000);
});

describe('slow and idle clients', () => {
  it(`closes a connection whose headers do not arrive within ${headersTimeoutSeconds} s, byte by byte or not at all`, async () => {
    const trickle = await rawSocket();
    const request = `GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Padding: ${'a'.repeat(200)}\r\n\r\n`;
    let sent = 0;
    const timer = setInterval(() => {
      if (sent < request.length && !trickle.socket.destroyed) trickle.socket.write(request[sent++]!);
    }, 100);
    const idle = await rawSocket();
    const [trickleSeconds, idleSeconds] = await Promise.all(
      [trickle, idle].map((raw) => Promise.race([raw.closed, new Promise<number>((resolve) => setTimeout(() => resolve(Infinity), 15_000))])),
    );
    clearInterval(timer);
    trickle.socket.destroy();
    idle.socket.destroy();
    expect(trickleSeconds).toBeLessThan(headersTimeoutSeconds + 3);
    expect(idleSeconds).toBeLessThan(headersTimeoutSeconds + 3);
  }, 30_000);

  it(`closes connections beyond ${maxConnections} as they arrive, and serves those it holds`, async () => {
    const sockets = await Promise.all(Array.from({ length: maxConnections + 10 }, () => rawSocket()));
    const early = await Promise.all(sockets.map((raw) => Promise.race([raw.closed.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 500))])));
    expect(early.filter(Boolean).length).toBeGreaterThanOrEqual(10);
    // A connection the server holds is answered while the others wait at the cap.
    const held = sockets.find((_, index) => !early[index])!;
    held.socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
    for (let waited = 0; waited < 5_000 && !held.received().includes('"ok"'); waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(statusOf(held.received())).toBe(200);
    for (const raw of sockets) raw.socket.destroy();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await fetch(new URL('/healthz', server.url))).status).toBe(200);
  });

  it('cuts uploads that trickle in slower than the minimum rate, over REST and GraphQL', async () => {
    const head = (target: string) =>
      `POST ${target} HTTP/1.1\r\nHost: localhost\r\n${auth()}\r\nContent-Type: multipart/form-data; boundary=slow\r\nContent-Length: 100000\r\n\r\n` +
      `--slow\r\nContent-Disposition: form-data; name="file"; filename="slow.txt"\r\nContent-Type: text/plain\r\n\r\n`;
    const clients = await Promise.all([rawSocket(), rawSocket()]);
    clients[0]!.socket.write(head(`/v1/kb/workspaces/${workspaceId}/documents`));
    clients[1]!.socket.write(head('/graphql'));
    // 50 bytes a second, for as long as the server keeps the connection.
    const timer = setInterval(() => {
      for (const raw of clients) if (!raw.socket.destroyed) raw.socket.write('a'.repeat(10));
    }, 200);
    const seconds = await Promise.all(clients.map((raw) => Promise.race([raw.closed, new Promise<number>((resolve) => setTimeout(() => resolve(Infinity), 20_000))])));
    clearInterval(timer);
    for (const raw of clients) raw.socket.destroy();
    expect(seconds[0]).toBeLessThan(rateWindowSeconds * 2 + 3);
    expect(seconds[1]).toBeLessThan(rateWindowSeconds * 2 + 3);
  }, 30_000);

  it('writes uploads to disk as they arrive: four unfinished 40 MB bodies (REST and GraphQL) hold no memory, and their files go with them', async () => {
    const spool = server.config.server.uploadSpoolDir;
    const chunk = randomBytes(1024 * 1024);
    const before = process.memoryUsage();
    const clients = await Promise.all(Array.from({ length: 4 }, () => rawSocket()));
    const head = (target: string, boundary: string) =>
      `POST ${target} HTTP/1.1\r\nHost: localhost\r\n${auth()}\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${45 * 1024 * 1024}\r\n\r\n`;
    const part = (boundary: string, disposition: string, content?: string) =>
      `--${boundary}\r\nContent-Disposition: form-data; ${disposition}\r\n${content === undefined ? 'Content-Type: application/octet-stream\r\n\r\n' : `\r\n${content}\r\n`}`;
    for (const [index, raw] of clients.entries()) {
      const boundary = `b${index}`;
      if (index < 2) {
        raw.socket.write(head(`/v1/kb/workspaces/${workspaceId}/documents`, boundary) + part(boundary, 'name="file"; filename="big.bin"'));
      } else {
        const operations = { query: 'mutation ($workspaceId: ID!, $files: [File!]!) { uploadDocuments(workspaceId: $workspaceId, files: $files) { id } }', variables: { workspaceId, files: [null] } };
        raw.socket.write(
          head('/graphql', boundary) +
            part(boundary, 'name="operations"', JSON.stringify(operations)) +
            part(boundary, 'name="map"', JSON.stringify({ 0: ['variables.files.0'] })) +
            part(boundary, 'name="0"; filename="big.bin"'),
        );
      }
    }
    await Promise.all(
      clients.map(async (raw) => {
        for (let sent = 0; sent < 40; sent++) {
          if (!raw.socket.write(chunk)) await new Promise((resolve) => raw.socket.once('drain', resolve));
        }
      }),
    );
    // The uploads go on, slowly but above the minimum rate, so that they stay open and unfinished.
    const trickle = setInterval(() => {
      for (const raw of clients) if (!raw.socket.destroyed) raw.socket.write(chunk.subarray(0, 8 * 1024));
    }, 250);
    // Wait until what was sent has arrived (the spool files hold nearly all of it), 10 s at most.
    const spooled = async () => (await readdir(spool).catch(() => [] as string[])).filter((name) => name.startsWith('upload-'));
    const spooledBytes = async () => (await Promise.all((await spooled()).map((name) => stat(path.join(spool, name)).then((info) => info.size, () => 0)))).reduce((sum, size) => sum + size, 0);
    for (let waited = 0; waited < 10_000 && (await spooledBytes()) < 4 * 39 * 1024 * 1024; waited += 100) await new Promise((resolve) => setTimeout(resolve, 100));
    const during = process.memoryUsage();
    // 160 MB arrived and nothing was finished: held in memory, array buffers alone would have grown by that much.
    expect(during.arrayBuffers - before.arrayBuffers).toBeLessThan(60 * 1024 * 1024);
    expect((await spooled()).length).toBe(4);
    expect(clients.every((raw) => !raw.socket.destroyed)).toBe(true);
    clearInterval(trickle);
    for (const raw of clients) raw.socket.destroy();
    for (let waited = 0; waited < 10_000 && (await spooled()).length > 0; waited += 100) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await spooled()).toEqual([]);
  }, 60_000);
});

describe('spool files left over', () => {
  it('are removed when older than a request can last, and nothing else is', async () => {
    const directory = await mkdtemp(path.join(tmpdir(), 'kb-spool-'));
    try {
      const hoursAgo = new Date(Date.now() - 2 * 3600_000);
      for (const name of ['upload-left', 'upload-arriving', 'notes.txt']) await writeFile(path.join(directory, name), 'x');
      await utimes(path.join(directory, 'upload-left'), hoursAgo, hoursAgo);
      await utimes(path.join(directory, 'notes.txt'), hoursAgo, hoursAgo);
      expect(await removeStaleSpoolFiles(directory, 3600_000)).toBe(1);
      expect((await readdir(directory)).sort()).toEqual(['notes.txt', 'upload-arriving']);
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});

describe('the send timeout', () => {
  let documentId: string;
  let listingId: string;
  const size = 24 * 1024 * 1024;

  beforeAll(async () => {
    // Kept as uploaded, though it cannot be read: a PDF header, then noise.
    const bytes = Buffer.concat([Buffer.from('%PDF-1.7\n'), randomBytes(size - 9)]);
    const uploaded = await upload(server, user.key, workspaceId, [{ name: 'noise.pdf', bytes }]);
    documentId = uploaded.body[0].id;
    // 40 documents with 60 KB of metadata each, for a large answer.
    listingId = (await createWorkspace(server, user.key, 'listing')).id;
    const metadata = JSON.stringify({ note: 'n'.repeat(60_000) });
    const listed: string[] = [];
    for (let batch = 0; batch < 2; batch++) {
      const files = Array.from({ length: 20 }, (_, index) => ({ name: `note-${batch}-${index}.txt`, bytes: `Note ${batch}.${index}: the Zephyr-9 research reactor is cooled by a liquid lead-bismuth eutectic.` }));
      const batchUpload = await upload(server, user.key, listingId, files, metadata);
      expect(batchUpload.status).toBe(202);
      listed.push(...batchUpload.body.map((document: { id: string }) => document.id));
    }
    await waitForDocuments(server, user.key, [documentId, ...listed]);
  }, 300_000);

  const download = () => `GET /v1/kb/documents/${documentId}/file?workspace_id=${workspaceId} HTTP/1.1\r\nHost: localhost\r\n${auth()}\r\n\r\n`;

  /** Reads `raw` slowly (`bytes` every `ms`) until `done` says the answer is whole or 40 s pass; whether the server kept the connection. */
  async function readSlowly(raw: RawExchange, bytes: number, ms: number, done: (received: Buffer) => boolean): Promise<{ received: Buffer; cut: boolean }> {
    const parts: Buffer[] = [];
    const started = performance.now();
    for (;;) {
      let chunk: Buffer | null;
      let taken = 0;
      while (taken < bytes && (chunk = raw.socket.read(Math.min(64 * 1024, bytes - taken)) as Buffer | null) !== null) {
        parts.push(chunk);
        taken += chunk.length;
      }
      if (taken < bytes) {
        const rest = raw.socket.read() as Buffer | null;
        if (rest) parts.push(rest);
      }
      const received = Buffer.concat(parts);
      if (done(received)) return { received, cut: false };
      if (raw.socket.destroyed || raw.socket.readableEnded || performance.now() - started > 40_000) return { received, cut: true };
      await new Promise((resolve) => setTimeout(resolve, ms));
    }
  }

  it(`closes a connection whose client reads nothing of its answer for ${sendTimeoutSeconds} s`, async () => {
    const raw = await rawSocket({ read: false });
    raw.socket.write(download());
    await new Promise((resolve) => setTimeout(resolve, (sendTimeoutSeconds + 4) * 1000));
    // The client reads at last: what the kernel held of the answer, and then the end of the connection.
    let received = 0;
    raw.socket.on('data', (data: Buffer) => (received += data.length));
    const seconds = await Promise.race([raw.closed, new Promise<number>((resolve) => setTimeout(() => resolve(Infinity), 20_000))]);
    raw.socket.destroy();
    expect(seconds).toBeLessThan(Infinity);
    expect(received).toBeLessThan(size);
  }, 40_000);

  it('never cuts a client that reads slowly but keeps reading, a streamed file or one large body', async () => {
    const file = await rawSocket({ read: false });
    file.socket.write(download());
    // About 4 MB a second: six seconds for the file, three times the send timeout.
    const fileRead = await readSlowly(file, 64 * 1024, 15, (received) => received.length >= size);
    file.socket.destroy();
    expect(fileRead.cut).toBe(false);

    // One GraphQL answer of about 24 MB (the 40 documents' metadata, ten times over), written to
    // the socket at once: what the kernel cannot take waits in one write that goes out in parts.
    const query = `{ ${Array.from({ length: 10 }, (_, index) => `a${index}: documents(workspaceId: "${listingId}", first: 100) { edges { node { metadata } } }`).join(' ')} }`;
    const body = JSON.stringify({ query });
    const big = await rawSocket({ read: false });
    big.socket.write(
      `POST /graphql HTTP/1.1\r\nHost: localhost\r\n${auth()}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
    // About 4 MB a second: six seconds, three times the send timeout.
    const bigRead = await readSlowly(big, 128 * 1024, 30, isWhole);
    big.socket.destroy();
    expect(bigRead.cut).toBe(false);
    const answer = bigRead.received.toString('utf8');
    expect(statusOf(answer)).toBe(200);
    const result = JSON.parse(bodyOf(answer));
    expect(result.errors).toBeUndefined();
    expect(result.data.a9.edges).toHaveLength(40);
    expect(bigRead.received.length).toBeGreaterThan(20 * 1024 * 1024);
  }, 90_000);

  it('never cuts an event stream whose client keeps reading, however long it lasts', async () => {
    const raw = await rawSocket({ read: false });
    const body = JSON.stringify({ message: 'What cools the Zephyr-9 reactor?', workspaceIds: [listingId] });
    raw.socket.write(
      `POST /agent/stream HTTP/1.1\r\nHost: localhost\r\n${auth()}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
    // The client looks at the stream every 1.5 s, taking what has come, for the stream's whole length.
    const started = performance.now();
    const { received, cut } = await readSlowly(raw, 1024 * 1024, 1_500, isWhole);
    raw.socket.destroy();
    const text = received.toString('utf8');
    expect(cut).toBe(false);
    expect(statusOf(text)).toBe(200);
    expect(text).toContain('"type":"done"');
    expect(text).toContain(': heartbeat');
    expect((performance.now() - started) / 1000).toBeGreaterThan(sendTimeoutSeconds * 2);
  }, 60_000);
});
