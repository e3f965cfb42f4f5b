import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startApp } from '../src/app.js';
import { refundAgentRun } from '../src/modules/credits/service.js';
import { expectProtocol, readEventStream, streamAgent, type AgentEvent, type AgentStream } from './support/agent.js';
import { upload, waitForDocuments } from './support/documents.js';
import { startFakeModel, type FakeModel } from './support/fake-openai.js';
import { expectError, startTestServer, type TestServer, type TestUser } from './support/server.js';
import { serve, stop } from './support/cli.js';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createWorkspace } from './support/fixtures.js';

/**
 * Resumable agent streams, the event log, GET of a job and Idempotency-Key on /agent/stream,
 * against a real server and an OpenAI-compatible chat model whose pace the test sets: it answers
 * from the prompt (the first sentence of passage [1], cited), one word per `tokenDelayMs`, and
 * can hold its stream after `holdAfter` words until the test releases it.
 */
let tokenDelayMs = 1;
let holdAfter: number | null = null;
/** The model refuses every streamed answer (400, which its client does not retry). */
let failStreams = false;
let release: () => void = () => undefined;
let released: Promise<void> = Promise.resolve();
let model: FakeModel;
let baseUrl: string;

function hold(afterTokens: number) {
  holdAfter = afterTokens;
  released = new Promise<void>((resolve) => (release = resolve));
}

beforeAll(async () => {
  model = await startFakeModel((request, reply) => {
    if (!request.body.stream) {
      const system = request.body.messages[0].content as string;
      return reply.completion(system.startsWith('Rewrite') ? request.body.messages.at(-1).content : '[]');
    }
    if (failStreams) return reply.json(400, { error: { message: 'the model is unavailable', type: 'invalid_request_error' } });
    const passage = /\[1\] \([^)]*\)\n([^\n]*)/.exec(request.prompt)?.[1] ?? '';
    const tokens = `According to the notes, ${passage.split(/(?<=\.)\s/)[0]!.replace(/\.$/, '')} [1].`.match(/\s*\S+/g)!;
    reply.startStream();
    const pause = tokenDelayMs;
    const holding = holdAfter;
    const gate = released;
    const next = async () => {
      if (reply.gone) return;
      if (request.sent === tokens.length) return reply.end();
      if (holding !== null && request.sent === holding) await gate;
      reply.token(tokens[request.sent]!);
      setTimeout(() => void next(), pause);
    };
    void next();
  });
  baseUrl = model.baseUrl;
});

const graceSeconds = 1.5;
let server: TestServer;
let user: TestUser;
let other: TestUser;
let workspaceId: string;

beforeAll(async () => {
  server = await startTestServer({
    OPENAI_BASE_URL: baseUrl,
    OPENAI_CHAT_MODEL: 'fake-chat',
    OPENAI_TIMEOUT_SECONDS: '20',
    KB_AGENT_HEARTBEAT_SECONDS: '0.2',
    KB_AGENT_RESUME_GRACE_SECONDS: String(graceSeconds),
  });
  user = await server.createUser({ credits: 1000 });
  other = await server.createUser({ credits: 100 });
  workspaceId = (await createWorkspace(server, user.key, 'resume')).id;
  const uploaded = await upload(server, user.key, workspaceId, [
    { name: 'reactor.md', bytes: 'The Zephyr-9 research reactor is cooled by a liquid lead-bismuth eutectic that circulates through nineteen fuel assemblies at high temperature. It was designed by Ilse Marant.' },
  ]);
  await waitForDocuments(server, user.key, uploaded.body.map((document: { id: string }) => document.id));
}, 300_000);

afterAll(async () => {
  release();
  await server?.close();
  await model.close();
});

beforeEach(() => {
  tokenDelayMs = 1;
  holdAfter = null;
  failStreams = false;
  release();
});

const question = { message: 'What cools the Zephyr-9 reactor?' };
const ask = (body: Record<string, unknown> = {}, options: Parameters<typeof streamAgent>[3] = {}, key = user.key) =>
  streamAgent(server, key, { ...question, workspaceIds: [workspaceId], ...body }, options);
const balance = async (key = user.key) => (await server.request('GET', '/v1/user/me', { key })).body.creditsBalance as number;
const job = (jobId: string, query = '', key = user.key) => server.request('GET', `/v1/agent/jobs/${jobId}${query}`, { key });

/** Starts a resumable run and leaves its stream once the run has started. */
async function startedThenLeft() {
  const first = await ask({ resumable: true }, { stopAfter: (event) => event.type === 'job_started' });
  return { first, jobId: first.events[0]!.jobId as string };
}

/** GET /v1/agent/jobs/{id}/events, read to its end (or to `stopAfter`). */
function events(jobId: string, options: { lastEventId?: string; query?: string; key?: string; stopAfter?: (event: AgentEvent) => boolean } = {}) {
  const headers: Record<string, string> = { authorization: `Bearer ${options.key ?? user.key}`, accept: 'text/event-stream' };
  if (options.lastEventId !== undefined) headers['last-event-id'] = options.lastEventId;
  return readEventStream(new URL(`/v1/agent/jobs/${jobId}/events${options.query ?? ''}`, server.url), { method: 'GET', headers }, options);
}

const seqOf = (id: string | undefined) => Number(id!.split(':')[1]);

/** Every event has the id `<jobId>:<seq>`, and the seqs follow each other from `first`. */
function expectIds(stream: AgentStream, jobId: string, first: number) {
  expect(stream.ids).toHaveLength(stream.events.length);
  stream.ids.forEach((id, index) => expect(id).toBe(`${jobId}:${first + index}`));
}

async function until(condition: () => Promise<boolean>, ms = 10_000) {
  for (let waited = 0; waited < ms; waited += 50) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('the condition did not come true in time');
}

const answerOf = (events: AgentEvent[]) => events.filter((event) => event.type === 'token').map((event) => event.content as string).join('');

async function storedAnswer(sessionId: string) {
  const session = await server.request('GET', `/v1/chat/sessions/${sessionId}`, { key: user.key });
  expect(session.status).toBe(200);
  return session.body.messages.at(-1).content as string;
}

