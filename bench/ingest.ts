/**
 * `npm run bench:ingest`: how fast documents become searchable, measured two ways in one run.
 *
 *   1. lyft_2021.pdf (238 pages), and
 *   2. the first 5,000 SciFact abstracts as `.txt` documents,
 *
 * each (a) parsed and chunked in this process with the library functions the worker runs, and
 * (b) end to end: uploaded over HTTP to a real server started here (`startApp`, embedded store
 * in a temporary directory) and timed until the documents are ready.
 *
 * Prints a table on stdout (progress goes to stderr) and writes bench/results/ingest.html.
 * Chunk size and overlap come from the project's configuration (KB_CHUNK_TOKENS,
 * KB_CHUNK_OVERLAP_TOKENS; 512 and 64 by default). Knobs for quicker runs: BENCH_CORPUS_DOCS
 * (5000), BENCH_BATCH_FILES (20 files per upload request), BENCH_PARALLEL_UPLOADS (4).
 * Speed never makes the process fail; a document that fails to ingest does.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import cliProgress from 'cli-progress';
import { startApp, type RunningApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { chunkDocument, type ChunkOptions } from '../src/modules/ingestion/chunk.js';
import { detectDocumentType, type DocumentType } from '../src/modules/ingestion/detect.js';
import { parseDocument } from '../src/modules/ingestion/parse.js';
import { cleanUpOnInterrupt, elapsedSeconds, intFromEnv, log, machineDescription, progressBar, runBenchmark, ServiceClient, sleep } from './helpers.js';
import { PeakRss } from './memory.js';
import { htmlReport, textTable, type Measurement, type Report } from './report.js';

const benchData = path.resolve(import.meta.dirname, '../../shared/bench-data');
const pdfPath = path.join(benchData, 'pdfs/lyft_2021.pdf');
const corpusPath = path.join(benchData, 'scifact/corpus.jsonl');
const resultsDir = path.resolve(import.meta.dirname, 'results');

const PDF_LIMIT_SECONDS = 60;
const PDF_LABEL = 'lyft_2021.pdf';


const corpusSize = intFromEnv('BENCH_CORPUS_DOCS', 5000);
const parallelUploads = intFromEnv('BENCH_PARALLEL_UPLOADS', 4);

type SourceFile = { name: string; bytes: Uint8Array };

/** Lets timers run (progress bars, RSS sampling) during a loop that would otherwise not yield. */
const yieldToTimers = () => new Promise((resolve) => setImmediate(resolve));

async function readCorpus(limit: number): Promise<SourceFile[]> {
  const lines = (await readFile(corpusPath, 'utf8')).split('\n').filter((line) => line.trim() !== '');
  if (lines.length < limit) throw new Error(`${corpusPath} has ${lines.length} abstracts; ${limit} were asked for`);
  const encoder = new TextEncoder();
  return lines.slice(0, limit).map((line) => {
    const record = JSON.parse(line) as { _id: string; title: string; text: string };
    return { name: `${record._id}.txt`, bytes: encoder.encode(`${record.title}\n\n${record.text}`) };
  });
}

function typeOf(file: SourceFile): DocumentType {
  const type = detectDocumentType(file.bytes, file.name);
  if (!type) throw new Error(`${file.name} is not a supported document`);
  return type;
}

// ---------------------------------------------------------------------------------------------
// (a) parse + chunk in this process

async function parseInProcess(label: string, files: SourceFile[], unit: Measurement['unit'], chunkOptions: ChunkOptions): Promise<Measurement> {
  const types = files.map(typeOf);
  const bar = progressBar(`${label} parse+chunk |{bar}| {value}/{total} docs | {chunks} chunks | {duration_formatted}`, { fps: 10 });
  bar.start(files.length, 0, { chunks: 0 });
  const memory = new PeakRss();
  let chunks = 0;
  let pages = 0;
  const start = performance.now();
  for (const [index, file] of files.entries()) {
    const parsed = await parseDocument(file.bytes, types[index]!);
    chunks += chunkDocument(parsed, chunkOptions).length;
    pages += parsed.pageCount ?? 0;
    if (index % 50 === 49 || index === files.length - 1) {
      bar.update(index + 1, { chunks });
      await yieldToTimers();
    }
  }
  const seconds = elapsedSeconds(start);
  const peakRssBytes = memory.stop();
  bar.stop();
  return { dataset: label, mode: 'in-process', unit, units: unit === 'pages' ? pages : files.length, chunks, seconds, peakRssBytes };
}

// ---------------------------------------------------------------------------------------------
// (b) end to end through the HTTP API

type DocumentBody = { id: string; status: 'queued' | 'processing' | 'ready' | 'failed'; error: string | null; page_count: number | null; chunk_count: number };

/** The service's API, with what this benchmark needs of it. */
class Client extends ServiceClient<DocumentBody> {
  async createWorkspace(name: string): Promise<string> {
    return (await this.json<{ id: string }>('POST', '/v1/kb/workspaces', { name })).id;
  }


