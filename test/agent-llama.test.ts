import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectProtocol, expectVerbatimQuotes, streamAgent, type AgentStream } from './support/agent.js';
import { upload, waitForDocuments } from './support/documents.js';
import { startTestServer, type TestServer, type TestUser } from './support/server.js';
import { createWorkspace } from './support/fixtures.js';

/**
 * The chat-model answer path against a real OpenAI-compatible server: llama.cpp's, serving
 * Gemma 3 270M (.ci/start-llama.sh prints the URL to set as KB_TEST_LLAMA_URL; vitest.config.ts
 * leaves this file out without it). The model is too small to answer well: these tests check the
 * plumbing (events, citations, bounds, charges), not what it says.
 */
const llamaUrl = process.env.KB_TEST_LLAMA_URL!;
const maxAnswerTokens = 64;

const documents = [
  { name: 'reactor.md', bytes: 'The Zephyr-9 research reactor is cooled by a liquid lead-bismuth eutectic. It was designed by Ilse Marant.' },
  { name: 'marant.md', bytes: 'Ilse Marant, the nuclear engineer, was born in Ghent in 1961.' },
  { name: 'lyft.txt', bytes: 'Lyft reported revenue of 3.2 billion dollars for 2021.' },
];

/** A server answering through the llama.cpp server, with one user and a workspace of the documents. */
async function serverWith(environment: Record<string, string>) {
  const server = await startTestServer({
    OPENAI_BASE_URL: llamaUrl,
    OPENAI_CHAT_MODEL: 'gemma-3-270m',
    OPENAI_TIMEOUT_SECONDS: '60',
    OPENAI_MAX_ANSWER_TOKENS: String(maxAnswerTokens),
    OPENAI_MAX_PLAN_TOKENS: '32',
    ...environment,
  });
  const user = await server.createUser({ credits: 100 });
  const workspaceId = (await createWorkspace(server, user.key, 'llama')).id;
  const uploaded = await upload(server, user.key, workspaceId, documents);
  await waitForDocuments(server, user.key, uploaded.body.map((document: { id: string }) => document.id));
  return { server, user, workspaceId };
}

let server: TestServer;
let user: TestUser;
let workspaceId: string;

beforeAll(async () => {
  // OPENAI_CHAT_MODEL without OPENAI_EMBEDDING_MODEL: the embedded model embeds, the server only answers.
  ({ server, user, workspaceId } = await serverWith({ OPENAI_GENERATION_SECONDS: '120' }));
  expect(server.config.openai.embeddingModel).toBeUndefined();
}, 120_000);

afterAll(async () => {
  await server?.close();
});

const ask = (on: { server: TestServer; user: TestUser; workspaceId: string }, message: string, fields: Record<string, unknown> = {}) =>
  streamAgent(on.server, on.user.key, { message, workspaceIds: [on.workspaceId], ...fields });
const balanceOf = async (on: { server: TestServer; user: TestUser }) => (await on.server.request('GET', '/v1/user/me', { key: on.user.key })).body.creditsBalance as number;

/** Charged as an extractive answer is: the mode's cost, once, at `done`, with its ledger entry. */
async function expectCharged(on: { server: TestServer; user: TestUser }, stream: AgentStream, before: number, mode: 'fast' | 'deep') {
  const cost = mode === 'fast' ? 1 : 5;
  const jobId = stream.events[0]!.jobId as string;
  expect(stream.events.at(-1)).toMatchObject({ type: 'done', creditsUsed: cost });
  expect(await balanceOf(on)).toBe(before - cost);
  const recent = (await on.server.request('GET', '/v1/user/me/credits', { key: on.user.key })).body.recent;
  expect(recent.filter((entry: { job_id: string }) => entry.job_id === jobId)).toEqual([expect.objectContaining({ reason: `agent_${mode}`, amount: -cost })]);
  expect(await on.server.app.db.prisma.agentJob.findUniqueOrThrow({ where: { id: jobId } })).toMatchObject({ status: 'done', creditsUsed: cost });
}

/** Every marker left in the answer, and every cited passage, names one of the (at most three) passages found. */
function expectOnlyRealCitations(answer: string, sources: ReturnType<typeof expectProtocol>['sources']) {
  const marked = [...answer.matchAll(/\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]/g)].flatMap((match) => match[1]!.split(',').map(Number));
  for (const number of marked) expect(number, answer).toBeGreaterThanOrEqual(1);
  for (const number of marked) expect(number, answer).toBeLessThanOrEqual(documents.length);
  for (const passage of sources.flatMap((source) => source.passages)) expect(marked).toContain(passage.citation);
}

