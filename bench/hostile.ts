/**
 * `npm run bench:hostile`: does one user's hostile upload hold back anybody else?
 *
 * Starts the real server from dist/ as its own process (embedded store in a temporary
 * directory) and, in each of BENCH_ROUNDS rounds (3):
 *   - a quiet phase: another user uploads a small note; the time until it is `ready`, and
 *     /healthz latency, with nothing else to do;
 *   - a hostile phase: one user uploads a megabyte of text without whitespace, a zip-bomb DOCX
 *     (0.85-1.2 MB holding 300 MB of XML) and lyft_2021.pdf (238 pages); half a second later
 *     the other user uploads the same kind of small note. /healthz is probed every 50 ms until
 *     every document has settled.
 * The server's resident memory (VmRSS) is read before the first round and after the last, each
 * time when it is idle and its parsing processes have ended (the server is started with
 * KB_PARSE_THREAD_IDLE_SECONDS=30, so they end 30 s after their last task).
 *
 * Then the connection attacks (bench/connection-attacks.ts), each measured from its own baseline:
 *   - slow readers: 45 clients ask for large files (REST, and GraphQL base64) and never read;
 *   - unopened streams: graphql-sse streams reserved up to the limit, fed reads of a 3 MiB file,
 *     never opened.
 * During each, the server's resident memory is sampled every 250 ms and another user lists its
 * workspaces and searches every 100 ms. The targets: memory within 20 % of the baseline during
 * and after, the other user's p99 under 100 ms.
 *
 * Prints a table (medians over the rounds, and the quiet/hostile ratio measured in the same
 * run), the attacks' table, and writes bench/results/hostile.html with /healthz latency over time
 * and the server's memory during the attacks. BENCH_ROUNDS=0 runs the attacks only.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { makeZipBombDocx } from '../test/support/documents.js';
import { slowReaders, unopenedStreams, type AttackResult } from './connection-attacks.js';
import { log, ServiceClient, sleep } from './helpers.js';

const root = path.resolve(import.meta.dirname, '..');
const resultsDir = path.join(root, 'bench/results');
const pdfPath = path.resolve(root, '../shared/bench-data/pdfs/lyft_2021.pdf');
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
if (!Number.isInteger(rounds) || rounds < 0) throw new Error(`BENCH_ROUNDS must be a whole number, got ${process.env.BENCH_ROUNDS}`);
const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};

type Document = { id: string; filename: string; status: string; error: string | null };

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

function kb(args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(root, 'bin/kb.mjs'), ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (data) => (out += data));
    child.stderr.on('data', (data) => (err += data));
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`kb ${args.join(' ')}: ${err}`))));
  });
}

function residentBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)![1]) * 1024;
}

/** The service's API, and a wait for documents to settle. */
class Api extends ServiceClient<Document> {
  async settled(ids: string[]): Promise<Document[]> {
    for (;;) {
      const documents = (await Promise.all(ids.map((id) => this.json<Document>('GET', `/v1/kb/documents/${id}`))));
      if (documents.every((document) => document.status === 'ready' || document.status === 'failed')) return documents;
      await sleep(50);
    }
  }
}

/** Probes /healthz every 50 ms; each probe's latency with the time it was sent. */
function healthProbe(url: string) {
  const samples: { at: number; ms: number }[] = [];
  let running = true;
  const started = performance.now();
  const done = (async () => {
    while (running) {
      const sent = performance.now();
      const response = await fetch(new URL('/healthz', url));
      await response.text();
      samples.push({ at: (sent - started) / 1000, ms: performance.now() - sent });
      await sleep(50);
    }
  })();
  return {
    async stop() {
      running = false;
      await done;
      return samples;
    },
  };
}

async function idleResidentBytes(pid: number, url: string) {
  // The parsing processes end 30 s after their last task; then memory is what the server keeps.
  await sleep(32_000);
  await fetch(new URL('/healthz', url));
  const readings = [];
  for (let index = 0; index < 5; index++) {
    readings.push(residentBytes(pid));
    await sleep(400);
  }
  return median(readings);
}

type Round = {
  quietNoteSeconds: number;
  quietHealth: number[];
  hostileNoteSeconds: number;
  hostileHealth: { at: number; ms: number }[];
  hostileSeconds: number;
  outcomes: Document[];
};