  getDocument(id: string) {
    return this.json<DocumentBody>('GET', `/v1/kb/documents/${id}`);
  }

  /** Every document of a workspace, following the `Link: rel="next"` pages. */
  async listDocuments(workspaceId: string): Promise<DocumentBody[]> {
    const documents: DocumentBody[] = [];
    let next: string | null = `/v1/kb/workspaces/${workspaceId}/documents?limit=1000`;
    while (next) {
      const { body, headers }: { body: DocumentBody[]; headers: Headers } = await this.request<DocumentBody[]>('GET', next);
      documents.push(...body);
      next = /<([^>]+)>;\s*rel="next"/.exec(headers.get('link') ?? '')?.[1] ?? null;
    }
    return documents;
  }
}

const isSettled = (document: DocumentBody) => document.status === 'ready' || document.status === 'failed';

async function pdfEndToEnd(client: Client, file: SourceFile): Promise<{ measurement: Measurement; document: DocumentBody }> {
  const workspaceId = await client.createWorkspace('bench: pdf');
  const bar = progressBar(`${PDF_LABEL} end to end |{bar}| {status} | {duration_formatted}`, { fps: 10 });
  bar.start(1, 0, { status: 'uploading' });
  const memory = new PeakRss();
  const start = performance.now();
  const [queued] = await client.upload(workspaceId, [file]);
  let document = queued!;
  while (!isSettled(document)) {
    bar.update(0, { status: document.status });
    await sleep(100);
    document = await client.getDocument(document.id);
  }
  const seconds = elapsedSeconds(start);
  const peakRssBytes = memory.stop();
  bar.update(1, { status: document.status });
  bar.stop();
  if (document.status === 'failed') throw new Error(`${PDF_LABEL} failed to ingest: ${document.error}`);
  return {
    measurement: { dataset: PDF_LABEL, mode: 'end to end', unit: 'pages', units: document.page_count ?? 0, chunks: document.chunk_count, seconds, peakRssBytes },
    document,
  };
}

