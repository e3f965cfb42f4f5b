// The embedded model on its own, for real (provisioned by `npm install`, or `npm run
// models:pull`; without it these tests fail with the message saying how to get it). The
// OpenAI-compatible embedder's tests are in openai-embedder.test.ts.
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.js';
import { ModelUnavailableError, type Embedder } from './embedder.js';
import { createOnnxEmbedder } from './onnx-embedder.js';
import { createEmbedder } from './select.js';
import { encode, loadTokenizer, MAX_TOKENS } from './tokenize.js';
import { placeThisThread, threadCpus } from '../../thread-placement.js';
import { threadsOf } from '../../../test/support/processes.js';

const dot = (a: Float32Array, b: Float32Array) => a.reduce((sum, value, index) => sum + value * b[index]!, 0);
const norm = (a: Float32Array) => Math.sqrt(dot(a, a));

const modelsDir = loadConfig().embeddings.modelsDir;
const model = 'bge-small-en-v1.5-q';

/** The nice value of each of this process's threads, by thread id, from /proc (Linux). */
async function threadNiceValues(): Promise<Map<string, number>> {
  const tasks = await readdir('/proc/self/task');
  const values = await Promise.all(
    tasks.map(async (task) => {
      const stat = await readFile(`/proc/self/task/${task}/stat`, 'utf8').catch(() => undefined);
      // Fields after the command's closing parenthesis: state is the 3rd field of the line, nice the 19th.
      return [task, stat === undefined ? undefined : Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16])] as const;
    }),
  );
  return new Map(values.filter((entry): entry is readonly [string, number] => entry[1] !== undefined));
}

/** The nice values of the threads started since `before` was taken (threads ending then may still be listed in it). */
async function niceOfThreadsStartedSince(before: Map<string, number>): Promise<number[]> {
  return [...(await threadNiceValues())].filter(([thread]) => !before.has(thread)).map(([, nice]) => nice);
}

const words = (count: number) =>
  Array.from({ length: count }, (_, index) => ['river', 'stone', 'lantern', 'orchard', 'copper', 'meadow', 'harbor'][index % 7]).join(' ');

