/**
 * The connection attacks of `npm run bench:hostile`: clients that ask for large answers and never
 * read them, and graphql-sse streams reserved, fed and never opened. Each attack runs against a
 * server of its own process; its resident memory is sampled throughout and another user's
 * requests are timed meanwhile.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { log, percentile, sleep, type ServiceClient } from './helpers.js';

type Api = ServiceClient<{ id: string; filename: string; status: string; error: string | null }> & {
  settled(ids: string[]): Promise<{ id: string; status: string }[]>;
};

export type AttackResult = {
  name: string;
  baselineRss: number;
  peakRss: number;
  afterRss: number;
  victimMs: number[];
  victimFailures: number;
  rssSamples: { at: number; bytes: number }[];
  notes: string[];
};

export type AttackContext = {
  url: string;
  pid: number;
  hostile: Api;
  victim: Api;
  victimWorkspace: string;
  hostileWorkspace: string;
};

function residentBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)![1]) * 1024;
}

/** The median of readings over two seconds, once the server has had a moment of quiet. */
async function settledResidentBytes(pid: number) {
  await sleep(3_000);
  const readings: number[] = [];
  for (let index = 0; index < 5; index++) {
    readings.push(residentBytes(pid));
    await sleep(400);
  }
  return percentile(readings, 50);
}

/** Another user's work while an attack runs: a workspace list every 100 ms and a search every 500 ms. */
function victimProbe(context: AttackContext) {
  const samples: number[] = [];
  let failures = 0;
  let running = true;
  const done = (async () => {
    for (let tick = 0; running; tick++) {
      const started = performance.now();
      try {
        if (tick % 5 === 4) await context.victim.json('POST', '/v1/kb/query', { query: 'a quiet note', workspace_id: context.victimWorkspace, top_k: 3 });
        else await context.victim.json('GET', '/v1/kb/workspaces');
        samples.push(performance.now() - started);
      } catch {
        failures++;
      }
      await sleep(100);
    }
  })();
  return {
    async stop() {
      running = false;
      await done;
      return { samples, failures };
    },
  };
}

function rssSampler(pid: number) {
  const samples: { at: number; bytes: number }[] = [];
  const started = performance.now();
  const timer = setInterval(() => samples.push({ at: (performance.now() - started) / 1000, bytes: residentBytes(pid) }), 250);
  return {
    stop() {
      clearInterval(timer);
      return samples;
    },
  };
}

/**
 * A raw HTTP/1.1 request on its own socket whose answer is not read. `settle()` reads at last:
 * what was on its way, then either the rest of the answer or the end of a connection the server
 * cut; it tells which (for at most five seconds).
 */
function neverReading(url: string, head: string, body = '') {
  const { hostname, port } = new URL(url);
  const socket: Socket = connect({ host: hostname, port: Number(port) });
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.write(`${head}\r\nHost: ${hostname}:${port}\r\n${body ? `Content-Length: ${Buffer.byteLength(body)}\r\n` : ''}\r\n${body}`);
  // No 'data' listener and no resume(): the socket stays paused and the answer waits in the kernel.
  return {
    socket,
    async settle(): Promise<'cut' | 'complete' | 'still sending'> {
      const parts: Buffer[] = [];
      socket.on('data', (data: Buffer) => parts.push(data));
      const ended = await Promise.race([closed.then(() => true), sleep(5_000).then(() => false)]);
      socket.destroy();
      const answer = Buffer.concat(parts);
      const headEnd = answer.indexOf('\r\n\r\n');
      const length = /^content-length: *(\d+)/im.exec(answer.subarray(0, Math.max(headEnd, 0)).toString('latin1'))?.[1];
      const complete = headEnd >= 0 && (length !== undefined ? answer.length - headEnd - 4 >= Number(length) : answer.subarray(-5).toString('latin1') === '0\r\n\r\n');
      return complete ? 'complete' : ended ? 'cut' : 'still sending';
    },
  };
}

/** A file the service keeps but cannot read (a PDF header, then noise): stored at once, failed at once. */
async function unreadableFile(context: AttackContext, name: string, bytes: number) {
  const content = Buffer.concat([Buffer.from('%PDF-1.7\n'), randomBytes(bytes - 9)]);
  const [document] = await context.hostile.upload(context.hostileWorkspace, [{ name, bytes: content }]);
  await context.hostile.settled([document!.id]);
  return document!.id;
}

async function measured(context: AttackContext, name: string, attack: () => Promise<string[]>): Promise<AttackResult> {
  log(`${name}: reading the baseline...`);
  const baselineRss = await settledResidentBytes(context.pid);
  const probe = victimProbe(context);
  const sampler = rssSampler(context.pid);
  const notes = await attack();
  const rssSamples = sampler.stop();
  const victim = await probe.stop();
  log(`${name}: reading the memory after...`);
  const afterRss = await settledResidentBytes(context.pid);
  return {
    name,
    baselineRss,
    peakRss: Math.max(...rssSamples.map((sample) => sample.bytes)),
    afterRss,
    victimMs: victim.samples,
    victimFailures: victim.failures,
    rssSamples,
    notes,
  };
}