async function corpusEndToEnd(
  app: RunningApp,
  client: Client,
  label: string,
  files: SourceFile[],
  batchFiles: number,
): Promise<{ measurement: Measurement; uploadSeconds: number; failed: DocumentBody[] }> {
  const workspaceId = await client.createWorkspace('bench: corpus');
  const batches: SourceFile[][] = [];
  for (let index = 0; index < files.length; index += batchFiles) batches.push(files.slice(index, index + batchFiles));

  const bars = new cliProgress.MultiBar(
    {
      format: `${label} {phase} |{bar}| {value}/{total} docs | {duration_formatted}`,
      stream: process.stderr,
      hideCursor: true,
      noTTYOutput: true,
      notTTYSchedule: 5_000,
      fps: 5,
    },
    cliProgress.Presets.shades_classic,
  );
  const uploadedBar = bars.create(files.length, 0, { phase: 'uploaded ' });
  const readyBar = bars.create(files.length, 0, { phase: 'processed' });

  const memory = new PeakRss();
  const start = performance.now();
  const ids = new Set<string>();
  let uploaded = 0;
  let nextBatch = 0;
  const uploader = async () => {
    while (nextBatch < batches.length) {
      const batch = batches[nextBatch++]!;
      for (const document of await client.upload(workspaceId, batch)) ids.add(document.id);
      uploaded += batch.length;
      uploadedBar.update(uploaded);
    }
  };
  let uploadSeconds = 0;
  let uploadsDone = false;
  let uploadError: unknown;
  const uploads = Promise.all(Array.from({ length: parallelUploads }, uploader)).then(
    () => {
      uploadSeconds = elapsedSeconds(start);
      uploadsDone = true;
    },
    (error: unknown) => {
      uploadError = error ?? new Error('an upload failed');
    },
  );

  // Progress is read from the store with one aggregate query per poll: asking the API for each of
  // 5,000 documents every quarter second would load the server (it shares this event loop) more
  // than the work being measured. The outcome is checked over HTTP once the clock has stopped.
  // The poll always waits on a timer: the embedded store answers through promises alone, so a
  // loop that never waits on a timer would starve the server and the parse workers' replies.
  let seconds: number;
  for (;;) {
    await sleep(250);
    if (uploadError !== undefined) {
      bars.stop();
      memory.stop();
      throw uploadError;
    }
    const settled = await app.db.prisma.document.count({ where: { workspaceId, status: { in: ['ready', 'failed'] } } });
    readyBar.update(settled);
    if (uploadsDone && settled >= ids.size) {
      seconds = elapsedSeconds(start);
      break;
    }
  }
  await uploads;
  const peakRssBytes = memory.stop();
  bars.stop();

  const documents = await client.listDocuments(workspaceId);
  if (documents.length !== ids.size) throw new Error(`expected ${ids.size} documents in the workspace, the API lists ${documents.length}`);
  const unsettled = documents.filter((document) => !isSettled(document));
  if (unsettled.length > 0) throw new Error(`${unsettled.length} documents are still ${unsettled[0]!.status}`);
  const failed = documents.filter((document) => document.status === 'failed');
  const chunks = documents.reduce((total, document) => total + document.chunk_count, 0);
  return {
    measurement: { dataset: label, mode: 'end to end', unit: 'docs', units: documents.length, chunks, seconds, peakRssBytes },
    uploadSeconds,
    failed,
  };
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'kb-bench-'));
  // The embedded store, whatever DATABASE_URL says; chunking settings come from the environment.
  const { DATABASE_URL: _ignored, ...environment } = process.env;
  const config = loadConfig({ ...environment, HOST: '127.0.0.1', PORT: '0', KB_DATA_DIR: dataDir, KB_LOG_LEVEL: 'silent' });
  const chunkOptions: ChunkOptions = { chunkTokens: config.ingestion.chunkTokens, overlapTokens: config.ingestion.overlapTokens };
  const batchFiles = Math.min(intFromEnv('BENCH_BATCH_FILES', 20), config.uploads.maxFiles);
  const corpusLabel = `SciFact ${corpusSize.toLocaleString('en-US')} abstracts`;

  const cores = os.availableParallelism();
  const machine = machineDescription();
  log(`ingestion benchmark on ${machine}`);
  log(`chunks: ${chunkOptions.chunkTokens} tokens, ${chunkOptions.overlapTokens} overlap; uploads: ${batchFiles} files per request, ${parallelUploads} at once`);

  const pdf: SourceFile = { name: PDF_LABEL, bytes: new Uint8Array(await readFile(pdfPath)) };
  const corpus = await readCorpus(corpusSize);
  const measurements: Measurement[] = [];

  measurements.push(await parseInProcess(PDF_LABEL, [pdf], 'pages', chunkOptions));
  measurements.push(await parseInProcess(corpusLabel, corpus, 'docs', chunkOptions));

  log('starting the server on an embedded store in ' + dataDir);
  let rawKey: string | undefined;
  const app = await startApp(config, { onFirstAdmin: (key) => (rawKey = key) });
  const cleanUp = async () => {
    await app.close().catch((error: unknown) => log(`could not close the server: ${String(error)}`));
    await rm(dataDir, { recursive: true, force: true });
  };
  const stopListening = cleanUpOnInterrupt(cleanUp);

  let uploadSeconds: number;
  let failed: DocumentBody[];
  try {
    if (!rawKey) throw new Error('the fresh store did not create its first admin key');
    const client = new Client(app.url, rawKey);
    const pdfRun = await pdfEndToEnd(client, pdf);
    measurements.push(pdfRun.measurement);
    const corpusRun = await corpusEndToEnd(app, client, corpusLabel, corpus, batchFiles);
    measurements.push(corpusRun.measurement);
    ({ uploadSeconds, failed } = corpusRun);
  } finally {
    stopListening();
    await cleanUp();
  }

  // Rows side by side: each dataset in-process, then end to end.
  measurements.sort((a, b) => (a.dataset === b.dataset ? (a.mode === 'in-process' ? -1 : 1) : a.dataset === PDF_LABEL ? -1 : 1));

  const pdfEnd = measurements.find((m) => m.dataset === PDF_LABEL && m.mode === 'end to end')!;
  const verdict = pdfEnd.seconds < PDF_LIMIT_SECONDS ? 'PASS' : 'FAIL';
  const coreNote = cores === 2 ? 'measured on this 2-core machine' : `measured on ${cores} cores, not 2`;
  const notes = [
    `${verdict}: ${PDF_LABEL} (${pdfEnd.units} pages) ready ${pdfEnd.seconds.toFixed(2)} s after upload; required under ${PDF_LIMIT_SECONDS} s on 2 cores (${coreNote}).`,
    `${corpusLabel}: all ${corpusSize.toLocaleString('en-US')} uploaded in ${uploadSeconds.toFixed(2)} s (${batchFiles} files per request, ${parallelUploads} requests at once); end-to-end time runs from the first upload until every document is ready.`,
    `${failed.length} of the corpus documents failed to ingest.`,
    `Peak RSS is the whole process (benchmark, HTTP server, embedded store) and its parsing processes. Whole run, this process alone: ${Math.round(process.resourceUsage().maxRSS / 1024)} MB.`,
  ];
  const report: Report = { date: new Date().toISOString().slice(0, 10), machine, chunkOptions, measurements, notes };

  process.stdout.write(`\n${textTable(report)}\n\n${notes.join('\n')}\n`);
  await mkdir(resultsDir, { recursive: true });
  const htmlPath = path.join(resultsDir, 'ingest.html');
  await writeFile(htmlPath, htmlReport(report, { dataset: PDF_LABEL, seconds: PDF_LIMIT_SECONDS }));
  process.stdout.write(`\nchart: ${path.relative(process.cwd(), htmlPath)}\n`);

  if (failed.length > 0) {
    log(`first failure: ${failed[0]!.id}: ${failed[0]!.error}`);
    process.exitCode = 1;
  }
}

runBenchmark(main);
