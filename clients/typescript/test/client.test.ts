// The typed client against a real server: real HTTP, the embedded model, the configured store.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer, type TestUser } from '../../../test/support/server.js';
import { waitForDocuments } from '../../../test/support/documents.js';
import { createClient, KbApiError, unwrap, type AgentEvent, type KbClient } from '../src/index.js';

let server: TestServer;
let user: TestUser;
let client: KbClient;
let workspaceId: string;

const reactorText =
  'Osiris was a pool-type research reactor at Saclay. The Osiris reactor reached criticality in 1966. ' +
  'Osiris ran at a power of 70 megawatts. The Osiris reactor was shut down in 2015.';

beforeAll(async () => {
  server = await startTestServer();
  user = await server.createUser({ credits: 100 });
  client = createClient({ baseUrl: server.url, apiKey: user.key });
  const workspace = unwrap(await client.POST('/v1/kb/workspaces', { body: { name: 'Reactors' } }));
  workspaceId = workspace.id;
  const [document] = unwrap(
    await client.POST('/v1/kb/workspaces/{id}/documents', {
      params: { path: { id: workspaceId } },
      body: { filename: 'osiris.txt', content: reactorText },
    }),
  );
  await waitForDocuments(server, user.key, [document!.id]);
});

afterAll(async () => {
  await server?.close();
});

async function collect(events: AsyncIterable<AgentEvent>) {
  const seen: AgentEvent[] = [];
  for await (const event of events) seen.push(event);
  return seen;
}

const answerOf = (events: AgentEvent[]) =>
  events
    .filter((event): event is Extract<AgentEvent, { type: 'token' }> => event.type === 'token')
    .map((event) => event.content)
    .join('');