describe('the event log and SSE ids', () => {
  it('gives every event an id <jobId>:<seq>, 1, 2, ... in order, and logs each as the stream sent it', async () => {
    const before = await balance();
    const stream = await ask();
    const { done } = expectProtocol(stream);
    const jobId = stream.events[0]!.jobId as string;
    expectIds(stream, jobId, 1);
    // The data lines are as they were: the id is on its own line.
    expect(Object.keys(done)).toEqual(['type', 'jobId', 'sessionId', 'creditsUsed', 'support_score', 'rewritten_query']);
    expect(await balance()).toBe(before - 1);

    const state = await job(jobId, '?include=events');
    expect(state.status).toBe(200);
    expect(state.body).toMatchObject({ id: jobId, status: 'done', mode: 'fast', session_id: done.sessionId, resumable: false, credits_reserved: 1, credits_used: 1, error: null });
    expect(state.body.event_count).toBe(stream.events.length);
    expect(Date.parse(state.body.finished_at)).toBeGreaterThanOrEqual(Date.parse(state.body.created_at));
    expect(state.body.events.map((event: { id: string }) => event.id)).toEqual(stream.ids);
    expect(state.body.events.map((event: { seq: number }) => event.seq)).toEqual(stream.ids.map(seqOf));
    // Field for field, in the stream's order.
    expect(state.body.events.map((event: { data: unknown }) => JSON.stringify(event.data))).toEqual(stream.events.map((event) => JSON.stringify(event)));

    // Without include=events the events are not listed; `after` and `limit` page them.
    const plain = await job(jobId);
    expect(plain.body.events).toBeUndefined();
    expect(plain.body.event_count).toBe(stream.events.length);
    const page = await job(jobId, '?include=events&after=2&limit=2');
    expect(page.body.events.map((event: { seq: number }) => event.seq)).toEqual([3, 4]);

    // GraphQL: the same job, and the events' numbers.
    const graphql = await server.graphql<{ agentJob: { status: string; eventCount: number; events: { seq: number; type: string }[] } }>(
      user.key,
      'query ($id: ID!) { agentJob(id: $id) { status eventCount events(after: 0, first: 2) { seq type } } }',
      { id: jobId },
    );
    expect(graphql.data?.agentJob).toEqual({ status: 'done', eventCount: stream.events.length, events: [{ seq: 1, type: 'job_started' }, { seq: 2, type: 'token' }] });
  });

  it('has every event in the log before any client is sent it', async () => {
    // The model holds after three tokens: the run stays at the point the client has reached, and
    // the store is asked at once for every event the client was sent (a process that died now
    // would have left them for whoever resumes).
    hold(3);
    const stream = await ask({ resumable: true }, { stopAfter: (event) => event.type === 'token' && event.content.trim() === 'the' });
    const jobId = stream.events[0]!.jobId as string;
    const seqs = stream.ids.map(seqOf);
    const logged = await server.app.db.prisma.agentEvent.findMany({ where: { jobId, seq: { in: seqs } }, select: { seq: true } });
    release();
    expect(seqs.length).toBeGreaterThanOrEqual(4);
    expect(logged.map((event) => event.seq).sort((a, b) => a - b)).toEqual(seqs);
  });

  it('once another process has ended the run (its lease sweep), sends nothing more and ends with that end', async () => {
    hold(3);
    // Runs of earlier tests may still be going (a resumable one waits out its grace period).
    const earlier = (await server.app.db.prisma.agentJob.findMany({ where: { status: 'running' }, select: { id: true } })).map((job) => job.id);
    const streaming = ask();
    // The run has logged its first tokens and waits on the model.
    let jobId = '';
    await until(async () => {
      const job = await server.app.db.prisma.agentJob.findFirst({ where: { userId: user.id, status: 'running', id: { notIn: earlier } }, select: { id: true } });
      jobId = job?.id ?? '';
      return jobId !== '' && (await server.app.db.prisma.agentEvent.count({ where: { jobId } })) >= 4;
    });
    // A process that thinks this one dead ends the run as its lease sweep does: refund, and its
    // error after the last event logged.
    const swept = { type: 'error', code: 'service_unavailable', message: 'the process running the run stopped; nothing was charged' };
    expect(await refundAgentRun(server.app.db.prisma, jobId, 'failed', 'the process running it stopped', { seq: null, data: swept })).toBe(true);
    release();
    const stream = await streaming;
    const logged = await server.app.db.prisma.agentEvent.findMany({ where: { jobId }, orderBy: { seq: 'asc' } });
    // What the client was sent is exactly the log, ids included, ending with the sweep's error.
    expect(stream.ids).toEqual(logged.map((event) => `${jobId}:${event.seq}`));
    expect(stream.events.at(-1)).toMatchObject({ type: 'error', code: 'service_unavailable', message: 'the process running the run stopped; nothing was charged' });
    expect(stream.events.filter((event) => event.type === 'error' || event.type === 'done')).toHaveLength(1);
    // Reserved, refunded, never charged.
    expect(await server.app.db.prisma.agentJob.findUnique({ where: { id: jobId }, select: { status: true, creditsUsed: true } })).toEqual({ status: 'failed', creditsUsed: 0 });
    const ledger = await server.app.db.prisma.creditEntry.aggregate({ where: { jobId }, _sum: { amount: true } });
    expect(ledger._sum.amount).toBe(0);
  });

  it('replays a finished run: after Last-Event-ID, after ?after=, everything, and 204 after the last event', async () => {
    const stream = await ask();
    expectProtocol(stream);
    const jobId = stream.events[0]!.jobId as string;
    const all = await events(jobId);
    expect(all.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(all.events).toEqual(stream.events);
    expect(all.ids).toEqual(stream.ids);

    const fromThird = await events(jobId, { lastEventId: stream.ids[2] });
    expect(fromThird.events).toEqual(stream.events.slice(3));
    expectIds(fromThird, jobId, 4);
    const byQuery = await events(jobId, { query: '?after=5' });
    expect(byQuery.events).toEqual(stream.events.slice(5));
    // The header wins over the query (EventSource reconnects to the URL it started with).
    const both = await events(jobId, { query: '?after=1', lastEventId: stream.ids.at(-2) });
    expect(both.events).toEqual([stream.events.at(-1)]);

    // Deep mode's reasoning steps come back field for field too.
    const deep = await ask({ mode: 'deep' });
    expectProtocol(deep, 'deep');
    const deepJob = deep.events[0]!.jobId as string;
    expectIds(deep, deepJob, 1);
    expect((await events(deepJob)).events).toEqual(deep.events);
    const deepLog = await job(deepJob, '?include=events');
    expect(deepLog.body.events.map((event: { data: unknown }) => JSON.stringify(event.data))).toEqual(deep.events.map((event) => JSON.stringify(event)));

    const nothingLeft = await fetch(new URL(`/v1/agent/jobs/${jobId}/events`, server.url), { headers: { authorization: `Bearer ${user.key}`, 'last-event-id': stream.ids.at(-1)! } });
    expect(nothingLeft.status).toBe(204);
    expect(await nothingLeft.text()).toBe('');
  });
});

describe('resumable runs', () => {
  it('survive a disconnect; a reconnection with Last-Event-ID gets exactly the missed events, then the rest, then one terminal event', async () => {
    tokenDelayMs = 120;
    const before = await balance();
    let tokens = 0;
    const first = await ask({ resumable: true }, { stopAfter: (event) => event.type === 'token' && ++tokens === 3 });
    const jobId = first.events[0]!.jobId as string;
    expectIds(first, jobId, 1);
    // Gone, but the run goes on.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const running = await job(jobId);
    expect(running.body).toMatchObject({ status: 'running', resumable: true, credits_used: 0, finished_at: null });
    expect(running.body.event_count).toBeGreaterThan(first.events.length);

    const rest = await events(jobId, { lastEventId: first.ids.at(-1) });
    expectIds(rest, jobId, first.events.length + 1);
    const all = [...first.events, ...rest.events];
    const types = all.map((event) => event.type);
    expect(types.filter((type) => type === 'done' || type === 'error')).toEqual(['done']);
    expect(types.at(-1)).toBe('done');
    expect(types.at(-2)).toBe('sources');
    const done = all.at(-1)!;
    expect(answerOf(all)).toBe(await storedAnswer(done.sessionId));
    expect(answerOf(all)).toContain('lead-bismuth eutectic');
    // Exactly the log: nothing missed, nothing twice.
    const logged = await job(jobId, '?include=events');
    expect(logged.body.events.map((event: { data: unknown }) => event.data)).toEqual(all);
    expect(logged.body).toMatchObject({ status: 'done', credits_used: 1 });
    expect(await balance()).toBe(before - 1);
  });

  it('a run whose client left before the answer is charged only once a client that came back has taken it', async () => {
    // Slow enough for the server to see the client go before the answer is ready.
    tokenDelayMs = 20;
    const before = await balance();
    const { first, jobId } = await startedThenLeft();
    // The answer is ready long before the grace period ends; nobody has taken it yet.
    await new Promise((resolve) => setTimeout(resolve, (graceSeconds * 1000) / 2));
    expect((await job(jobId)).body.status).toBe('running');
    expect(await balance()).toBe(before - 1);
    const rest = await events(jobId, { lastEventId: first.ids[0] });
    expect(rest.events.at(-1)).toMatchObject({ type: 'done', jobId, creditsUsed: 1 });
    expectIds(rest, jobId, 2);
    expect((await job(jobId)).body.status).toBe('done');
    expect(await balance()).toBe(before - 1);
  });

  it('an answer read as JSON (GET /v1/agent/jobs/{id}?include=events) is taken as one read from the stream: charged, not refunded', async () => {
    tokenDelayMs = 20;
    const before = await balance();
    const { first, jobId } = await startedThenLeft();
    // Read the answer without following the stream, once its sources are in the log.
    let read: { data: AgentEvent }[] = [];
    await until(async () => {
      read = (await job(jobId, '?include=events')).body.events;
      return read.some((event) => event.data.type === 'sources');
    });
    // Well past the grace period: a run whose answer was taken is not cancelled.
    await until(async () => (await job(jobId)).body.status !== 'running', graceSeconds * 1000 + 5_000);
    expect((await job(jobId)).body).toMatchObject({ status: 'done', credits_used: 1 });
    expect(await balance()).toBe(before - 1);
    const ledger = (await server.request('GET', '/v1/user/me/credits', { key: user.key })).body.recent.filter((entry: { job_id: string }) => entry.job_id === jobId);
    expect(ledger.map((entry: { reason: string }) => entry.reason)).not.toContain('agent_refund');
  });

  it('an answer read in part, as JSON stopping before its sources, is taken: the run finishes and is charged with nobody reading', async () => {
    const before = await balance();
    hold(3);
    const { first, jobId } = await startedThenLeft();
    // Every event logged so far (three words of the answer among them), and not one more. The
    // count is that of the events read: `event_count` is read beside them, and a batch of the
    // log written in between (on a server store) makes it fall short of them.
    let count = 0;
    await until(async () => {
      const state = (await job(jobId, '?include=events')).body;
      count = state.events.length;
      return state.events.filter((event: { data: AgentEvent }) => event.data.type === 'token').length === 3;
    });
    const read = (await job(jobId, `?include=events&limit=${count}`)).body.events.map((event: { data: AgentEvent }) => event.data);
    expect(read.map((event: AgentEvent) => event.type)).not.toContain('sources');
    expect(answerOf(read)).not.toBe('');
    release();
    // Nobody reads on, well past the grace period: the run is not cancelled but charged.
    await until(async () => (await job(jobId)).body.status !== 'running', graceSeconds * 1000 + 5_000);
    await new Promise((resolve) => setTimeout(resolve, graceSeconds * 1000));
    expect((await job(jobId)).body).toMatchObject({ status: 'done', credits_used: 1 });
    expect(await balance()).toBe(before - 1);
  }, 30_000);

  it('an answer read in part from the event stream, leaving before its sources, is taken: charged, not refunded', async () => {
    const before = await balance();
    hold(2);
    const { first, jobId } = await startedThenLeft();
    const part = await events(jobId, { lastEventId: first.ids[0], stopAfter: (event) => event.type === 'token' });
    expect(part.events.at(-1)!.type).toBe('token');
    release();
    await until(async () => (await job(jobId)).body.status !== 'running', graceSeconds * 1000 + 5_000);
    expect((await job(jobId)).body).toMatchObject({ status: 'done', credits_used: 1 });
    expect(await balance()).toBe(before - 1);
  }, 30_000);

  it('a run waiting for a reader leaves no listener behind per look at the store (no MaxListenersExceededWarning)', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
    process.on('warning', onWarning);
    try {
      const { first, jobId } = await startedThenLeft();
      // Its answer is ready at once; nobody takes it for the whole grace period.
      await until(async () => (await job(jobId)).body.status !== 'running', graceSeconds * 1000 + 5_000);
      expect((await job(jobId)).body.status).toBe('cancelled');
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.filter((warning) => warning.includes('MaxListenersExceeded'))).toEqual([]);
  }, 30_000);

  it('a run nobody comes back to within the grace period is cancelled and refunded, whether still working or already answered', async () => {
    const before = await balance();
    // One still working (the model holds before its first word), one with its answer ready and
    // not taken. Both clients leave before any of the answer: reading any of it takes it.
    hold(0);
    const working = await startedThenLeft();
    holdAfter = null;
    tokenDelayMs = 20;
    const answered = await startedThenLeft();
    const jobs = [working.jobId, answered.jobId];
    await until(async () => (await Promise.all(jobs.map((id) => job(id)))).every((state) => state.body.status !== 'running'), graceSeconds * 1000 + 5_000);
    release();
    for (const jobId of jobs) {
      const state = await job(jobId, '?include=events');
      expect(state.body).toMatchObject({ status: 'cancelled', credits_used: 0, error: 'nobody resumed the stream' });
      const last = state.body.events.at(-1);
      expect(last.data).toEqual({ type: 'error', code: 'cancelled', message: `nobody resumed the stream within ${graceSeconds} s; the run was cancelled and nothing was charged` });
      expect(state.body.events.filter((event: { data: { type: string } }) => ['done', 'error'].includes(event.data.type))).toHaveLength(1);
      // Nothing was stored for it.
      expect(await server.app.db.prisma.chatMessage.count({ where: { jobId } })).toBe(0);
    }
    expect(await balance()).toBe(before);
    const recent = (await server.request('GET', '/v1/user/me/credits', { key: user.key })).body.recent;
    expect(recent.filter((entry: { reason: string; job_id: string }) => entry.reason === 'agent_refund' && jobs.includes(entry.job_id))).toHaveLength(2);

    // Coming back long after: the log tells how it ended, and no longer gives out the answer
    // nobody paid for (read live, or paid for: never both free and afterwards).
    for (const jobId of jobs) {
      const listed = (await job(jobId, '?include=events')).body;
      expect(listed.events.map((event: { data: { type: string } }) => event.data.type)).toEqual(['job_started', 'error']);
      expect(listed.event_count).toBeGreaterThan(2);
    }
    const late = await events(jobs[1]!, { lastEventId: `${jobs[1]}:1` });
    expect(late.events.map((event) => event.type)).toEqual(['error']);
    expect(late.events.at(-1)).toMatchObject({ code: 'cancelled' });
    const count = (await job(jobs[1]!)).body.event_count as number;
    expect(late.ids).toEqual([`${jobs[1]}:${count}`]);
  }, 30_000);

  it('a reader keeps a run going past the grace period while it follows it', async () => {
    tokenDelayMs = 1;
    hold(1);
    const before = await balance();
    const first = await ask({ resumable: true }, { stopAfter: (event) => event.type === 'token' });
    const jobId = first.events[0]!.jobId as string;
    const following = events(jobId, { lastEventId: first.ids.at(-1) });
    // Twice the grace period with the model holding: the reader is there all along.
    await new Promise((resolve) => setTimeout(resolve, graceSeconds * 2000));
    expect((await job(jobId)).body.status).toBe('running');
    release();
    const rest = await following;
    expect(rest.events.at(-1)).toMatchObject({ type: 'done', jobId });
    expect(answerOf([...first.events, ...rest.events])).toBe(await storedAnswer(rest.events.at(-1)!.sessionId));
    expect(await balance()).toBe(before - 1);
  }, 30_000);

  it('two reconnections at once both get the whole sequence', async () => {
    tokenDelayMs = 60;
    const { first, jobId } = await startedThenLeft();
    const [a, b] = await Promise.all([events(jobId, { lastEventId: `${jobId}:0` }), events(jobId, { query: '?after=0' })]);
    expect(a.events).toEqual(b.events);
    expect(a.ids).toEqual(b.ids);
    expectIds(a, jobId, 1);
    expectProtocol(a);
    expect((await job(jobId)).body.status).toBe('done');
  });

  it('POST /agent/stream with Last-Event-ID resumes that run and starts none', async () => {
    tokenDelayMs = 80;
    const first = await ask({ resumable: true }, { stopAfter: (event) => event.type === 'token' });
    const jobId = first.events[0]!.jobId as string;
    const before = await balance();
    const jobsBefore = await server.app.db.prisma.agentJob.count({ where: { userId: user.id } });
    const rest = await ask({ resumable: true }, { headers: { 'last-event-id': first.ids.at(-1)! } });
    expectIds(rest, jobId, first.events.length + 1);
    expect(rest.events.at(-1)).toMatchObject({ type: 'done', jobId });
    expect(await balance()).toBe(before);
    expect(await server.app.db.prisma.agentJob.count({ where: { userId: user.id } })).toBe(jobsBefore);
  });
});