describe('the embedded model (bge-small-en-v1.5-q)', () => {
  let embedder: Embedder;
  beforeAll(async () => {
    embedder = await createOnnxEmbedder({ modelsDir, model, threads: 2 });
  });
  afterAll(() => embedder?.close());

  it('gives one unit-length 384-dimensional vector per text', async () => {
    expect(embedder.modelId).toBe('bge-small-en-v1.5-q');
    expect(embedder.dimensions).toBe(384);
    const vectors = await embedder.embed(['The cat sat on the mat.', 'Quarterly revenue grew by 12 percent.', 'x'], 'passage');
    expect(vectors).toHaveLength(3);
    for (const vector of vectors) {
      expect(vector).toBeInstanceOf(Float32Array);
      expect(vector).toHaveLength(384);
      expect(vector.every(Number.isFinite)).toBe(true);
      expect(norm(vector)).toBeCloseTo(1, 5);
    }
    expect(await embedder.embed([], 'passage')).toEqual([]);
  });

  it('ranks the passage holding a fact above unrelated passages for a query about it', async () => {
    const passages = [
      'The Eiffel Tower in Paris was completed in 1889 and is 330 metres tall.',
      'Photosynthesis converts light energy into chemical energy stored in glucose.',
      'The stock market closed lower on Tuesday after weak earnings reports.',
      'A sourdough starter is a mixture of flour and water fermented by wild yeast.',
    ];
    const [query] = await embedder.embed(['When was the Eiffel Tower finished?'], 'query');
    const vectors = await embedder.embed(passages, 'passage');
    const scores = vectors.map((vector) => dot(query!, vector));
    expect(scores.indexOf(Math.max(...scores))).toBe(0);
    for (const score of scores.slice(1)) expect(scores[0]! - score).toBeGreaterThan(0.1);
  });

  it('embeds a query as it is, without bge\'s retrieval instruction', async () => {
    const [asQuery] = await embedder.embed(['solar panels on the roof'], 'query');
    const [asPassage] = await embedder.embed(['solar panels on the roof'], 'passage');
    const [prefixed] = await embedder.embed(['Represent this sentence for searching relevant passages: solar panels on the roof'], 'passage');
    expect(dot(asQuery!, asPassage!)).toBeGreaterThan(0.9999);
    expect(dot(asQuery!, prefixed!)).toBeLessThan(0.99);
  });

  it('gives the same vectors for a batch as for its texts one by one', async () => {
    const texts = ['short', 'a somewhat longer sentence about gardening in spring', words(300), '', 'Numbers: 3.14159 and 2.71828'];
    const batch = await embedder.embed(texts, 'passage');
    for (const [index, text] of texts.entries()) {
      const [alone] = await embedder.embed([text], 'passage');
      expect(dot(batch[index]!, alone!)).toBeGreaterThanOrEqual(0.995);
    }
  });

  it('truncates a 10,000-word text to 512 tokens instead of failing', async () => {
    const { tokenizer, sepId } = loadTokenizer(await readFile(path.join(modelsDir, model, 'tokenizer.json'), 'utf8'));
    const long = words(10_000);
    const ids = encode(tokenizer, sepId, long);
    expect(ids).toHaveLength(MAX_TOKENS);
    expect(ids.at(-1)).toBe(sepId);
    expect(ids[0]).toBe(tokenizer.token_to_id('[CLS]'));
    // The same as the whole text tokenized and cut.
    expect(ids.slice(0, -1)).toEqual(tokenizer.encode(long).ids.slice(0, MAX_TOKENS - 1));

    const [vector, firstWords] = await embedder.embed([long, words(600)], 'passage');
    expect(vector).toHaveLength(384);
    expect(norm(vector!)).toBeCloseTo(1, 5);
    // Only the first 511 tokens count: 600 words already fill them.
    expect(dot(vector!, firstWords!)).toBeGreaterThan(0.9999);
  });

  it('embeds an empty string', async () => {
    const [passage, query] = [...(await embedder.embed([''], 'passage')), ...(await embedder.embed([''], 'query'))];
    expect(norm(passage!)).toBeCloseTo(1, 5);
    expect(norm(query!)).toBeCloseTo(1, 5);
  });

  it('rejects at once when aborted, starts nothing more, and keeps working', async () => {
    const controller = new AbortController();
    const texts = Array.from({ length: 40 }, (_, index) => `${index} ${words(400)}`);
    const pending = embedder.embed(texts, 'passage', controller.signal);
    setTimeout(() => controller.abort(), 30);
    const started = performance.now();
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
    expect(performance.now() - started).toBeLessThan(1_000);

    await expect(embedder.embed(['anything'], 'query', AbortSignal.abort())).rejects.toMatchObject({ name: 'AbortError' });
    const timedOut = embedder.embed(texts, 'passage', AbortSignal.timeout(20));
    await expect(timedOut).rejects.toMatchObject({ name: 'TimeoutError' });

    // The workers were not ended: the next call answers promptly.
    const again = performance.now();
    const [vector] = await embedder.embed(['still here'], 'query');
    expect(vector).toHaveLength(384);
    expect(performance.now() - again).toBeLessThan(2_000);
  });

  it('answers a query while passages hold every worker, before any of them ends, with the same vector', async () => {
    const alone = (await embedder.embed(['what do lanterns light'], 'query'))[0]!;
    // Two calls of one long passage each: both workers are taken.
    const settled: string[] = [];
    const passages = [0, 1].map((index) => embedder.embed([`${index} ${words(500)}`], 'passage').then(() => void settled.push(`passage ${index}`)));
    const query = embedder.embed(['what do lanterns light'], 'query').then(([vector]) => {
      settled.push('query');
      return vector!;
    });
    const during = await query;
    await Promise.all(passages);
    // Without a thread of its own it would have waited for a worker, i.e. for a passage to end.
    expect(settled[0]).toBe('query');
    expect(dot(during, alone)).toBeCloseTo(1, 5);

    const withoutQueryThread = await createOnnxEmbedder({ modelsDir, model, threads: 2, queryThread: false });
    try {
      const order: string[] = [];
      const busy = [0, 1].map((index) => withoutQueryThread.embed([`${index} ${words(500)}`], 'passage').then(() => void order.push(`passage ${index}`)));
      await withoutQueryThread.embed(['what do lanterns light'], 'query').then(() => void order.push('query'));
      await Promise.all(busy);
      expect(order[0]).not.toBe('query');
    } finally {
      await withoutQueryThread.close();
    }
  });
});

describe.runIf(process.platform === 'linux')('the embedded model\'s threads on Linux', () => {
  it('run passages KB_EMBED_NICENESS (10) below the process\'s CPU priority when a query thread is kept, and queries at it', async () => {
    const processNice = os.getPriority();
    let before = await threadNiceValues();
    const withQueryThread = await createEmbedder(loadConfig({ KB_MODELS_DIR: modelsDir }));
    try {
      const started = await niceOfThreadsStartedSince(before);
      // Two workers lowered; the query thread and this (the HTTP) thread are not.
      expect(started.filter((nice) => nice === Math.min(19, processNice + 10))).toHaveLength(2);
      expect(started.filter((nice) => nice === processNice).length).toBeGreaterThanOrEqual(1);
      expect(os.getPriority()).toBe(processNice);
      const [passage] = await withQueryThread.embed([words(50)], 'passage');
      expect(norm(passage!)).toBeCloseTo(1, 5);
    } finally {
      await withQueryThread.close();
    }
    // Without a query thread, queries share the workers: they keep the process's priority.
    before = await threadNiceValues();
    const withoutQueryThread = await createOnnxEmbedder({ modelsDir, model, threads: 2, queryThread: false, workerNiceness: 10 });
    try {
      const started = await niceOfThreadsStartedSince(before);
      expect(started.length).toBeGreaterThanOrEqual(2);
      expect(started.every((nice) => nice === processNice)).toBe(true);
    } finally {
      await withoutQueryThread.close();
    }
  });
});

