import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { reserveAgentRun } from '../src/modules/credits/service.js';
import { expectEveryStoredQuoteVerbatim, expectProtocol, expectVerbatimQuotes, streamAgent, type AgentEvent, type AgentStream } from './support/agent.js';
import { upload, waitForDocuments } from './support/documents.js';
import { startFakeModel, type FakeModel, type ModelReply, type ModelRequest } from './support/fake-openai.js';
import { startTestServer, type TestServer, type TestUser } from './support/server.js';
import { createWorkspace } from './support/fixtures.js';

/**
 * An OpenAI-compatible chat server whose behaviour the test switches. It answers from the prompt
 * it is sent, as a model would: the first sentence of passage [1], cited. Like a real server it
 * stops a completion at its `max_tokens` (one token a chunk); without one, 'endless' and
 * 'repeating' never stop.
 */
type Behaviour =
  | 'healthy'
  | 'slow'
  | 'error-500'
  | 'fail-once'
  | 'malformed'
  | 'cut'
  | 'endless'
  | 'endless-slow'
  | 'repeating'
  | 'invented-citation'
  | 'stall-plans'
  | 'plan-prose'
  | 'plan-wrong-shape'
  | 'plan-empty'
  | 'empty-answer';

let behaviour: Behaviour = 'healthy';
let requests: ModelRequest[] = [];
let model: FakeModel;
let baseUrl: string;

function answerFrom(prompt: string) {
  const passage = /\[1\] \([^)]*\)\n([^\n]*)/.exec(prompt)?.[1] ?? '';
  const sentence = passage.split(/(?<=\.)\s/)[0]!.replace(/\.$/, '');
  return `According to the notes, ${sentence} [1].`;
}

const plans: Partial<Record<Behaviour, string | null>> = {
  'plan-prose': 'Sure! I would look for what cools the reactor, then for its designer.',
  'plan-wrong-shape': '[{"query": "Zephyr-9 reactor coolant"}]',
  'plan-empty': '',
};

function tokensFor(prompt: string): (sent: number) => string | undefined {
  if (behaviour === 'endless' || behaviour === 'endless-slow') return (sent) => ` word${sent}`;
  if (behaviour === 'repeating') return (sent) => ' The Zephyr-9 research reactor is cooled by a liquid lead-bismuth eutectic [1].'.match(/\s*\S+/g)![sent % 12];
  const answer =
    behaviour === 'empty-answer'
      ? ['', ' ']
      : behaviour === 'invented-citation'
      ? ['According', ' to', ' the', ' notes,', ' the', ' reactor', ' is', ' cooled', ' by', ' a', ' lead-bismuth', ' eutectic', ' [1][7].', ' It', ' was', ' built', ' on', ' Mars', ' [', '9', '].', ' Lead [1, 8] is heavy.']
      : answerFrom(prompt).match(/\s*\S+/g)!;
  return (sent) => answer[sent];
}

function handle(record: ModelRequest, reply: ModelReply) {
  const { body, prompt } = record;
  if (!body.stream) {
    if (behaviour === 'stall-plans') return;
    const system = body.messages[0].content as string;
    const content = behaviour in plans && !system.startsWith('Rewrite') ? plans[behaviour] : system.startsWith('Rewrite') ? 'Lyft revenue' : system.startsWith('Plan') ? '["Zephyr-9 reactor coolant"]' : '[]';
    return reply.completion(content ?? '');
  }
  if (behaviour === 'error-500' || (behaviour === 'fail-once' && requests.filter((entry) => entry.body.stream).length === 1)) {
    return reply.json(500, { error: { message: 'the GPU caught fire' } });
  }
  reply.startStream();
  const tokenAt = tokensFor(prompt);
  const next = () => {
    if (record.aborted) return;
    if (behaviour === 'malformed' && record.sent === 10) return void reply.raw.end('data: {"choices": [{"delta": {"content": "half\n\n');
    if (behaviour === 'cut' && record.sent === 10) return void reply.raw.socket?.destroy();
    const token = tokenAt(record.sent);
    if (token === undefined || record.sent === body.max_tokens) return reply.end();
    reply.token(token);
    setTimeout(next, behaviour === 'slow' ? 150 : behaviour === 'endless-slow' ? 100 : 1);
  };
  next();
}