async function main() {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'kb-bench-hostile-'));
  const port = await freePort();
  const env = { ...process.env, KB_DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: String(port), KB_LOG_LEVEL: 'error', KB_PARSE_THREAD_IDLE_SECONDS: '30' };
  const url = `http://127.0.0.1:${port}`;
  let server: ChildProcess | undefined;
  try {
    log('making the zip bomb (300 MB of XML)...');
    const bomb = await makeZipBombDocx(300 * 1024 * 1024);
    const pdf = new Uint8Array(await readFile(pdfPath));
    let seed = 11;
    const noSpaces = Array.from({ length: 1_000_000 }, () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return String.fromCharCode(97 + Math.floor((seed / 2147483648) * 26));
    }).join('');

    server = spawn(process.execPath, [path.join(root, 'bin/kb.mjs'), 'serve'], { env, stdio: ['pipe', 'pipe', 'inherit'] });
    server.stdout!.resume();
    for (let attempt = 0; ; attempt++) {
      try {
        if ((await fetch(new URL('/healthz', url))).ok) break;
      } catch {
        if (attempt > 200) throw new Error('the server did not start');
      }
      await sleep(100);
    }
    const newUser = async (email: string) => {
      const created = JSON.parse(await kb(['users', 'create', '--email', email, '--name', email, '--credits', '0'], env));
      const api = new Api(url, created.api_key.raw_key);
      return api;
    };
    const hostile = await newUser('hostile@example.com');
    const victim = await newUser('victim@example.com');

    // Warm-up: a parsing process and its modules loaded once, as on any server that has served.
    const warm = await victim.json<{ id: string }>('POST', '/v1/kb/workspaces', { name: 'Warm-up' });
    await victim.settled((await victim.upload(warm.id, [{ name: 'warm.txt', bytes: 'Warm-up note.' }])).map((d) => d.id));
    log('reading the idle baseline (32 s)...');
    const baselineRss = await idleResidentBytes(server.pid!, url);

    const results: Round[] = [];
    for (let round = 1; round <= rounds; round++) {
      const victimSpace = await victim.json<{ id: string }>('POST', '/v1/kb/workspaces', { name: `Notes ${round}` });
      const hostileSpace = await hostile.json<{ id: string }>('POST', '/v1/kb/workspaces', { name: `Hostile ${round}` });

      const quietProbe = healthProbe(url);
      await sleep(1000);
      let started = performance.now();
      const [quietNote] = await victim.upload(victimSpace.id, [{ name: 'quiet.txt', bytes: `A quiet note, round ${round}.` }]);
      await victim.settled([quietNote!.id]);
      const quietNoteSeconds = (performance.now() - started) / 1000;
      const quietHealth = (await quietProbe.stop()).map((sample) => sample.ms);

      log(`round ${round}: hostile uploads...`);
      const probe = healthProbe(url);
      const hostileStarted = performance.now();
      const uploads = await Promise.all([
        hostile.upload(hostileSpace.id, [{ name: `no-spaces-${round}.txt`, bytes: noSpaces + round }]),
        hostile.upload(hostileSpace.id, [{ name: `bomb-${round}.docx`, bytes: bomb }]),
        hostile.upload(hostileSpace.id, [{ name: `lyft-${round}.pdf`, bytes: pdf }]),
      ]);
      await sleep(500);
      started = performance.now();
      const [note] = await victim.upload(victimSpace.id, [{ name: 'note.txt', bytes: `Another user's note, round ${round}.` }]);
      await victim.settled([note!.id]);
      const hostileNoteSeconds = (performance.now() - started) / 1000;
      const outcomes = await hostile.settled(uploads.flat().map((document) => document.id));
      const hostileSeconds = (performance.now() - hostileStarted) / 1000;
      const hostileHealth = await probe.stop();
      results.push({ quietNoteSeconds, quietHealth, hostileNoteSeconds, hostileHealth, hostileSeconds, outcomes });
      log(
        `round ${round}: note ready in ${hostileNoteSeconds.toFixed(2)} s (quiet ${quietNoteSeconds.toFixed(2)} s), ` +
          `/healthz p99 ${percentile(hostileHealth.map((s) => s.ms), 99).toFixed(1)} ms, hostile work ${hostileSeconds.toFixed(1)} s: ` +
          outcomes.map((document) => `${document.filename} ${document.status}${document.error ? ` (${document.error})` : ''}`).join('; '),
      );
    }

    const afterRss = rounds > 0 ? (log('reading the idle memory after the rounds (32 s)...'), await idleResidentBytes(server.pid!, url)) : baselineRss;

    const attackSpace = await victim.json<{ id: string }>('POST', '/v1/kb/workspaces', { name: 'Attacks' });
    await victim.settled((await victim.upload(attackSpace.id, [{ name: 'quiet.txt', bytes: 'A quiet note about the attacks.' }])).map((d) => d.id));
    const hostileAttackSpace = await hostile.json<{ id: string }>('POST', '/v1/kb/workspaces', { name: 'Attacks' });
    const context = { url, pid: server.pid!, hostile, victim, victimWorkspace: attackSpace.id, hostileWorkspace: hostileAttackSpace.id };
    const attacks = [await slowReaders(context), await unopenedStreams(context)];
    await report(results, baselineRss, afterRss, bomb.byteLength, attacks);
  } finally {
    server?.kill('SIGTERM');
    await sleep(500);
    await rm(dataDir, { recursive: true, force: true });
  }
}

