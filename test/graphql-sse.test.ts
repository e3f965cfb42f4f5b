import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upload, waitForDocuments } from './support/documents.js';
import { openStream, readUntilComplete, reserveStream, sendToStream } from './support/graphql-sse.js';
import { startTestServer, type TestServer, type TestUser } from './support/server.js';
import { createWorkspace } from './support/fixtures.js';

/**
 * graphql-sse's single connection mode at /graphql/stream (docs/api.md, "Event streams of
 * graphql-sse"): reservations per user, unopened streams dropped, the queue of results a reader
 * has not taken, and tokens bound to the credential that reserved them.
 */
const unopenedSeconds = 1;
const streamsPerUser = 3;
const queueBytes = 0.5 * 1024 * 1024;

let server: TestServer;
let user: TestUser;
let workspaceId: string;

beforeAll(async () => {
  server = await startTestServer({
    KB_GRAPHQL_SSE_STREAMS_PER_USER: String(streamsPerUser),
    KB_GRAPHQL_SSE_UNOPENED_SECONDS: String(unopenedSeconds),
    KB_GRAPHQL_SSE_QUEUE_MB: String(queueBytes / 1024 / 1024),
  });
  user = await server.createUser({ credits: 100 });
  workspaceId = (await createWorkspace(server, user.key, 'streams')).id;
  const uploaded = await upload(server, user.key, workspaceId, [
    { name: 'kiln.md', bytes: 'The Harwick kiln fires stoneware at 1,280 degrees Celsius. It was built by Odile Ferrant in 1962.' },
  ]);
  await waitForDocuments(server, user.key, uploaded.body.map((document: { id: string }) => document.id));
}, 300_000);

afterAll(async () => {
  await server?.close();
});

const subscription = 'subscription($input: AgentStreamInput!) { agentStream(input: $input) { __typename ... on AgentDone { creditsUsed } } }';
const balance = async () => (await server.request('GET', '/v1/user/me', { key: user.key })).body.creditsBalance as number;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const reserve = (key = user.key) => reserveStream(server.url, key);
const send = (token: string, operationId: string, body: { query: string; variables?: unknown }, key = user.key) => sendToStream(server.url, key, token, operationId, body);
const open = (token: string, key = user.key, signal?: AbortSignal) => openStream(server.url, key, token, signal);

describe('graphql-sse single connection mode', () => {
  it(`lets a user hold ${streamsPerUser} reserved streams; the next PUT is 429 with Retry-After until one is dropped`, async () => {
    const tokens: string[] = [];
    for (let count = 0; count < streamsPerUser; count++) {
      const reserved = await reserve();
      expect(reserved.status).toBe(201);
      tokens.push(await reserved.text());
    }
    const refused = await reserve();
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe(String(unopenedSeconds));
    expect(await refused.json()).toMatchObject({ error: 'rate_limited', message: expect.stringContaining(`at most ${streamsPerUser} event streams`) });
    // Another user is not held back.
    const other = await server.createUser();
    expect((await reserve(other.key)).status).toBe(201);
    // Unopened, they are dropped after the expiry, and their places are free again.
    await sleep(unopenedSeconds * 1000 + 500);
    for (const token of tokens) expect((await open(token)).status).toBe(404);
    expect((await reserve()).status).toBe(201);
  });

  it('runs nothing sent to a stream before it opens, and drops a stream never opened: the run never starts, nothing is charged', async () => {
    const before = await balance();
    const jobsBefore = await server.app.db.prisma.agentJob.count({ where: { userId: user.id } });
    const token = await (await reserve()).text();
    const started = performance.now();
    const sent = await send(token, 'run', { query: subscription, variables: { input: { message: 'Who built the Harwick kiln?', workspaceIds: [workspaceId] } } });
    // Answered once the stream is dropped, not before.
    expect(performance.now() - started).toBeGreaterThanOrEqual(unopenedSeconds * 1000 - 100);
    expect(sent.status).toBe(404);
    expect((await open(token)).status).toBe(404);
    expect(await balance()).toBe(before);
    expect(await server.app.db.prisma.agentJob.count({ where: { userId: user.id } })).toBe(jobsBefore);
  });

  it('holds a run sent before its stream opens, starts it when the stream opens, and delivers and charges it', async () => {
    const before = await balance();
    const token = await (await reserve()).text();
    const sent = send(token, 'run', { query: subscription, variables: { input: { message: 'Who built the Harwick kiln?', workspaceIds: [workspaceId] } } });
    await sleep(300);
    expect(await balance()).toBe(before);
    const stream = await open(token);
    expect((await sent).status).toBe(202);
    const results = await readUntilComplete(stream, ['run']);
    expect(results.get('run')!.at(-1).data.agentStream).toEqual({ __typename: 'AgentDone', creditsUsed: 1 });
    expect(await balance()).toBe(before - 1);
  });

  it('holds what its reader has not taken up to the bound, and drops further results with a rate_limited error', async () => {
    const bytes = Buffer.concat([Buffer.from('%PDF-1.7\n'), randomBytes(1536 * 1024)]);
    const uploaded = await upload(server, user.key, workspaceId, [{ name: 'noise.pdf', bytes }]);
    const documentId = uploaded.body[0].id as string;
    await waitForDocuments(server, user.key, [documentId]);
    const query = 'query($id: ID!, $w: ID!) { documentFile(id: $id, workspaceId: $w) { base64 } }';
    const token = await (await reserve()).text();
    // Opened, then not read for a while: what it is sent waits in the client's and the kernel's buffers.
    const stream = await open(token);
    const ids = Array.from({ length: 8 }, (_, index) => `q${index}`);
    // One after another: the bound is on what waits unread, however fast it came; eight reads of
    // the file at once, beside another file's reindex, once kept two of them waiting for the store
    // (503) on CI's Elasticsearch leg.
    const sent: Response[] = [];
    for (const id of ids) sent.push(await send(token, id, { query, variables: { id: documentId, w: workspaceId } }));
    const answers = await Promise.all(sent.map(async (response) => `${response.status} ${await response.clone().text()}`));
    expect(sent.map((response) => response.status), answers.join(' | ')).toEqual(ids.map(() => 202));
    await sleep(1_000);
    const results = await readUntilComplete(stream, ids);
    const delivered = ids.filter((id) => results.get(id)![0].data?.documentFile?.base64?.length > 0);
    const dropped = ids.filter((id) => results.get(id)![0].errors?.[0]?.extensions?.code === 'rate_limited');
    expect(delivered.length + dropped.length).toBe(ids.length);
    expect(delivered.length).toBeGreaterThanOrEqual(1);
    expect(dropped.length).toBeGreaterThanOrEqual(1);
    expect(results.get(dropped[0]!)![0].errors[0].message).toContain('results its reader has not taken');
  }, 60_000);

  it('binds a token to the credential that reserved it: a narrower key of the same user can neither open nor feed it', async () => {
    const narrow = await server.createKey(user, ['user:read']);
    const token = await (await reserve()).text();
    const opened = await open(token, narrow);
    expect(opened.status).toBe(404);
    expect((await opened.json()).error).toBe('not_found');
    const fed = await send(token, 'x', { query: "{ me { id } }" }, narrow);
    expect(fed.status).toBe(404);
    // The same key still can.
    const controller = new AbortController();
    const mine = await open(token, user.key, controller.signal);
    expect(mine.status).toBe(200);
    controller.abort();
  });
});
