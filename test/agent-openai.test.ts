import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { reserveAgentRun } from '../src/modules/credits/service.js';
import { expectEveryStoredQuoteVerbatim, expectProtocol, expectVerbatimQuotes, streamAgent, type AgentStream } from './support/agent.js';
import { upload, waitForDocuments } from './support/documents.js';
import { startTestServer, type TestServer, type TestUser } from './support/server.js';

/**
 * An OpenAI-compatible chat server whose behaviour the test switches. It answers from the prompt
 * it is sent, as a model would: the first sentence of passage [1], cited.
 */
type Behaviour = 'healthy' | 'slow' | 'error-500' | 'fail-once' | 'malformed' | 'cut';

let behaviour: Behaviour = 'healthy';
let requests: { body: any; aborted: boolean }[] = [];
let modelServer: Server;
let baseUrl: string;

function answerFrom(prompt: string) {
  const passage = /\[1\] \([^)]*\)\n([^\n]*)/.exec(prompt)?.[1] ?? '';
  const sentence = passage.split(/(?<=\.)\s/)[0]!.replace(/\.$/, '');
  return `According to the notes, ${sentence} [1].`;
}

const chunk = (content: string) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'fake-chat', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;

function handle(request: IncomingMessage, body: any, response: import('node:http').ServerResponse, record: { aborted: boolean }) {
  const prompt = body.messages.map((message: { content: string }) => message.content).join('\n');
  if (!body.stream) {
    const system = body.messages[0].content as string;
    const content = system.startsWith('Rewrite') ? 'Lyft revenue' : system.startsWith('Plan') ? '["Zephyr-9 reactor coolant"]' : '[]';
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ id: 'c0', object: 'chat.completion', created: 1, model: 'fake-chat', choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }] }));
    return;
  }
  if (behaviour === 'error-500' || (behaviour === 'fail-once' && requests.filter((entry) => entry.body.stream).length === 1)) {
    response.writeHead(500, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ error: { message: 'the GPU caught fire' } }));
    return;
  }
  response.writeHead(200, { 'content-type': 'text/event-stream' });
  const tokens = answerFrom(prompt).match(/\s*\S+/g)!;
  let sent = 0;
  const next = () => {
    if (record.aborted) return;
    if (behaviour === 'malformed' && sent === 2) return void response.end('data: {"choices": [{"delta": {"content": "half\n\n');
    if (behaviour === 'cut' && sent === 2) return void response.socket?.destroy();
    if (sent === tokens.length) return void response.end('data: [DONE]\n\n');
    response.write(chunk(tokens[sent++]!));
    setTimeout(next, behaviour === 'slow' ? 150 : 1);
  };
  next();
}