/**
 * Slow readers: 20 clients ask for a 45 MiB file over REST, 20 for a 3 MiB file twice over GraphQL
 * (`documentFile { base64 }`) and 5 for the 45 MiB one twice over GraphQL, and none of them reads.
 * Held 45 s: longer than the server's send timeout.
 */
export async function slowReaders(context: AttackContext, holdSeconds = 45): Promise<AttackResult> {
  const large = await unreadableFile(context, 'large.pdf', 45 * 1024 * 1024);
  const middle = await unreadableFile(context, 'middle.pdf', 3 * 1024 * 1024);
  const auth = `Authorization: Bearer ${context.hostile.key}`;
  const graphql = (id: string) =>
    JSON.stringify({
      query: 'query($id: ID!, $w: ID!) { a: documentFile(id: $id, workspaceId: $w) { base64 } b: documentFile(id: $id, workspaceId: $w) { base64 } }',
      variables: { id, w: context.hostileWorkspace },
    });
  return measured(context, 'slow readers', async () => {
    const clients = [
      ...Array.from({ length: 20 }, () => neverReading(context.url, `GET /v1/kb/documents/${large}/file?workspace_id=${context.hostileWorkspace} HTTP/1.1\r\n${auth}`)),
      ...Array.from({ length: 20 }, () => neverReading(context.url, `POST /graphql HTTP/1.1\r\n${auth}\r\nContent-Type: application/json`, graphql(middle))),
      ...Array.from({ length: 5 }, () => neverReading(context.url, `POST /graphql HTTP/1.1\r\n${auth}\r\nContent-Type: application/json`, graphql(large))),
    ];
    await sleep(holdSeconds * 1000);
    const outcomes = await Promise.all(clients.map((client) => client.settle()));
    const count = (group: typeof outcomes, outcome: string) => group.filter((item) => item === outcome).length;
    const described = (label: string, group: typeof outcomes) =>
      `${label}: ${count(group, 'cut')} cut by the server, ${count(group, 'complete')} answered whole, ${count(group, 'still sending')} still sending`;
    return [
      `${clients.length} clients that never read, held ${holdSeconds} s, then read:`,
      described('  20 REST downloads of 45 MiB', outcomes.slice(0, 20)),
      described('  20 GraphQL reads of 2 x 3 MiB in base64', outcomes.slice(20, 40)),
      described('  5 GraphQL reads of 2 x 45 MiB in base64', outcomes.slice(40)),
    ];
  });
}

/**
 * Unopened streams: the user reserves graphql-sse streams up to its limit (and tries 100 more),
 * sends 5 reads of a 3 MiB file's base64 to each and never opens any. Held 40 s: longer than the
 * expiry of an unopened stream.
 */
export async function unopenedStreams(context: AttackContext, holdSeconds = 40): Promise<AttackResult> {
  const middle = await unreadableFile(context, 'streamed.pdf', 3 * 1024 * 1024);
  const endpoint = new URL('/graphql/stream', context.url);
  const headers = { authorization: `Bearer ${context.hostile.key}` };
  return measured(context, 'unopened graphql-sse streams', async () => {
    const tokens: string[] = [];
    const refusals = new Map<number, number>();
    for (let attempt = 0; attempt < 110; attempt++) {
      const response = await fetch(endpoint, { method: 'PUT', headers });
      if (response.status === 201) tokens.push(await response.text());
      else refusals.set(response.status, (refusals.get(response.status) ?? 0) + 1);
      if (response.status !== 201) await response.body?.cancel();
    }
    const query = 'query($id: ID!, $w: ID!) { documentFile(id: $id, workspaceId: $w) { base64 } }';
    const answered = new Map<number, number>();
    // Sent at once; a POST to a stream not open is answered when the stream opens or is dropped.
    const sending = Promise.all(
      tokens.flatMap((token) =>
        Array.from({ length: 5 }, async (_, index) => {
          const response = await fetch(endpoint, {
            method: 'POST',
            headers: { ...headers, 'content-type': 'application/json', 'x-graphql-event-stream-token': token },
            body: JSON.stringify({ query, variables: { id: middle, w: context.hostileWorkspace }, extensions: { operationId: `op${index}` } }),
          });
          answered.set(response.status, (answered.get(response.status) ?? 0) + 1);
          await response.body?.cancel();
        }),
      ),
    );
    await sleep(holdSeconds * 1000);
    await sending;
    let gone = 0;
    for (const token of tokens) {
      const response = await fetch(endpoint, { headers: { ...headers, accept: 'text/event-stream', 'x-graphql-event-stream-token': token } });
      if (response.status === 404) gone++;
      await response.body?.cancel();
    }
    return [
      `110 reservations asked: ${tokens.length} made, refused ${[...refusals].map(([status, count]) => `${count} with ${status}`).join(', ') || 'none'}`,
      `${tokens.length * 5} reads of a 3 MiB file's base64 sent to the unopened streams, answered ${[...answered].map(([status, count]) => `${count} with ${status}`).join(', ')}`,
      `after ${holdSeconds} s, ${gone} of ${tokens.length} streams were gone (404)`,
    ];
  });
}