describe('runs that are not resumable', () => {
  it('a disconnect still cancels and refunds, even while another reader follows; the log ends with the cancellation', async () => {
    tokenDelayMs = 150;
    const before = await balance();
    const first = await ask({}, { stopAfter: (event) => event.type === 'token' });
    const jobId = first.events[0]!.jobId as string;
    await until(async () => (await job(jobId)).body.status !== 'running');
    const state = await job(jobId, '?include=events');
    expect(state.body).toMatchObject({ status: 'cancelled', resumable: false, credits_used: 0, error: 'cancelled by the client' });
    expect(state.body.events.at(-1).data).toEqual({ type: 'error', code: 'cancelled', message: 'the client closed the stream; the run was cancelled and nothing was charged' });
    expect(await balance()).toBe(before);

    // Reading a non-resumable run's events does not keep it going.
    const second = await ask({}, { stopAfter: (event) => event.type === 'token' });
    const secondJob = second.events[0]!.jobId as string;
    const reader = await events(secondJob);
    expect(reader.events.at(-1)).toMatchObject({ type: 'error', code: 'cancelled' });
    expect((await job(secondJob)).body.status).toBe('cancelled');
    expect(await balance()).toBe(before);
  });
});

describe('refusals', () => {
  it("another user's job, an unknown job and a job id that is not one are 404", async () => {
    const stream = await ask();
    const jobId = stream.events[0]!.jobId as string;
    expectError(await job(jobId, '', other.key), 404, 'not_found');
    expectError(await job(randomUUID()), 404, 'not_found');
    expectError(await job('not-a-job'), 404, 'not_found');
    const theirs = await events(jobId, { key: other.key });
    expect(theirs.status).toBe(404);
    expect(theirs.body.error).toBe('not_found');
    // Naming another user's event on POST /agent/stream starts nothing and finds nothing.
    const resumed = await ask({}, { headers: { 'last-event-id': `${jobId}:1` } }, other.key);
    expect(resumed.status).toBe(404);
    // The body's workspace is checked first, as for a new run: it is not theirs either.
    expect(resumed.body.message).toBe(`workspace ${workspaceId} not found`);
    const ownWorkspace = (await server.request('POST', '/v1/kb/workspaces', { key: other.key, json: { name: `theirs ${randomUUID()}` } })).body.id;
    const withTheirs = await ask({ workspaceIds: [ownWorkspace] }, { headers: { 'last-event-id': `${jobId}:1` } }, other.key);
    expect(withTheirs.status).toBe(404);
    expect(withTheirs.body.message).toBe(`agent job ${jobId} not found`);
    // Scope: reading needs chat:read.
    const writer = await server.createKey(user, ['chat:write']);
    expectError(await job(jobId, '', writer), 403, 'forbidden');
  });

  it('a key restricted to workspaces sees the runs that searched only its workspaces', async () => {
    const elsewhere = (await server.request('POST', '/v1/kb/workspaces', { key: user.key, json: { name: `elsewhere ${randomUUID()}` } })).body.id;
    const restricted = await server.request('POST', '/v1/user/me/api-keys', { key: user.key, json: { name: 'restricted', scopes: ['chat:read', 'chat:write'], workspace_ids: [workspaceId] } });
    expect(restricted.status).toBe(201);
    const key = restricted.body.raw_key as string;
    const inside = (await ask()).events[0]!.jobId as string;
    const outside = (await ask({ workspaceIds: [workspaceId, elsewhere] })).events[0]!.jobId as string;
    expect((await job(inside, '', key)).body.status).toBe('done');
    expect((await events(inside, { key })).events.at(-1)).toMatchObject({ type: 'done' });
    expectError(await job(outside, '', key), 404, 'not_found');
    expect((await events(outside, { key })).status).toBe(404);
    expect((await ask({}, { headers: { 'last-event-id': `${outside}:0` } }, key)).status).toBe(404);
    // Resuming a run it may see, naming a workspace it may not: 404, as for a new run.
    expect((await ask({ workspaceIds: [elsewhere] }, { headers: { 'last-event-id': `${inside}:0` } }, key)).status).toBe(404);

    // A follow-up that searched only its workspace, in a session that also holds answers from
    // another: the run's question is rewritten from that conversation, so the key cannot see it.
    const mixed = await ask({ workspaceIds: [workspaceId, elsewhere] });
    const sessionId = mixed.events.at(-1)!.sessionId as string;
    const followUp = (await ask({ message: 'And what designed it?', sessionId })).events[0]!.jobId as string;
    expect((await job(followUp)).body.status).toBe('done');
    expectError(await job(followUp, '', key), 404, 'not_found');
    expect((await events(followUp, { key })).status).toBe(404);
  });

  it('a malformed Last-Event-ID or after, an event the run has not sent, another job of the caller: 400', async () => {
    const stream = await ask();
    const jobId = stream.events[0]!.jobId as string;
    const last = stream.events.length;
    for (const bad of ['abc', `${jobId}`, `${jobId}:`, `${jobId}:-1`, `${jobId}:1.5`, `${jobId}:99999999999`, `${jobId}:0x10`, `x${jobId}:1`]) {
      const refused = await events(jobId, { lastEventId: bad });
      expect(refused.status, bad).toBe(400);
      expect(refused.body).toMatchObject({ error: 'bad_request' });
      expect(refused.body.message, bad).toMatch(/^Last-Event-ID: must be an event id of this API/);
      const posted = await ask({}, { headers: { 'last-event-id': bad } });
      expect(posted.status, bad).toBe(400);
      expect(posted.body.message).toMatch(/^Last-Event-ID: /);
    }
    for (const bad of ['-1', '1e3', 'x', '99999999999']) {
      const refused = await events(jobId, { query: `?after=${bad}` });
      expect(refused.status, bad).toBe(400);
      expect(refused.body.message).toMatch(/^after: /);
    }
    const beyond = await events(jobId, { lastEventId: `${jobId}:${last + 1}` });
    expect(beyond.status).toBe(400);
    expect(beyond.body.message).toBe(`after: names event ${last + 1} of agent job ${jobId}, which has sent ${last} so far`);
    const huge = await events(jobId, { lastEventId: `${jobId}:2147483647` });
    expect(huge.status).toBe(400);
    const another = (await ask()).events[0]!.jobId as string;
    const mismatch = await events(jobId, { lastEventId: `${another}:1` });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.message).toBe(`Last-Event-ID: names an event of agent job ${another}, not of the job in the path`);
    // A bad body is refused before Last-Event-ID is looked at.
    const badBody = await streamAgent(server, user.key, { message: '', workspaceIds: [workspaceId] }, { headers: { 'last-event-id': `${jobId}:1` } });
    expect(badBody.status).toBe(400);
    expect(badBody.body.message).toMatch(/^message: /);
  });
});