beforeAll(async () => {
  model = await startFakeModel(handle);
  requests = model.requests;
  baseUrl = model.baseUrl;
});

let server: TestServer;
let user: TestUser;
let workspaceId: string;

beforeAll(async () => {
  server = await startTestServer({
    OPENAI_BASE_URL: baseUrl,
    OPENAI_CHAT_MODEL: 'fake-chat',
    OPENAI_TIMEOUT_SECONDS: '5',
    OPENAI_MAX_ANSWER_TOKENS: '60',
    OPENAI_MAX_PLAN_TOKENS: '20',
    OPENAI_GENERATION_SECONDS: '4',
    KB_AGENT_HEARTBEAT_SECONDS: '0.1',
    KB_AGENT_LEASE_SECONDS: '1',
  });
  user = await server.createUser({ credits: 1000 });
  workspaceId = (await createWorkspace(server, user.key, 'model')).id;
  const uploaded = await upload(server, user.key, workspaceId, [
    { name: 'reactor.md', bytes: 'The Zephyr-9 research reactor is cooled by a liquid lead-bismuth eutectic. It was designed by Ilse Marant.' },
    { name: 'lyft.txt', bytes: 'Lyft reported revenue of 3.2 billion dollars for 2021.' },
  ]);
  await waitForDocuments(server, user.key, uploaded.body.map((document: { id: string }) => document.id));
}, 300_000);

afterAll(async () => {
  await server?.close();
  await model.close();
});