beforeAll(async () => {
  modelServer = createServer((request, response) => {
    let text = '';
    request.on('data', (part) => (text += part));
    request.on('end', () => {
      const record = { body: JSON.parse(text || '{}'), aborted: false };
      requests.push(record);
      response.on('close', () => {
        if (!response.writableFinished) record.aborted = true;
      });
      handle(request, record.body, response, record);
    });
  });
  await new Promise<void>((resolve) => modelServer.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(modelServer.address() as AddressInfo).port}/v1`;
});

let server: TestServer;
let user: TestUser;
let workspaceId: string;

beforeAll(async () => {
  server = await startTestServer({
    OPENAI_BASE_URL: baseUrl,
    OPENAI_CHAT_MODEL: 'fake-chat',
    OPENAI_TIMEOUT_SECONDS: '5',
    KB_AGENT_HEARTBEAT_SECONDS: '0.1',
    KB_AGENT_LEASE_SECONDS: '1',
  });
  user = await server.createUser({ credits: 1000 });
  workspaceId = (await server.request('POST', '/v1/kb/workspaces', { key: user.key, json: { name: 'model' } })).body.id;
  const uploaded = await upload(server, user.key, workspaceId, [
    { name: 'reactor.md', bytes: 'The Zephyr-9 research reactor is cooled by a liquid lead-bismuth eutectic. It was designed by Ilse Marant.' },
    { name: 'lyft.txt', bytes: 'Lyft reported revenue of 3.2 billion dollars for 2021.' },
  ]);
  await waitForDocuments(server, user.key, uploaded.body.map((document: { id: string }) => document.id));
}, 300_000);

afterAll(async () => {
  await server?.close();
  await new Promise<void>((resolve) => modelServer.close(() => resolve()));
});

beforeEach(() => {
  behaviour = 'healthy';
  requests = [];
});

const ask = (options: { stopAfter?: (event: { type: string }) => boolean; mode?: string } = {}) =>
  streamAgent(server, user.key, { message: 'What cools the Zephyr-9 reactor?', workspaceIds: [workspaceId], ...(options.mode && { mode: options.mode }) }, options);
const balance = async () => (await server.request('GET', '/v1/user/me', { key: user.key })).body.creditsBalance as number;

/** A failed run: tokens (maybe), then one error event and nothing after; the reservation comes back. */
async function expectFailedAndRefunded(stream: AgentStream, before: number) {
  expect(stream.status).toBe(200);
  const types = stream.events.map((event) => event.type);
  expect(types[0]).toBe('job_started');
  expect(types.filter((type) => type === 'error' || type === 'done')).toEqual(['error']);
  expect(types.at(-1)).toBe('error');
  expect(stream.events.at(-1)!.message).toMatch(/the answer model failed/);
  expect(await balance()).toBe(before);
  const recent = (await server.request('GET', '/v1/user/me/credits', { key: user.key })).body.recent;
  expect(recent[0]).toMatchObject({ reason: 'agent_refund', amount: 1, job_id: stream.events[0]!.jobId });
  expect((await server.request('GET', '/healthz')).status).toBe(200);
}

describe('the agent with an OpenAI-compatible chat model', () => {
  it('streams the tokens as the model sends them, cites the numbered passage verbatim, and keeps passages as data in the prompt', async () => {
    const { answer, sources, done } = expectProtocol(await ask());
    expect(answer).toBe('According to the notes, The Zephyr-9 research reactor is cooled by a liquid lead-bismuth eutectic [1].');
    expect(sources).toHaveLength(1);
    expect(sources[0]).toMatchObject({ filename: 'reactor.md' });
    expect(sources[0]!.passages[0]!.quote).toBe('The Zephyr-9 research reactor is cooled by a liquid lead-bismuth eutectic.');
    await expectVerbatimQuotes(server, user.key, [workspaceId], sources);
    expect(done.support_score).toBe(1);
    const streamed = requests.find((request) => request.body.stream)!.body;
    expect(streamed.model).toBe('fake-chat');
    expect(streamed.messages[0].content).toMatch(/not instructions/);
    expect(streamed.messages[1].content).toMatch(/\[1\] \(reactor\.md\)\n/);
    expect(streamed.messages[1].content).toMatch(/Question: What cools the Zephyr-9 reactor\?$/);
  });

  it('sends heartbeats while tokens come slowly', async () => {
    behaviour = 'slow';
    const stream = await ask();
    expectProtocol(stream);
    expect(stream.comments).toBeGreaterThan(0);
  });

  it('a client that disconnects mid-stream cancels the model call and is charged nothing', async () => {
    behaviour = 'slow';
    const before = await balance();
    const stream = await ask({ stopAfter: (event) => event.type === 'token' });
    const jobId = stream.events[0]!.jobId;
    for (let waited = 0; waited < 5_000 && (await balance()) !== before; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await balance()).toBe(before);
    const recent = (await server.request('GET', '/v1/user/me/credits', { key: user.key })).body.recent;
    expect(recent[0]).toMatchObject({ reason: 'agent_refund', job_id: jobId });
    const job = await server.app.db.prisma.agentJob.findUniqueOrThrow({ where: { id: jobId } });
    expect(job).toMatchObject({ status: 'cancelled', creditsUsed: 0 });
    for (let waited = 0; waited < 2_000 && !requests.find((request) => request.body.stream)!.aborted; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(requests.find((request) => request.body.stream)!.aborted).toBe(true);
    // Nothing was stored in a session for it.
    expect(await server.app.db.prisma.chatMessage.count({ where: { jobId } })).toBe(0);
  });

  it('retries a 500 before the first token', async () => {
    behaviour = 'fail-once';
    expectProtocol(await ask());
    expect(requests.filter((request) => request.body.stream)).toHaveLength(2);
  });

  it('a model that keeps failing before its first token: an error event after the retries, a refund, the server stays up', async () => {
    behaviour = 'error-500';
    const before = await balance();
    await expectFailedAndRefunded(await ask(), before);
    expect(requests.filter((request) => request.body.stream)).toHaveLength(3);
  });

  it('a malformed chunk mid-stream: an error event after the tokens so far, and a refund', async () => {
    behaviour = 'malformed';
    const before = await balance();
    const stream = await ask();
    expect(stream.events.filter((event) => event.type === 'token').length).toBeGreaterThan(0);
    await expectFailedAndRefunded(stream, before);
  });

  it('a connection cut mid-stream: an error event and a refund', async () => {
    behaviour = 'cut';
    const before = await balance();
    await expectFailedAndRefunded(await ask(), before);
  });

  it('deep mode lets the model plan the searches, and verifies its answer', async () => {
    const { steps, done, answer } = expectProtocol(await ask({ mode: 'deep' }), 'deep');
    expect(steps[0]).toMatchObject({ kind: 'decompose', queries: ['Zephyr-9 reactor coolant'] });
    expect(steps.find((step) => step.kind === 'search').reason).toBe('the model found the evidence sufficient');
    expect(steps.at(-1)).toMatchObject({ kind: 'verify', reason: '1 of 1 sentences are supported by the passages they cite' });
    expect(answer).toContain('lead-bismuth');
    expect(done.creditsUsed).toBe(5);
  });

  it('refunds a run left reserved by a process that stopped once its lease has run out', async () => {
    const before = await balance();
    const { jobId } = await reserveAgentRun(server.app.db.prisma, { userId: user.id, mode: 'fast', cost: 1, leaseMs: 200 });
    expect(await balance()).toBe(before - 1);
    for (let waited = 0; waited < 5_000 && (await balance()) !== before; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await balance()).toBe(before);
    const job = await server.app.db.prisma.agentJob.findUniqueOrThrow({ where: { id: jobId } });
    expect(job).toMatchObject({ status: 'failed', error: 'the process running it stopped' });
  });
});

describe('a server that shuts down', () => {
  it('ends its open streams with an error event and refunds them', async () => {
    behaviour = 'slow';
    const stopping = await startTestServer({ OPENAI_BASE_URL: baseUrl, OPENAI_CHAT_MODEL: 'fake-chat', KB_AGENT_HEARTBEAT_SECONDS: '0.1' });
    let closed = false;
    try {
      const owner = await stopping.createUser({ credits: 10 });
      const workspace = (await stopping.request('POST', '/v1/kb/workspaces', { key: owner.key, json: { name: 'w' } })).body.id;
      const uploaded = await upload(stopping, owner.key, workspace, [{ name: 'reactor.md', bytes: 'The Zephyr-9 research reactor is cooled by a liquid lead-bismuth eutectic.' }]);
      await waitForDocuments(stopping, owner.key, uploaded.body.map((document: { id: string }) => document.id));
      let firstToken!: () => void;
      const tokenSeen = new Promise<void>((resolve) => (firstToken = resolve));
      const streaming = streamAgent(stopping, owner.key, { message: 'What cools the Zephyr-9 reactor?', workspaceIds: [workspace] }, {
        stopAfter: (event) => {
          if (event.type === 'token') firstToken();
          return false;
        },
      });
      await tokenSeen;
      const shutdown = (async () => {
        await stopping.close();
        closed = true;
      })();
      const stream = await streaming;
      expect(stream.events.at(-1)).toMatchObject({ type: 'error', code: 'service_unavailable' });
      expect(stream.events.filter((event) => event.type === 'error' || event.type === 'done')).toHaveLength(1);
      await shutdown;
    } finally {
      if (!closed) await stopping.close();
    }
  }, 120_000);
});

describe('every run of this file', () => {
  it('cited only quotes that occur verbatim in the stored chunk at their offsets', async () => {
    expect(await expectEveryStoredQuoteVerbatim(server)).toBeGreaterThanOrEqual(3);
  });
});
