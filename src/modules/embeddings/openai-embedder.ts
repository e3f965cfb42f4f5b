import { APIConnectionError, APIError, APIUserAbortError } from 'openai';
import { createOpenAIClient } from '../../openai-client.js';
import { EmbedderError, type Embedder, type EmbeddingPurpose } from './embedder.js';

export type OpenAIEmbedderOptions = {
  baseUrl: string;
  apiKey: string | undefined;
  model: string;
  /** Asked of the server and checked on every answer; learnt from a first call when absent. */
  dimensions: number | undefined;
  timeoutMs: number;
  batchSize: number;
  /** Retries of one call on 429, 5xx and connection failures, with the SDK's backoff. */
  maxRetries?: number;
};

/** Classifies a failed call: worth retrying later (transient) or not (permanent). */
function embedderErrorOf(error: unknown, signal: AbortSignal | undefined): unknown {
  if (signal?.aborted) return signal.reason;
  if (error instanceof EmbedderError) return error;
  if (error instanceof APIUserAbortError) return error;
  if (error instanceof APIConnectionError) {
    return new EmbedderError('transient', `the embedding server did not answer: ${error.message}`, { cause: error });
  }
  if (error instanceof APIError) {
    const status = error.status ?? 0;
    // The statuses the SDK itself retries: a request timeout, a conflict, a rate limit, a server error.
    const kind = status === 408 || status === 409 || status === 429 || status >= 500 ? 'transient' : 'permanent';
    return new EmbedderError(kind, `the embedding server answered ${status}: ${error.message}`, { cause: error });
  }
  return new EmbedderError('permanent', `the embedding server answered something that is not embeddings: ${(error as Error).message}`, { cause: error });
}

function normalised(values: unknown, expected: number | undefined, position: number): Float32Array {
  if (!Array.isArray(values) || values.length === 0 || !values.every((value) => typeof value === 'number' && Number.isFinite(value))) {
    throw new EmbedderError('permanent', `embedding ${position} of the answer is not a list of numbers`);
  }
  if (expected !== undefined && values.length !== expected) {
    throw new EmbedderError('permanent', `the embedding server answered ${values.length} dimensions where ${expected} were expected`);
  }
  const vector = Float32Array.from(values as number[]);
  const length = Math.hypot(...vector);
  if (length === 0) throw new EmbedderError('permanent', `embedding ${position} of the answer is all zeros`);
  for (let index = 0; index < vector.length; index++) vector[index]! /= length;
  return vector;
}

/**
 * Embeddings from any OpenAI-compatible server through the `openai` SDK: batched, each call with
 * a timeout and the SDK's retries with backoff on 429, 5xx and connection failures; every answer
 * is checked (count, numbers, dimension) and normalised. Without configured dimensions, one call
 * at start learns them, so the server must answer then.
 */
export async function createOpenAIEmbedder(options: OpenAIEmbedderOptions): Promise<Embedder> {
  const client = createOpenAIClient({ baseUrl: options.baseUrl, apiKey: options.apiKey, timeoutMs: options.timeoutMs, maxRetries: options.maxRetries ?? 3 });
  let dimensions = options.dimensions;

  async function embedBatch(texts: readonly string[], signal: AbortSignal | undefined): Promise<Float32Array[]> {
    let response;
    try {
      response = await client.embeddings.create(
        { model: options.model, input: [...texts], encoding_format: 'float', ...(options.dimensions && { dimensions: options.dimensions }) },
        { signal },
      );
    } catch (error) {
      throw embedderErrorOf(error, signal);
    }
    const data = (response as { data?: unknown }).data;
    if (!Array.isArray(data) || data.length !== texts.length) {
      throw new EmbedderError('permanent', `the embedding server answered ${Array.isArray(data) ? data.length : 'no'} embeddings for ${texts.length} texts`);
    }
    const ordered = [...data].sort((a, b) => Number(a?.index ?? 0) - Number(b?.index ?? 0));
    return ordered.map((item, position) => {
      const vector = normalised(item?.embedding, dimensions, position);
      dimensions ??= vector.length;
      return vector;
    });
  }

  if (dimensions === undefined) {
    try {
      await embedBatch(['dimension probe'], undefined);
    } catch (error) {
      throw new Error(
        `OPENAI_BASE_URL (${options.baseUrl}) did not embed a first text to learn the model's dimensions: ${(error as Error).message}. ` +
          'Set OPENAI_EMBEDDING_DIMENSIONS to start without asking it.',
        { cause: error },
      );
    }
  }

  return {
    modelId: `openai:${options.model}`,
    get dimensions() {
      return dimensions!;
    },
    async embed(texts: readonly string[], _purpose: EmbeddingPurpose, signal?: AbortSignal) {
      const vectors: Float32Array[] = [];
      for (let start = 0; start < texts.length; start += options.batchSize) {
        if (signal?.aborted) throw signal.reason;
        vectors.push(...(await embedBatch(texts.slice(start, start + options.batchSize), signal)));
      }
      return vectors;
    },
    async close() {},
  };
}