// The model generates on the CPU the other test files share: ci85 took 24 s of the default 30 for a deep run.
describe('the agent answering through a llama.cpp server (Gemma 3 270M)', { timeout: 90_000 }, () => {
  const on = () => ({ server, user, workspaceId });

  it("fast: streams the model's tokens, ends with done, cites only passages found, stays within the token bound, and is charged like any answer", async () => {
    const before = await balanceOf(on());
    const stream = await ask(on(), 'What cools the Zephyr-9 reactor?');
    const { answer, sources } = expectProtocol(stream);
    const tokens = stream.events.filter((event) => event.type === 'token');
    expect(tokens.length).toBeGreaterThan(2);
    // Each streamed piece holds at least one of the model's tokens.
    expect(tokens.length).toBeLessThanOrEqual(maxAnswerTokens);
    expect(answer.split(/\s+/).filter(Boolean).length).toBeLessThanOrEqual(maxAnswerTokens);
    expectOnlyRealCitations(answer, sources);
    await expectVerbatimQuotes(server, user.key, [workspaceId], sources);
    await expectCharged(on(), stream, before, 'fast');
    const stored = await server.app.db.prisma.chatMessage.findFirstOrThrow({ where: { jobId: stream.events[0]!.jobId } });
    expect(stored.content).toBe(answer);
  });

  it('deep: plans with the model, whatever it makes of the plan, reports its steps and verifies the answer', async () => {
    const before = await balanceOf(on());
    const stream = await ask(on(), 'Where was the designer of the Zephyr-9 reactor born?', { mode: 'deep', limits: { maxHops: 2 } });
    const { steps, answer, sources } = expectProtocol(stream, 'deep');
    expect(steps.map((step) => step.kind)).toEqual(expect.arrayContaining(['decompose', 'search', 'verify']));
    expect(steps[0].queries.length).toBeGreaterThan(0);
    expect(steps.at(-1).kind).toBe('verify');
    expectOnlyRealCitations(answer, sources);
    await expectCharged(on(), stream, before, 'deep');
  });

  it('a follow-up in a session is rewritten by the model, searched and answered', async () => {
    // The conversation so far, written through the chat API rather than by a slower model run.
    const sessionId = (await server.request('POST', '/v1/chat/sessions', { key: user.key, json: { title: 'reactor', workspace_ids: [workspaceId] } })).body.id as string;
    for (const message of [
      { role: 'user', content: 'Who designed the Zephyr-9 reactor?' },
      { role: 'assistant', content: 'It was designed by Ilse Marant [1].' },
    ]) {
      expect((await server.request('POST', `/v1/chat/sessions/${sessionId}/messages`, { key: user.key, json: message })).status).toBe(201);
    }
    const before = await balanceOf(on());
    const stream = await ask(on(), 'Where was she born?', { sessionId });
    const { done } = expectProtocol(stream);
    expect(done.sessionId).toBe(sessionId);
    expect(typeof done.rewritten_query).toBe('string');
    expect(done.rewritten_query.trim().length).toBeGreaterThan(0);
    const messages = await server.app.db.prisma.chatMessage.findMany({ where: { sessionId }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
    expect(messages.map((message) => message.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(messages[2]!.rewrittenQuery).toBe(done.rewritten_query);
    await expectCharged(on(), stream, before, 'fast');
  });
});

describe('bounds of a run against the llama.cpp server', () => {
  it('a tiny generation budget ends the run cleanly: done, charged, and soon', async () => {
    const tiny = await serverWith({ OPENAI_GENERATION_SECONDS: '0.5', OPENAI_MAX_ANSWER_TOKENS: '512' });
    try {
      const before = await balanceOf(tiny);
      const started = performance.now();
      const stream = await ask(tiny, 'Where was the designer of the Zephyr-9 reactor born?', { mode: 'deep' });
      const seconds = (performance.now() - started) / 1000;
      const { answer } = expectProtocol(stream, 'deep');
      expect(answer.trim().length).toBeGreaterThan(0);
      // Half a second of generation, then searches and the extractive answerer: far below 512 tokens' time.
      expect(seconds).toBeLessThan(15);
      await expectCharged(tiny, stream, before, 'deep');
    } finally {
      await tiny.server.close();
    }
  }, 90_000);

  it('a run that outlasts KB_AGENT_TIMEOUT_SECONDS ends with the documented error event and a refund', async () => {
    const short = await serverWith({ KB_AGENT_TIMEOUT_SECONDS: '1', OPENAI_GENERATION_SECONDS: '120', OPENAI_MAX_ANSWER_TOKENS: '512', OPENAI_REPEAT_STOP_WORDS: '0' });
    try {
      const before = await balanceOf(short);
      const stream = await ask(short, 'Where was the designer of the Zephyr-9 reactor born? Explain in detail.', { mode: 'deep' });
      expect(stream.events.at(-1)).toMatchObject({ type: 'error', code: 'service_unavailable', message: 'the run did not finish within 1 s' });
      expect(stream.events.filter((event) => event.type === 'done' || event.type === 'error')).toHaveLength(1);
      expect(await balanceOf(short)).toBe(before);
      const jobId = stream.events[0]!.jobId as string;
      const recent = (await short.server.request('GET', '/v1/user/me/credits', { key: short.user.key })).body.recent;
      expect(recent[0]).toMatchObject({ reason: 'agent_refund', amount: 5, job_id: jobId });
      expect(await short.server.app.db.prisma.chatMessage.count({ where: { jobId } })).toBe(0);
    } finally {
      await short.server.close();
    }
  }, 90_000);
});