beforeEach(() => {
  behaviour = 'healthy';
  requests.length = 0;
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

/** A finished run: charged its mode's cost, as an extractive answer is, and stored under its job. */
async function expectCharged(stream: AgentStream, done: AgentEvent, before: number, cost: number) {
  expect(done.creditsUsed).toBe(cost);
  expect(await balance()).toBe(before - cost);
  const job = await server.app.db.prisma.agentJob.findUniqueOrThrow({ where: { id: stream.events[0]!.jobId } });
  expect(job).toMatchObject({ status: 'done', creditsUsed: cost });
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
    expect(streamed.max_tokens).toBe(60);
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

  it('asks for at most OPENAI_MAX_PLAN_TOKENS tokens of each plan', async () => {
    expectProtocol(await ask({ mode: 'deep' }), 'deep');
    const plans = requests.filter((request) => !request.body.stream);
    expect(plans.length).toBeGreaterThan(0);
    for (const plan of plans) expect(plan.body.max_tokens).toBe(20);
  });

  it('an answer that would never end stops at OPENAI_MAX_ANSWER_TOKENS, and is charged as any answer', async () => {
    behaviour = 'endless';
    const before = await balance();
    const stream = await ask();
    const { answer, done } = expectProtocol(stream);
    expect(requests.find((request) => request.body.stream)!.body.max_tokens).toBe(60);
    expect(answer.match(/word\d+/g)).toHaveLength(60);
    await expectCharged(stream, done, before, 1);
  });

  it('an answer that starts repeating itself ends once the repeat is seen, and the model is stopped', async () => {
    behaviour = 'repeating';
    const before = await balance();
    const stream = await ask();
    const { answer, done } = expectProtocol(stream);
    const sentence = 'The Zephyr-9 research reactor is cooled by a liquid lead-bismuth eutectic [1].';
    expect(answer.startsWith(sentence)).toBe(true);
    // Streamed as written: the repeated span (8 words, and the word being written) is all of the repeat shown.
    expect(answer.slice(sentence.length).trim().split(/\s+/).length).toBeLessThanOrEqual(9);
    const streamed = requests.find((request) => request.body.stream)!;
    // The repeat is seen 8 words into its second copy; the model is not left to write 60 tokens.
    expect(streamed.sent).toBeLessThan(30);
    for (let waited = 0; waited < 2_000 && !streamed.aborted; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(streamed.aborted).toBe(true);
    await expectCharged(stream, done, before, 1);
    // What the client read is what was stored.
    const stored = await server.app.db.prisma.chatMessage.findFirstOrThrow({ where: { jobId: done.jobId } });
    expect(stored.content).toBe(answer);
  });

  it('a model that ends its answer without a word gives way to the extractive answer, charged as any answer', async () => {
    behaviour = 'empty-answer';
    const { answer, sources, done } = expectProtocol(await ask());
    expect(answer).toBe('The Zephyr-9 research reactor is cooled by a liquid lead-bismuth eutectic [1].');
    expect(sources[0]).toMatchObject({ filename: 'reactor.md' });
    expect(done).toMatchObject({ type: 'done', creditsUsed: 1 });
  });

  it('citations of passages that do not exist are dropped from the answer and its sources', async () => {
    behaviour = 'invented-citation';
    const { answer, sources } = expectProtocol(await ask());
    expect(answer).toBe('According to the notes, the reactor is cooled by a lead-bismuth eutectic [1]. It was built on Mars. Lead [1] is heavy.');
    expect(sources.flatMap((source) => source.passages.map((passage) => passage.citation))).toEqual([1]);
  });

  it("the run's generation budget running out mid-answer ends it as written so far, with the normal events and charge", async () => {
    behaviour = 'endless-slow';
    const before = await balance();
    const started = performance.now();
    const stream = await ask();
    const { answer, done } = expectProtocol(stream);
    const seconds = (performance.now() - started) / 1000;
    // 4 s of generation at a token every 100 ms: about 40 words, far fewer than the 60 allowed.
    const words = answer.match(/word\d+/g)!.length;
    expect(words).toBeGreaterThan(10);
    expect(words).toBeLessThan(55);
    expect(seconds).toBeLessThan(10);
    const streamed = requests.find((request) => request.body.stream)!;
    for (let waited = 0; waited < 2_000 && !streamed.aborted; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(streamed.aborted).toBe(true);
    await expectCharged(stream, done, before, 1);
  });

  it('plans that take the whole generation budget give way to the extractive ones, and the answer too', async () => {
    behaviour = 'stall-plans';
    const before = await balance();
    const stream = await ask({ mode: 'deep' });
    const { steps, answer, done } = expectProtocol(stream, 'deep');
    expect(steps[0]).toMatchObject({ kind: 'decompose', queries: ['What cools the Zephyr-9 reactor?'] });
    expect(steps.find((step) => step.kind === 'search').reason).toMatch(/^the generation budget is spent; /);
    expect(answer).toContain('lead-bismuth');
    // Only the first plan was asked; nothing after the budget ran out.
    expect(requests).toHaveLength(1);
    expect(requests[0]!.aborted).toBe(true);
    await expectCharged(stream, done, before, 5);
  });

  it.each(['plan-prose', 'plan-wrong-shape', 'plan-empty'] as const)('deep mode survives a plan that is not a list of queries (%s)', async (plan) => {
    behaviour = plan;
    const before = await balance();
    const stream = await ask({ mode: 'deep' });
    const { steps, answer, done } = expectProtocol(stream, 'deep');
    expect(steps[0]).toMatchObject({ kind: 'decompose', queries: ['What cools the Zephyr-9 reactor?'] });
    expect(steps.find((step) => step.kind === 'search').reason).toMatch(/^the model gave no list of queries; /);
    expect(answer).toContain('lead-bismuth');
    await expectCharged(stream, done, before, 5);
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
      const workspace = (await createWorkspace(stopping, owner.key, 'w')).id;
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