describe.runIf(process.platform === 'linux')('the embedded model\'s threads and their CPUs (thread-placement.ts)', () => {
  it('keeps the query thread and the workers on the CPUs given, though started by a thread kept to fewer, and embeds queries on the query thread when it is free', async () => {
    const all = threadCpus()!;
    // Started by a thread on all but the last CPU (the HTTP thread, placed), as a server does after its store opens.
    const narrowed = all.length > 1 ? all.slice(0, -1) : all;
    const query = all.slice(-1);
    const before = new Set(threadsOf(process.pid).map((thread) => thread.id));
    expect(await placeThisThread(narrowed)).toBeUndefined();
    let embedder: Embedder;
    try {
      embedder = await createOnnxEmbedder({ modelsDir, model, threads: 2, workerNiceness: 10, cpus: { query, passages: all } });
    } finally {
      expect(await placeThisThread(all)).toBeUndefined();
    }
    try {
      const started = threadsOf(process.pid).filter((thread) => !before.has(thread.id));
      expect(started.filter((thread) => thread.cpus.join() === all.join()).length).toBeGreaterThanOrEqual(2);
      const queryThreads = started.filter((thread) => thread.cpus.join() === query.join());
      expect(queryThreads.length).toBeGreaterThanOrEqual(1);
      if (narrowed.join() !== all.join()) expect(started.filter((thread) => thread.cpus.join() === narrowed.join())).toEqual([]);

      const ticks = () => threadsOf(process.pid).filter((thread) => queryThreads.some((queryThread) => queryThread.id === thread.id)).reduce((sum, thread) => sum + thread.ticks, 0);
      const ticksBefore = ticks();
      for (let index = 0; index < 60; index++) await embedder.embed([`how does ${words(12)} change after ${index} days`], 'query');
      // 60 queries of a few milliseconds each, one after another: on the query thread.
      expect(ticks() - ticksBefore).toBeGreaterThanOrEqual(5);
    } finally {
      await embedder.close();
    }
  });
});

describe('a missing or corrupt embedded model', () => {
  let directory: string;
  beforeAll(async () => {
    directory = await mkdtemp(path.join(os.tmpdir(), 'kb-models-'));
  });
  afterAll(() => rm(directory, { recursive: true, force: true }));

  const howTo = (error: unknown) => {
    expect(error).toBeInstanceOf(ModelUnavailableError);
    const { message } = error as Error;
    expect(message).toContain('kb models pull --model bge-small-en-v1.5-q');
    expect(message).toContain('npm run models:pull');
    return message;
  };

  it('is refused before loading, saying how to get it, when the directory is empty', async () => {
    const error = await createOnnxEmbedder({ modelsDir: directory, model, threads: 1 }).catch((caught: unknown) => caught);
    expect(howTo(error)).toContain('model.onnx is missing');
  });

  it('is refused when a file does not match its pinned sha256', async () => {
    const dir = path.join(directory, model);
    await mkdir(dir, { recursive: true });
    await copyFile(path.join(modelsDir, model, 'tokenizer.json'), path.join(dir, 'tokenizer.json'));
    // The right size, the wrong bytes: only the checksum can tell.
    await writeFile(path.join(dir, 'model.onnx'), '');
    await truncate(path.join(dir, 'model.onnx'), 34014426);
    const error = await createOnnxEmbedder({ modelsDir: directory, model, threads: 1 }).catch((caught: unknown) => caught);
    expect(howTo(error)).toMatch(/model\.onnx has sha256 [0-9a-f]{64}, expected 6c9c6101/);

    await truncate(path.join(dir, 'model.onnx'), 1000);
    expect(howTo(await createOnnxEmbedder({ modelsDir: directory, model, threads: 1 }).catch((caught: unknown) => caught))).toContain(
      'has 1000 bytes, expected 34014426',
    );
  });

  it('is refused through createEmbedder when no OpenAI server is configured', async () => {
    const config = loadConfig({ KB_MODELS_DIR: path.join(directory, 'nothing-here') });
    howTo(await createEmbedder(config).catch((caught: unknown) => caught));
  });
});