async function report(results: Round[], baselineRss: number, afterRss: number, bombBytes: number, attacks: AttackResult[]) {
  if (results.length > 0) reportRounds(results, baselineRss, afterRss, bombBytes);
  reportAttacks(attacks);
  await writeChart(results, attacks);
}

function reportAttacks(attacks: AttackResult[]) {
  const mb = (bytes: number) => `${Math.round(bytes / 1024 / 1024)} MB`;
  const change = (bytes: number, base: number) => `${bytes >= base ? '+' : ''}${(((bytes - base) / base) * 100).toFixed(1)}%`;
  const header = ['attack', 'RSS before', 'peak during', 'after', 'other user p50', 'p99', 'failed'];
  const rows = attacks.map((attack) => [
    attack.name,
    mb(attack.baselineRss),
    `${mb(attack.peakRss)} (${change(attack.peakRss, attack.baselineRss)})`,
    `${mb(attack.afterRss)} (${change(attack.afterRss, attack.baselineRss)})`,
    `${percentile(attack.victimMs, 50).toFixed(1)} ms`,
    `${percentile(attack.victimMs, 99).toFixed(1)} ms`,
    String(attack.victimFailures),
  ]);
  const widths = header.map((cell, column) => Math.max(cell.length, ...rows.map((row) => row[column]!.length)));
  const line = (cells: string[]) => cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join('  ');
  console.log(`\nconnection attacks (memory sampled every 250 ms; the other user lists workspaces every 100 ms and searches every 500 ms)`);
  console.log([line(header), widths.map((width) => '-'.repeat(width)).join('  '), ...rows.map(line)].join('\n'));
  for (const attack of attacks) {
    const within = Math.max(attack.peakRss, attack.afterRss) <= attack.baselineRss * 1.2;
    const fast = percentile(attack.victimMs, 99) < 100 && attack.victimFailures === 0;
    console.log(`\n${attack.name}: memory ${within ? 'stayed' : 'did NOT stay'} within 20 % of its baseline; the other user's p99 ${fast ? 'is' : 'is NOT'} under 100 ms`);
    for (const note of attack.notes) console.log(`  ${note}`);
  }
}

function reportRounds(results: Round[], baselineRss: number, afterRss: number, bombBytes: number) {
  const ms = (value: number) => `${value.toFixed(1)} ms`;
  const s = (value: number) => `${value.toFixed(2)} s`;
  const mb = (bytes: number) => `${Math.round(bytes / 1024 / 1024)} MB`;
  const quietHealth = results.flatMap((round) => round.quietHealth);
  const hostileHealth = results.flatMap((round) => round.hostileHealth.map((sample) => sample.ms));
  const quietNote = median(results.map((round) => round.quietNoteSeconds));
  const hostileNote = median(results.map((round) => round.hostileNoteSeconds));
  const rows = [
    ['small note of another user: upload to ready', s(quietNote), s(hostileNote), `${(hostileNote / quietNote).toFixed(1)}x`],
    ['/healthz p50', ms(percentile(quietHealth, 50)), ms(percentile(hostileHealth, 50)), ''],
    ['/healthz p95', ms(percentile(quietHealth, 95)), ms(percentile(hostileHealth, 95)), ''],
    ['/healthz p99', ms(percentile(quietHealth, 99)), ms(percentile(hostileHealth, 99)), ''],
    ['/healthz max', ms(Math.max(...quietHealth)), ms(Math.max(...hostileHealth)), ''],
    ['/healthz probes', String(quietHealth.length), String(hostileHealth.length), ''],
    ['hostile uploads: upload to all settled', '', s(median(results.map((round) => round.hostileSeconds))), ''],
  ];
  const header = ['', 'quiet', 'under hostile uploads', 'ratio'];
  const widths = header.map((cell, column) => Math.max(cell.length, ...rows.map((row) => row[column]!.length)));
  const line = (cells: string[]) => cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join('  ');
  console.log(`\nbench:hostile, ${results.length} rounds (medians; /healthz over all probes), ${os.cpus().length} cores, ${new Date().toISOString().slice(0, 10)}`);
  console.log([line(header), widths.map((width) => '-'.repeat(width)).join('  '), ...rows.map(line)].join('\n'));
  console.log('\nhostile documents (last round):');
  for (const document of results.at(-1)!.outcomes) console.log(`  ${document.filename}: ${document.status}${document.error ? ` (${document.error})` : ''}`);
  const growth = (afterRss - baselineRss) / baselineRss;
  console.log(`\nzip bomb: ${(bombBytes / 1024 / 1024).toFixed(2)} MB holding 300 MB of XML`);
  console.log(`server RSS, idle: ${mb(baselineRss)} before the rounds, ${mb(afterRss)} after (${growth >= 0 ? '+' : ''}${(growth * 100).toFixed(1)}%; limit +20%)`);
  console.log(`/healthz p99 under hostile uploads ${percentile(hostileHealth, 99) < 100 ? 'is' : 'is NOT'} under 100 ms`);
}