describe('Idempotency-Key on POST /agent/stream', () => {
  it('a retry with the same key and body replays the first run without a second charge; another body is 422', async () => {
    const key = `stream-${randomUUID()}`;
    const before = await balance();
    const first = await ask({}, { headers: { 'idempotency-key': key } });
    expectProtocol(first);
    const jobId = first.events[0]!.jobId as string;
    expect(await balance()).toBe(before - 1);
    const retry = await ask({}, { headers: { 'idempotency-key': key } });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.events).toEqual(first.events);
    expect(retry.ids).toEqual(first.ids);
    // With a Last-Event-ID of that run: after it.
    const resumed = await ask({}, { headers: { 'idempotency-key': key, 'last-event-id': first.ids[1]! } });
    expect(resumed.events).toEqual(first.events.slice(2));
    expect(await balance()).toBe(before - 1);
    expect(await server.app.db.prisma.agentJob.count({ where: { userId: user.id, createdAt: { gt: new Date(Date.now() - 60_000) }, id: { not: jobId }, status: 'running' } })).toBe(0);

    const reused = await ask({ message: 'Who designed the Zephyr-9 reactor?' }, { headers: { 'idempotency-key': key } });
    expect(reused.status).toBe(422);
    expect(reused.body.error).toBe('idempotency_key_reused');
    expect(await balance()).toBe(before - 1);
  });

  it('a retry while the first run still goes follows it live: both get the whole sequence, one charge', async () => {
    tokenDelayMs = 100;
    const key = `stream-${randomUUID()}`;
    const before = await balance();
    let started!: () => void;
    const jobStarted = new Promise<void>((resolve) => (started = resolve));
    const firstStream = ask({ resumable: true }, {
      headers: { 'idempotency-key': key },
      stopAfter: (event) => {
        if (event.type === 'job_started') started();
        return false;
      },
    });
    await jobStarted;
    // The key is kept in the background once the run has begun; a retry meanwhile may be told to wait.
    let retry: AgentStream;
    for (;;) {
      retry = await ask({ resumable: true }, { headers: { 'idempotency-key': key } });
      if (retry.status !== 409) break;
      expect(retry.body.error).toBe('idempotency_key_in_use');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const first = await firstStream;
    expectProtocol(first);
    expect(retry.events).toEqual(first.events);
    expect(retry.ids).toEqual(first.ids);
    expect(await balance()).toBe(before - 1);
  });

  it('a refusal before any run (402) is kept and replayed; a 400 forgets the key', async () => {
    const poor = await server.createUser({ credits: 0 });
    const poorWorkspace = (await createWorkspace(server, poor.key, 'poor')).id;
    const key = `stream-${randomUUID()}`;
    const body = { ...question, workspaceIds: [poorWorkspace] };
    const refused = await streamAgent(server, poor.key, body, { headers: { 'idempotency-key': key } });
    expect(refused.status).toBe(402);
    const again = await streamAgent(server, poor.key, body, { headers: { 'idempotency-key': key } });
    expect(again.status).toBe(402);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(refused.body);

    const invalidKey = `stream-${randomUUID()}`;
    const invalid = await streamAgent(server, user.key, { message: '', workspaceIds: [workspaceId] }, { headers: { 'idempotency-key': invalidKey } });
    expect(invalid.status).toBe(400);
    const fixed = await ask({}, { headers: { 'idempotency-key': invalidKey } });
    expectProtocol(fixed);
  });
});

