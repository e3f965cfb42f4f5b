/** Some models embed queries and passages differently (e5 prefixes each); the embedded bge model does not. */
export type EmbeddingPurpose = 'query' | 'passage';

/** Turns texts into unit-length vectors. One is chosen from configuration at start. */
export interface Embedder {
  /** Names the model and its variant, e.g. `bge-small-en-v1.5-q`; recorded with the index. */
  readonly modelId: string;
  readonly dimensions: number;
  /** One L2-normalised vector per text, in order. Rejects with an `EmbedderError` on failure. */
  embed(texts: readonly string[], purpose: EmbeddingPurpose, signal?: AbortSignal): Promise<Float32Array[]>;
  close(): Promise<void>;
}

/**
 * `transient`: worth retrying later (server down, timeout, 429 or 5xx after retries); a document
 * waits and its search answers 503. `permanent`: the answer itself is wrong (wrong dimension,
 * not numbers); retrying cannot help.
 */
export class EmbedderError extends Error {
  constructor(
    readonly kind: 'transient' | 'permanent',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'EmbedderError';
  }
}

/** The embedded model's files are missing or do not match their pinned checksum. */
export class ModelUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ModelUnavailableError';
  }
}