/** The server's resident memory through each attack, against its baseline and the +20 % line. */
function memoryChart(attack: AttackResult) {
  const width = 900;
  const height = 260;
  const maxAt = Math.max(1, ...attack.rssSamples.map((sample) => sample.at));
  const limit = attack.baselineRss * 1.2;
  const top = Math.max(limit * 1.1, ...attack.rssSamples.map((sample) => sample.bytes));
  const y = (bytes: number) => height - 30 - (bytes / top) * (height - 50);
  const x = (at: number) => 50 + (at / maxAt) * (width - 70);
  const path = attack.rssSamples.map((sample, index) => `${index ? 'L' : 'M'}${x(sample.at).toFixed(1)},${y(sample.bytes).toFixed(1)}`).join('');
  const mb = (bytes: number) => `${Math.round(bytes / 1024 / 1024)} MB`;
  return `<h2>Server memory during: ${attack.name}</h2><svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="11">
<line x1="50" y1="${height - 30}" x2="${width - 20}" y2="${height - 30}" stroke="#333"/><line x1="50" y1="20" x2="50" y2="${height - 30}" stroke="#333"/>
<line x1="50" y1="${y(attack.baselineRss)}" x2="${width - 20}" y2="${y(attack.baselineRss)}" stroke="#888" stroke-dasharray="2 3"/><text x="${width - 170}" y="${y(attack.baselineRss) + 12}" fill="#555">baseline ${mb(attack.baselineRss)}</text>
<line x1="50" y1="${y(limit)}" x2="${width - 20}" y2="${y(limit)}" stroke="#c00" stroke-dasharray="4 3"/><text x="${width - 170}" y="${y(limit) - 4}" fill="#c00">+20 % ${mb(limit)}</text>
<path d="${path}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>
<text x="4" y="24">${mb(top)}</text><text x="40" y="${height - 16}">0</text><text x="${width - 50}" y="${height - 16}">${maxAt.toFixed(0)} s</text>
<text x="${width / 2 - 100}" y="${height - 4}">seconds since the attack began (RSS every 250 ms)</text></svg>`;
}

async function writeChart(results: Round[], attacks: AttackResult[]) {
  await mkdir(resultsDir, { recursive: true });
  if (results.length === 0) {
    const html = `<!doctype html><meta charset="utf-8"><title>bench:hostile</title><h1>bench:hostile: connection attacks</h1>${attacks.map(memoryChart).join('')}`;
    await writeFile(path.join(resultsDir, 'hostile.html'), html);
    log(`chart: ${path.join(resultsDir, 'hostile.html')}`);
    return;
  }
  const width = 900;
  const height = 300;
  const samples = results.flatMap((round, index) => round.hostileHealth.map((sample) => ({ ...sample, round: index + 1 })));
  const maxAt = Math.max(...samples.map((sample) => sample.at), 1);
  const maxMs = Math.max(100, ...samples.map((sample) => sample.ms));
  const colors = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd'];
  const points = samples
    .map((sample) => {
      const x = 40 + (sample.at / maxAt) * (width - 60);
      const y = height - 30 - (sample.ms / maxMs) * (height - 50);
      return `<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="2" fill="${colors[(sample.round - 1) % colors.length]}"/>`;
    })
    .join('');
  const limitY = height - 30 - (100 / maxMs) * (height - 50);
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="11">
<line x1="40" y1="${height - 30}" x2="${width - 20}" y2="${height - 30}" stroke="#333"/><line x1="40" y1="20" x2="40" y2="${height - 30}" stroke="#333"/>
<line x1="40" y1="${limitY}" x2="${width - 20}" y2="${limitY}" stroke="#c00" stroke-dasharray="4 3"/><text x="${width - 120}" y="${limitY - 4}" fill="#c00">100 ms target</text>
<text x="4" y="24">${maxMs.toFixed(0)} ms</text><text x="24" y="${height - 16}">0</text><text x="${width - 60}" y="${height - 16}">${maxAt.toFixed(0)} s</text>
<text x="${width / 2 - 120}" y="${height - 4}">seconds since the hostile uploads began (one colour per round)</text>${points}</svg>`;
  const html = `<!doctype html><meta charset="utf-8"><title>bench:hostile</title><h1>/healthz latency while one user's hostile uploads are processed</h1>${svg}${attacks.map(memoryChart).join('')}`;
  await writeFile(path.join(resultsDir, 'hostile.html'), html);
  log(`chart: ${path.join(resultsDir, 'hostile.html')}`);
}

await main();