describe('a hostile client', () => {
  it('20 reconnections at once to a running run all get the same, whole sequence', async () => {
    tokenDelayMs = 40;
    const before = await balance();
    const { first, jobId } = await startedThenLeft();
    const storm = await Promise.all(Array.from({ length: 20 }, (_, index) => events(jobId, index % 2 ? { lastEventId: `${jobId}:1` } : { query: '?after=1' })));
    for (const stream of storm) {
      expect(stream.status).toBe(200);
      expect(stream.events).toEqual(storm[0]!.events);
      expectIds(stream, jobId, 2);
      expect(stream.events.at(-1)).toMatchObject({ type: 'done', jobId });
    }
    expect(await balance()).toBe(before - 1);
  }, 30_000);

  it('more than 100 readers at once of one user are refused with 429 until some close', async () => {
    hold(1);
    const first = await ask({ resumable: true }, { stopAfter: (event) => event.type === 'token' });
    const jobId = first.events[0]!.jobId as string;
    // HEAD answers at once with the stream's headers, and does not follow the run.
    const head = await fetch(new URL(`/v1/agent/jobs/${jobId}/events`, server.url), { method: 'HEAD', headers: { authorization: `Bearer ${user.key}` } });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const readers = Array.from({ length: 100 }, () => new AbortController());
    const url = new URL(`/v1/agent/jobs/${jobId}/events`, server.url);
    const open = (signal?: AbortSignal) => fetch(url, { headers: { authorization: `Bearer ${user.key}` }, ...(signal && { signal }) });
    try {
      const opened = await Promise.all(readers.map((reader) => open(reader.signal)));
      expect(opened.map((response) => response.status)).toEqual(readers.map(() => 200));
      const refused = await open();
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect((await refused.json()).error).toBe('rate_limited');
    } finally {
      for (const reader of readers) reader.abort();
    }
    await until(async () => {
      const again = await open();
      await again.body?.cancel();
      return again.status === 200;
    });
    release();
    const rest = await events(jobId, { lastEventId: first.ids.at(-1) });
    expect(rest.events.at(-1)).toMatchObject({ type: 'done', jobId });
  }, 60_000);

  it('GraphQL: agentJobEvents over SSE replays the events with their numbers', async () => {
    const stream = await ask();
    const jobId = stream.events[0]!.jobId as string;
    const response = await fetch(new URL('/graphql', server.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${user.key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({
        query: 'subscription ($id: ID!, $after: Int) { agentJobEvents(id: $id, after: $after) { __typename ... on AgentJobStarted { seq eventId } ... on AgentToken { seq eventId content } ... on AgentSources { seq eventId } ... on AgentDone { seq eventId jobId } } }',
        variables: { id: jobId, after: 1 },
      }),
    });
    expect(response.status).toBe(200);
    const text = await response.text();
    const results = [...text.matchAll(/^data: (.*)$/gm)].map((match) => JSON.parse(match[1]!)).filter((result) => result.data);
    const received = results.map((result) => result.data.agentJobEvents);
    expect(received.map((event: { seq: number }) => event.seq)).toEqual(stream.ids.slice(1).map(seqOf));
    expect(received.at(-1)).toEqual({ __typename: 'AgentDone', seq: stream.events.length, eventId: stream.ids.at(-1), jobId });
  });
});

// Several servers on one PostgreSQL: the run lives on one, its reader on the other, and they only
// share the store. The embedded store is one process's, so on its leg of the matrix these are
// left out rather than skipped (CI fails on any skipped test), as vitest.config.ts does for
// Elasticsearch's own tests.
const acrossServers = process.env.DATABASE_URL ? describe : () => undefined;
acrossServers('across servers', () => {
  it('a run of one server is resumed on another, kept going from there past the grace period, and charged once', async () => {
    const second = await startApp({ ...server.config, port: 0, instance: `${server.config.instance}-second` });
    try {
      // Held before its answer: nothing of it has been taken when the first client leaves, so
      // only the reader on the other server keeps it going.
      hold(0);
      const before = await balance();
      const { first, jobId } = await startedThenLeft();
      const headers = { authorization: `Bearer ${user.key}`, 'last-event-id': first.ids.at(-1)! };
      const following = readEventStream(new URL(`/v1/agent/jobs/${jobId}/events`, second.url), { method: 'GET', headers });
      await new Promise((resolve) => setTimeout(resolve, graceSeconds * 2000));
      expect((await job(jobId)).body.status).toBe('running');
      release();
      const rest = await following;
      expectIds(rest, jobId, first.events.length + 1);
      expect(rest.events.at(-1)).toMatchObject({ type: 'done', jobId, creditsUsed: 1 });
      expect(answerOf([...first.events, ...rest.events])).toBe(await storedAnswer(rest.events.at(-1)!.sessionId));
      expect(await balance()).toBe(before - 1);

      // Once it is over, the other server replays it too, and has nothing after its last event.
      const replay = await readEventStream(new URL(`/v1/agent/jobs/${jobId}/events?after=0`, second.url), { method: 'GET', headers: { authorization: headers.authorization } });
      expect(replay.events).toEqual([...first.events, ...rest.events]);
      const after = await fetch(new URL(`/v1/agent/jobs/${jobId}/events`, second.url), { headers: { authorization: headers.authorization, 'last-event-id': replay.ids.at(-1)! } });
      expect(after.status).toBe(204);
    } finally {
      release();
      await second.close();
    }
  }, 120_000);

  it('a run of one server nobody resumes, on any server, is cancelled there after the grace period', async () => {
    const second = await startApp({ ...server.config, port: 0, instance: `${server.config.instance}-second` });
    try {
      // Held before its answer, so that no reader takes any of it (that would have it charged).
      hold(0);
      const before = await balance();
      const { first, jobId } = await startedThenLeft();
      // A reader on the other server for longer than the grace period, then gone: the grace
      // period starts again when it leaves.
      const reader = new AbortController();
      const reading = await fetch(new URL(`/v1/agent/jobs/${jobId}/events?after=0`, second.url), { headers: { authorization: `Bearer ${user.key}` }, signal: reader.signal });
      expect(reading.status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, graceSeconds * 1500));
      expect((await job(jobId)).body.status).toBe('running');
      reader.abort();
      const left = Date.now();
      await until(async () => (await job(jobId)).body.status !== 'running', graceSeconds * 1000 + 5_000);
      expect(Date.now() - left).toBeGreaterThanOrEqual(graceSeconds * 1000 - 300);
      expect((await job(jobId)).body).toMatchObject({ status: 'cancelled', error: 'nobody resumed the stream' });
      expect(await balance()).toBe(before);
    } finally {
      release();
      await second.close();
    }
  }, 120_000);

  /** Reads a run's stream until `tokens` of its answer's words have come (the connection is then closed). */
  const untilTokens = (tokens: number) => {
    let seen = 0;
    return (event: AgentEvent) => event.type === 'token' && ++seen === tokens;
  };

  /** The events after `lastEventId` of a run, read on `url`'s server to its end. */
  const resumeOn = (url: string, jobId: string, lastEventId: string) =>
    readEventStream(new URL(`/v1/agent/jobs/${jobId}/events`, url), { method: 'GET', headers: { authorization: `Bearer ${user.key}`, 'last-event-id': lastEventId } });

  /** Another `kb serve` on the same store and model, with a short lease so that its death is seen soon. */
  async function doomedServer() {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'kb-takeover-'));
    const doomed = await serve({
      ...process.env,
      DATABASE_URL: server.config.databaseUrl,
      KB_DATA_DIR: dataDir,
      OPENAI_BASE_URL: baseUrl,
      OPENAI_CHAT_MODEL: 'fake-chat',
      OPENAI_TIMEOUT_SECONDS: '20',
      KB_AGENT_LEASE_SECONDS: '2',
      KB_LOG_LEVEL: 'error',
    });
    return {
      ...doomed,
      async end() {
        await stop(doomed.child, 'SIGKILL');
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  }

  /** Starts a resumable run on `url`'s server whose answer the model holds after `tokens` words, read until then. */
  async function startThenHold(url: string, tokens: number) {
    hold(tokens);
    const first = await streamAgent({ url } as TestServer, user.key, { ...question, workspaceIds: [workspaceId], resumable: true }, { stopAfter: untilTokens(tokens) });
    return { first, jobId: first.events[0]!.jobId as string };
  }

  it('a resumable run whose server is killed is not taken over, but refunded once its lease passes: a stalled server could still be answering it', async () => {
    const doomed = await doomedServer();
    try {
      const before = await balance();
      // Held after three words of its answer, and killed there.
      const { first, jobId } = await startThenHold(doomed.url, 3);
      await stop(doomed.child, 'SIGKILL');
      release();
      const rest = await resumeOn(server.url, jobId, first.ids.at(-1)!);
      expectIds(rest, jobId, first.events.length + 1);
      expect(rest.events).toEqual([{ type: 'error', code: 'service_unavailable', message: 'the process running the run stopped; nothing was charged' }]);
      expect(await balance()).toBe(before);
      expect((await job(jobId)).body.status).toBe('failed');
    } finally {
      release();
      await doomed.end();
    }
  }, 120_000);

  /**
   * Starts a resumable run on a second server on the same store and holds it after `tokens`
   * words; runs `meanwhile`, lets `rerun` set how the model makes the run again on `server` (as
   * the first time, by default), then drains the second server within a second and lets its hold go.
   */
  async function drainedDuring(name: string, tokens: number, options: { meanwhile?: (jobId: string) => Promise<void>; rerun?: () => void } = {}) {
    const draining = await startApp({ ...server.config, port: 0, instance: `${server.config.instance}-${name}`, drainSeconds: 1, drainNoticeSeconds: 0 });
    try {
      const { first, jobId } = await startThenHold(draining.url, tokens);
      await options.meanwhile?.(jobId);
      const releaseFirst = release;
      options.rerun?.();
      const drainedAt = performance.now();
      await draining.close({ drain: true });
      releaseFirst();
      return { first, jobId, drainedAt };
    } finally {
      await draining.close();
    }
  }

  /** A run drained as drainedDuring does, then resumed on `server` from the last event its first client took. */
  async function handedOver(name: string, tokens: number, meanwhile?: (jobId: string) => Promise<void>) {
    try {
      const { first, jobId, drainedAt } = await drainedDuring(name, tokens, { meanwhile });
      const rest = await resumeOn(server.url, jobId, first.ids.at(-1)!);
      expect(rest.status).toBe(200);
      expectIds(rest, jobId, first.events.length + 1);
      return { first, rest, jobId, resumedAfterMs: performance.now() - drainedAt };
    } finally {
      release();
    }
  }

  it('a resumable run still going when its server drains is handed to another server at once', async () => {
    const before = await balance();
    const { first, rest, jobId, resumedAfterMs } = await handedOver('draining', 2);
    // Taken at once (the draining server said so), not after its lease (15 s).
    expect(resumedAfterMs).toBeLessThan(10_000);
    expect(rest.events.at(-1)).toMatchObject({ type: 'done', jobId, creditsUsed: 1 });
    expect(answerOf([...first.events, ...rest.events])).toBe(await storedAnswer(rest.events.at(-1)!.sessionId));
    expect(await balance()).toBe(before - 1);
  }, 120_000);

  it('a run taken over that does not go the same way as its log ends with an error after the log, and a refund', async () => {
    const before = await balance();
    const { rest, jobId } = await handedOver('diverging', 3, async (jobId) => {
      // What the draining server logged is not what a run would make again (a model that samples).
      const third = await server.app.db.prisma.agentEvent.findFirst({ where: { jobId, data: { path: ['type'], equals: 'token' } }, orderBy: { seq: 'desc' } });
      await server.app.db.prisma.agentEvent.update({ where: { jobId_seq: { jobId, seq: third!.seq } }, data: { data: { type: 'token', content: ' otherwise' } } });
    });
    expect(rest.events).toEqual([{ type: 'error', code: 'service_unavailable', message: expect.stringContaining('could not be continued the same way') }]);
    expect(await balance()).toBe(before);
    expect((await job(jobId)).body.status).toBe('failed');
  }, 120_000);

  /** A run drained after three words of its answer (drainedDuring), once `server` has taken it over. */
  async function takenOver(name: string, rerun: () => void) {
    const drained = await drainedDuring(name, 3, { rerun });
    await until(async () => (await server.app.db.prisma.agentJob.findUniqueOrThrow({ where: { id: drained.jobId }, select: { takeovers: true } })).takeovers === 1);
    return drained;
  }

  const loggedRows = (jobId: string) => server.app.db.prisma.agentEvent.findMany({ where: { jobId }, orderBy: { seq: 'asc' }, select: { seq: true, data: true } });

  it('a reader back while the run taken over still makes its log again waits there for what follows; it is not told it names an event not sent', async () => {
    const before = await balance();
    try {
      // Held after its first word: short of the event the reader names.
      const { first, jobId } = await takenOver('replaying', () => hold(1));
      const resuming = resumeOn(server.url, jobId, first.ids.at(-1)!);
      const early = await Promise.race([resuming.then((stream) => `ended with ${stream.status}`), new Promise((resolve) => setTimeout(resolve, 1_000, 'waiting'))]);
      expect(early).toBe('waiting');
      release();
      const rest = await resuming;
      expect(rest.status).toBe(200);
      expectIds(rest, jobId, first.events.length + 1);
      expect(rest.events.at(-1)).toMatchObject({ type: 'done', jobId, creditsUsed: 1 });
      expect(answerOf([...first.events, ...rest.events])).toBe(await storedAnswer(rest.events.at(-1)!.sessionId));
      expect(await balance()).toBe(before - 1);
    } finally {
      release();
    }
  }, 120_000);

  it('a run taken over whose first client took part of the answer is finished and charged, though nobody comes back', async () => {
    const before = await balance();
    try {
      const { first, jobId } = await takenOver('taken', () => hold(1));
      // Held well past the grace period: the answer was taken, so the run is not cancelled.
      await new Promise((resolve) => setTimeout(resolve, graceSeconds * 2000));
      expect((await job(jobId)).body.status).toBe('running');
      release();
      await until(async () => (await job(jobId)).body.status !== 'running');
      expect((await job(jobId)).body).toMatchObject({ status: 'done', credits_used: 1 });
      const rows = await loggedRows(jobId);
      expect(rows.map((row) => row.seq)).toEqual(rows.map((_, index) => index + 1));
      expect(rows.slice(0, first.events.length).map((row) => row.data)).toEqual(first.events);
      expect(rows.at(-1)!.data).toMatchObject({ type: 'done', creditsUsed: 1 });
      expect(await balance()).toBe(before - 1);
    } finally {
      release();
    }
  }, 120_000);

  it('a run taken over that fails before it has made its log again ends after the log: its error follows the last event logged', async () => {
    const before = await balance();
    try {
      const { first, jobId } = await takenOver('failing', () => (failStreams = true));
      await until(async () => (await job(jobId)).body.status !== 'running');
      expect((await job(jobId)).body).toMatchObject({ status: 'failed', credits_used: 0 });
      const rows = await loggedRows(jobId);
      expect(rows.map((row) => row.seq)).toEqual(Array.from({ length: first.events.length + 1 }, (_, index) => index + 1));
      expect(rows.slice(0, -1).map((row) => row.data)).toEqual(first.events);
      expect(rows.at(-1)!.data).toMatchObject({ type: 'error', code: 'service_unavailable', message: expect.stringContaining('the answer model failed') });
      const rest = await resumeOn(server.url, jobId, first.ids.at(-1)!);
      expect(rest.events).toEqual([rows.at(-1)!.data]);
      expect(await balance()).toBe(before);
    } finally {
      failStreams = false;
    }
  }, 120_000);
});
