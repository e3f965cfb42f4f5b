// The OpenAI-compatible embedder against a local HTTP server speaking POST /v1/embeddings; the
// embedded model's own tests are in embeddings.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../config.js';
import { EmbedderError } from './embedder.js';
import { createOpenAIEmbedder } from './openai-embedder.js';
import { createEmbedder } from './select.js';
import { startFakeModel, type FakeModel } from '../../../test/support/fake-openai.js';

const dot = (a: Float32Array, b: Float32Array) => a.reduce((sum, value, index) => sum + value * b[index]!, 0);
const norm = (a: Float32Array) => Math.sqrt(dot(a, a));

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
