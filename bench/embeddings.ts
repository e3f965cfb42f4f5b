/**
 * `npx tsx bench/embeddings.ts`: speed of the embedded model, for docs/embeddings.md.
 *
 * For each provisioned model (int8 `bge-small-en-v1.5-q`, fp32 `bge-small-en-v1.5`) and each
 * layout of a 2-thread budget (2 workers x 1 intra-op thread with and without a thread of its own
 * for queries while passages run, 1 worker x 2), through the real embedder (worker threads, one
 * sequence per run):
 *   - passages: tokens/s embedding SciFact abstracts in one call,
 *   - query p50/p90 on an idle embedder (SciFact test queries, one per call),
 *   - query p50/p90 while a call of passages runs (what a search meets during ingestion),
 *   - the same while another thread of the process computes without pause as well (the HTTP
 *     thread or the embedded store's during an ingest), and the passages' tokens/s meanwhile.
 * The layout with a query thread runs twice: with its workers at a lower CPU priority
 * (KB_EMBED_NICENESS, the service's default on Linux) and at the process's.
 *
 * Knobs: BENCH_EMBED_PASSAGES (96), BENCH_EMBED_QUERIES (60), BENCH_EMBED_MODELS (both, comma
 * separated), BENCH_EMBED_THREADS (2). Keep runs short on a shared machine.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { defaultModelsDir, loadConfig } from '../src/config.js';
import type { Embedder } from '../src/modules/embeddings/embedder.js';
import { createOnnxEmbedder } from '../src/modules/embeddings/onnx-embedder.js';
import { encode, loadTokenizer } from '../src/modules/embeddings/tokenize.js';

type ModelName = 'bge-small-en-v1.5-q' | 'bge-small-en-v1.5';

const benchData = path.resolve(import.meta.dirname, '../../shared/bench-data');
// A benchmark script, like bench/ingest.ts: its knobs are not the service's configuration.
const knob = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const passageCount = knob('BENCH_EMBED_PASSAGES', 96);
const queryCount = knob('BENCH_EMBED_QUERIES', 60);
const threads = knob('BENCH_EMBED_THREADS', 2);
// The service's setting (KB_EMBED_NICENESS) for the lowered layout.
const serviceConfig = loadConfig();
const models = (process.env.BENCH_EMBED_MODELS ?? 'bge-small-en-v1.5-q,bge-small-en-v1.5').split(',') as ModelName[];

const jsonLines = async (file: string) =>
  (await readFile(file, 'utf8'))
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Record<string, string>);

const passages = (await jsonLines(path.join(benchData, 'scifact/corpus.jsonl')))
  .slice(0, passageCount)
  .map((doc) => `${doc.title}\n${doc.text}`);
const queries = (await jsonLines(path.join(benchData, 'scifact/queries_test.jsonl'))).slice(0, queryCount).map((query) => query.text!);

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};

async function queryLatencies(embedder: Embedder, until?: Promise<unknown>): Promise<number[]> {
  const times: number[] = [];
  let finished = false;
  void until?.then(() => (finished = true));
  for (let index = 0; until ? !finished : index < queries.length; index++) {
    const started = performance.now();
    await embedder.embed([queries[index % queries.length]!], 'query');
    times.push(performance.now() - started);
  }
  return times;
}

/**
 * A thread of this process that computes without pause until stopped: what the HTTP thread or the
 * embedded store's thread is to the embedder during an ingest with searches.
 */
async function busyThread(): Promise<{ stop(): Promise<void> }> {
  const worker = new Worker(
    `const { parentPort } = require('node:worker_threads');
     let stop = false;
     parentPort.on('message', () => (stop = true));
     parentPort.postMessage('started');
     const spin = () => { const until = Date.now() + 20; while (Date.now() < until) {} if (!stop) setImmediate(spin); else parentPort.close(); };
     spin();`,
    { eval: true },
  );
  await new Promise((resolve) => worker.once('message', resolve));
  return {
    async stop() {
      worker.postMessage('stop');
      await new Promise((resolve) => worker.once('exit', resolve));
    },
  };
}

const rows: string[][] = [];
for (const model of models) {
  const modelsDir = defaultModelsDir;
  const { tokenizer, sepId } = loadTokenizer(await readFile(path.join(modelsDir, model, 'tokenizer.json'), 'utf8'));
  const tokens = passages.reduce((sum, text) => sum + encode(tokenizer, sepId, text).length, 0);
  const queryTokens = queries.reduce((sum, text) => sum + encode(tokenizer, sepId, text).length, 0) / queries.length;
  for (const { workers, queryThread, workerNiceness } of [
    { workers: threads, queryThread: true, workerNiceness: serviceConfig.embeddings.workerNiceness },
    { workers: threads, queryThread: true, workerNiceness: 0 },
    { workers: threads, queryThread: false, workerNiceness: 0 },
    { workers: 1, queryThread: false, workerNiceness: 0 },
  ]) {
    const lowered = queryThread && workerNiceness > 0 ? `, workers ${workerNiceness} nice steps lower` : '';
    const layout = `${workers} worker x ${Math.floor(threads / workers)} thread${queryThread ? ' + query thread' : ''}${lowered}`;
    process.stderr.write(`${model}, ${layout}...\n`);
    const embedder = await createOnnxEmbedder({ modelsDir, model, threads, workers, queryThread, workerNiceness });
    try {
      const idle = await queryLatencies(embedder);
      const started = performance.now();
      await embedder.embed(passages, 'passage');
      const seconds = (performance.now() - started) / 1000;
      const busy = await queryLatencies(embedder, embedder.embed(passages, 'passage'));
      const competitor = await busyThread();
      let contended: number[];
      let contendedSeconds: number;
      try {
        const contendedStarted = performance.now();
        const passagesDone = embedder.embed(passages, 'passage').then(() => (contendedSeconds = (performance.now() - contendedStarted) / 1000));
        contended = await queryLatencies(embedder, passagesDone);
      } finally {
        await competitor.stop();
      }
      rows.push([
        model,
        layout,
        `${Math.round(tokens / seconds)}`,
        `${percentile(idle, 50).toFixed(1)} / ${percentile(idle, 90).toFixed(1)}`,
        `${percentile(busy, 50).toFixed(1)} / ${percentile(busy, 90).toFixed(1)} (${busy.length})`,
        `${percentile(contended, 50).toFixed(1)} / ${percentile(contended, 90).toFixed(1)} (${contended.length})`,
        `${Math.round(tokens / contendedSeconds!)}`,
      ]);
    } finally {
      await embedder.close();
    }
  }
  process.stderr.write(`${model}: ${passages.length} passages of ${Math.round(tokens / passages.length)} tokens on average; queries ${queryTokens.toFixed(0)} tokens\n`);
}

const header = [
  'model',
  'layout',
  'passages tok/s',
  'query ms p50 / p90 (idle)',
  'query ms p50 / p90 (during passages)',
  'query ms p50 / p90 (passages + a busy thread)',
  'passages tok/s (+ a busy thread)',
];
const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
for (const row of [header, ...rows]) process.stdout.write(`${row.map((cell, column) => cell.padEnd(widths[column]!)).join(' | ')}\n`);
