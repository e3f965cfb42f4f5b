// The embedders on their own: the embedded model for real (provisioned by `npm install`, or
// `npm run models:pull`; without it these tests fail with the message saying how to get it),
// and the OpenAI-compatible one against a local HTTP server speaking POST /v1/embeddings.
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../config.js';
import { EmbedderError, ModelUnavailableError, type Embedder } from './embedder.js';
import { createOnnxEmbedder } from './onnx-embedder.js';
import { createOpenAIEmbedder } from './openai-embedder.js';
import { createEmbedder } from './select.js';
import { encode, loadTokenizer, MAX_TOKENS } from './tokenize.js';
import { startFakeModel, type FakeModel } from '../../../test/support/fake-openai.js';

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

describe('an OpenAI-compatible embeddings server', () => {
  type Behaviour = 'healthy' | 'fail-once' | 'error-500' | 'bad-request' | 'wrong-dimension' | 'garbage' | 'slow' | 'not-numbers' | 'short';
  let behaviour: Behaviour = 'healthy';
  let requests: { model: string; input: string[]; dimensions?: number; encoding_format?: string }[] = [];
  let model: FakeModel;
  let baseUrl: string;
  const size = 6;

  const vectorOf = (text: string, length = size) => Array.from({ length }, (_, index) => ((text.length + 1) * (index + 1)) % 7 + 1);

  beforeAll(async () => {
    model = await startFakeModel(({ path, body }, reply) => {
      if (path !== '/v1/embeddings') return reply.json(404, { error: { message: `no route ${path}` } });
      const parsed = body as (typeof requests)[number];
      requests.push(parsed);
      const data = parsed.input.map((text, index) => ({ object: 'embedding', index, embedding: vectorOf(text) }));
      switch (behaviour) {
        case 'fail-once':
          if (requests.length === 1) return reply.json(503, { error: { message: 'warming up' } });
          break;
        case 'error-500':
          return reply.json(500, { error: { message: 'the GPU caught fire' } });
        case 'bad-request':
          return reply.json(400, { error: { message: "model 'nope' not found", type: 'invalid_request_error' } });
        case 'wrong-dimension':
          return reply.json(200, { object: 'list', data: data.map((item) => ({ ...item, embedding: vectorOf('x', size + 2) })) });
        case 'garbage':
          return reply.json(200, '{"object": "list", "data": [');
        case 'not-numbers':
          return reply.json(200, { object: 'list', data: data.map((item) => ({ ...item, embedding: item.embedding.map(String) })) });
        case 'short':
          return reply.json(200, { object: 'list', data: data.slice(1) });
        case 'slow':
          return void setTimeout(() => reply.gone || reply.json(200, { object: 'list', data }), 5_000).unref();
      }
      // Out of order, as the API allows: the index field says which text each is for.
      reply.json(200, { object: 'list', model: parsed.model, data: [...data].reverse(), usage: { prompt_tokens: 1, total_tokens: 1 } });
    });
    baseUrl = model.baseUrl;
  });
  afterAll(() => model.close());

  const start = (changes: Partial<Parameters<typeof createOpenAIEmbedder>[0]> = {}, mode: Behaviour = 'healthy') => {
    behaviour = mode;
    requests = [];
    return createOpenAIEmbedder({ baseUrl, apiKey: undefined, model: 'fake-embed', dimensions: size, timeoutMs: 2_000, batchSize: 2, maxRetries: 2, ...changes });
  };
  const failure = async (promise: Promise<unknown>) => {
    const error = await promise.then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(EmbedderError);
    return error as EmbedderError;
  };

  it('is chosen by OPENAI_BASE_URL, batches by KB_EMBED_BATCH_SIZE, learns the dimension, and normalises', async () => {
    behaviour = 'healthy';
    requests = [];
    const config = loadConfig({
      OPENAI_BASE_URL: baseUrl,
      OPENAI_EMBEDDING_MODEL: 'fake-embed',
      KB_EMBED_BATCH_SIZE: '2',
      OPENAI_TIMEOUT_SECONDS: '2',
    });
    const embedder = await createEmbedder(config);
    expect(embedder.modelId).toBe('openai:fake-embed');
    expect(embedder.dimensions).toBe(size);
    const before = requests.length;
    const texts = ['one', 'three', 'seventeen', 'a', 'bb'];
    const vectors = await embedder.embed(texts, 'passage');
    expect(requests.length - before).toBe(3);
    expect(requests.slice(before).map((request) => request.input)).toEqual([['one', 'three'], ['seventeen', 'a'], ['bb']]);
    expect(requests.at(-1)).toMatchObject({ model: 'fake-embed', encoding_format: 'float' });
    for (const [index, vector] of vectors.entries()) {
      expect(vector).toHaveLength(size);
      expect(norm(vector)).toBeCloseTo(1, 5);
      const expected = Float32Array.from(vectorOf(texts[index]!));
      expect(dot(vector, expected) / norm(expected)).toBeCloseTo(1, 5);
    }
    await embedder.close();
  });

  it('asks for configured dimensions and refuses a missing OPENAI_EMBEDDING_MODEL', async () => {
    const embedder = await start();
    await embedder.embed(['hello'], 'query');
    expect(requests).toHaveLength(1);
    expect(requests[0]!.dimensions).toBe(size);
    await expect(createEmbedder(loadConfig({ OPENAI_BASE_URL: baseUrl }))).rejects.toBeInstanceOf(ConfigError);
  });

  it('retries a 503 and succeeds', async () => {
    const embedder = await start({}, 'fail-once');
    const vectors = await embedder.embed(['a', 'b'], 'passage');
    expect(vectors).toHaveLength(2);
    expect(requests).toHaveLength(2);
  });

  it('reports a persistent 500 as transient after its retries', async () => {
    const embedder = await start({ maxRetries: 1 }, 'error-500');
    const error = await failure(embedder.embed(['a'], 'passage'));
    expect(error.kind).toBe('transient');
    expect(error.message).toContain('the GPU caught fire');
    expect(requests).toHaveLength(2);
  });

  it('reports a slow server beyond the timeout as transient', async () => {
    const embedder = await start({ timeoutMs: 200, maxRetries: 1 }, 'slow');
    const started = performance.now();
    const error = await failure(embedder.embed(['a'], 'passage'));
    expect(error.kind).toBe('transient');
    expect(performance.now() - started).toBeLessThan(3_000);
  });

  it('reports a 400 as permanent with the server’s message, without retrying', async () => {
    const embedder = await start({}, 'bad-request');
    const error = await failure(embedder.embed(['a'], 'passage'));
    expect(error.kind).toBe('permanent');
    expect(error.message).toContain("model 'nope' not found");
    expect(requests).toHaveLength(1);
  });

  it('reports a wrong dimension as permanent, naming both numbers', async () => {
    const embedder = await start({}, 'wrong-dimension');
    const error = await failure(embedder.embed(['a'], 'passage'));
    expect(error.kind).toBe('permanent');
    expect(error.message).toContain(String(size + 2));
    expect(error.message).toContain(String(size));

    // Learnt from the first answer, then fixed: a later different one is refused as well.
    const learning = await start({ dimensions: undefined });
    expect(learning.dimensions).toBe(size);
    behaviour = 'wrong-dimension';
    const later = await failure(learning.embed(['a'], 'passage'));
    expect(later.kind).toBe('permanent');
    expect(later.message).toMatch(new RegExp(`${size + 2}.*${size}`));
  });

  it('reports garbage, non-numbers and a wrong count as permanent', async () => {
    for (const mode of ['garbage', 'not-numbers', 'short'] as const) {
      const embedder = await start({}, mode);
      const error = await failure(embedder.embed(['a', 'b'], 'passage'));
      expect(error.kind, mode).toBe('permanent');
      expect(requests, mode).toHaveLength(1);
    }
  });

  it('rejects with the abort reason when the caller gives up', async () => {
    const embedder = await start({ timeoutMs: 10_000 }, 'slow');
    const controller = new AbortController();
    const pending = embedder.embed(['a'], 'query', controller.signal);
    setTimeout(() => controller.abort(), 50);
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
  });
});