describe('the typed client', () => {
  it('calls the REST endpoints with typed paths, parameters and bodies', async () => {
    const me = unwrap(await client.GET('/v1/user/me'));
    expect(me.email).toBe(user.email);
    expect(me.creditsBalance).toBe(100);
    for (const name of ['A', 'B']) unwrap(await client.POST('/v1/kb/workspaces', { body: { name } }));
    const page = await client.GET('/v1/kb/workspaces', { params: { query: { limit: 2 } } });
    expect(unwrap(page)).toHaveLength(2);
    const next = /cursor=([0-9a-f-]+)/.exec(page.response.headers.get('link') ?? '')?.[1];
    expect(next).toBeDefined();
    const rest = unwrap(await client.GET('/v1/kb/workspaces', { params: { query: { cursor: next! } } }));
    expect(rest.map((workspace) => workspace.name)).toContain('Reactors');
    const stats = unwrap(await client.GET('/v1/kb/workspaces/{id}/stats', { params: { path: { id: workspaceId } } }));
    expect(stats.document_count).toBe(1);
    const { results } = unwrap(await client.POST('/v1/kb/query', { body: { query: 'When did Osiris reach criticality?', workspace_id: workspaceId, top_k: 3 } }));
    expect(results[0]?.filename).toBe('osiris.txt');
    expect(results[0]?.content).toContain('1966');
  });

  it('turns refusals into KbApiError with the status, code, message and request id', async () => {
    const missing = await client.GET('/v1/kb/workspaces/{id}', { params: { path: { id: randomUUID() } } });
    expect(missing.response.status).toBe(404);
    expect(() => unwrap(missing)).toThrowError(KbApiError);
    try {
      unwrap(await client.POST('/v1/kb/workspaces', { body: { name: '   ' } }));
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(KbApiError);
      expect((error as KbApiError).status).toBe(400);
      expect((error as KbApiError).code).toBe('bad_request');
      expect((error as KbApiError).message).toMatch(/^name: /);
      expect((error as KbApiError).requestId).toMatch(/.+/);
    }
    const stranger = createClient({ baseUrl: server.url, apiKey: 'sk_not_a_real_key' });
    const refused = await stranger.GET('/v1/user/me');
    expect(refused.response.status).toBe(401);
    expect(refused.error?.error).toBe('unauthorized');
  });

  it('streams an answer as typed events, in the documented order', async () => {
    const events = await collect(client.streamAgent({ message: 'When did the Osiris reactor reach criticality?', workspaceIds: [workspaceId] }));
    expect(events[0]?.type).toBe('job_started');
    expect(events.at(-1)?.type).toBe('done');
    expect(events.filter((event) => event.type === 'done' || event.type === 'error')).toHaveLength(1);
    expect(answerOf(events)).toContain('1966');
    const done = events.at(-1) as Extract<AgentEvent, { type: 'done' }>;
    expect(done.creditsUsed).toBe(1);
    const sources = events.find((event) => event.type === 'sources') as Extract<AgentEvent, { type: 'sources' }>;
    expect(sources.sources[0]?.filename).toBe('osiris.txt');
  });

  it('resumes a dropped stream where it stopped: every event once, the answer whole, one charge', async () => {
    const before = unwrap(await client.GET('/v1/user/me')).creditsBalance;
    const requests: { method: string; url: string; lastEventId: string | null }[] = [];
    let dropped = false;
    // Cuts the first stream after its second event, as a flaky network would.
    const flakyFetch: typeof fetch = async (input, init) => {
      const url = String(input instanceof Request ? input.url : input);
      const headers = new Headers(init?.headers);
      requests.push({ method: init?.method ?? 'GET', url, lastEventId: headers.get('last-event-id') });
      const response = await fetch(input, init);
      if (dropped || !url.endsWith('/agent/stream') || !response.body) return response;
      dropped = true;
      const reader = response.body.getReader();
      let seen = 0;
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          const { value, done } = await reader.read();
          if (done) return controller.close();
          const text = new TextDecoder().decode(value);
          const events = text.split('\n\n').filter((block) => block.includes('data: '));
          if (seen + events.length >= 2) {
            const blocks = text.split('\n\n');
            let kept = '';
            for (const block of blocks) {
              if (seen >= 2) break;
              if (block.includes('data: ')) seen += 1;
              kept += `${block}\n\n`;
            }
            controller.enqueue(new TextEncoder().encode(kept));
            await reader.cancel();
            controller.error(new TypeError('network connection lost'));
            return;
          }
          seen += events.length;
          controller.enqueue(value);
        },
      });
      return new Response(body, { status: response.status, headers: response.headers });
    };
    const flaky = createClient({ baseUrl: server.url, apiKey: user.key, fetch: flakyFetch });
    const events = await collect(flaky.streamAgent({ message: 'When was the Osiris reactor shut down?', workspaceIds: [workspaceId] }));
    expect(dropped).toBe(true);
    const resumed = requests.find((request) => request.url.includes('/v1/agent/jobs/'));
    expect(resumed, 'the client reconnected').toBeDefined();
    expect(resumed!.lastEventId).toMatch(/^[0-9a-f-]{36}:2$/);
    expect(events.filter((event) => event.type === 'job_started')).toHaveLength(1);
    expect(events.filter((event) => event.type === 'done')).toHaveLength(1);
    expect(events.at(-1)?.type).toBe('done');
    const done = events.at(-1) as Extract<AgentEvent, { type: 'done' }>;
    const session = unwrap(await client.GET('/v1/chat/sessions/{id}', { params: { path: { id: done.sessionId } } }));
    const stored = session.messages.at(-1)!;
    expect(stored.role).toBe('assistant');
    expect(answerOf(events)).toBe(stored.content);
    expect(unwrap(await client.GET('/v1/user/me')).creditsBalance).toBe(before - done.creditsUsed);
  });

  it('follows a finished run by id from any event, and replays a run retried with the same Idempotency-Key', async () => {
    const key = randomUUID();
    const first = await collect(client.streamAgent({ message: 'How much power did Osiris run at?', workspaceIds: [workspaceId] }, { idempotencyKey: key }));
    const balance = unwrap(await client.GET('/v1/user/me')).creditsBalance;
    const retried = await collect(client.streamAgent({ message: 'How much power did Osiris run at?', workspaceIds: [workspaceId] }, { idempotencyKey: key }));
    expect(retried).toEqual(first);
    expect(unwrap(await client.GET('/v1/user/me')).creditsBalance).toBe(balance);
    const jobId = (first[0] as Extract<AgentEvent, { type: 'job_started' }>).jobId;
    const tail = await collect(client.followAgentRun(jobId, { lastEventId: `${jobId}:1` }));
    expect(tail).toEqual(first.slice(1));
    const job = unwrap(await client.GET('/v1/agent/jobs/{id}', { params: { path: { id: jobId } } }));
    expect(job.status).toBe('done');
  });
});
