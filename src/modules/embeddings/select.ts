import { ConfigError, type Config } from '../../config.js';
import type { Embedder } from './embedder.js';

/**
 * The one place the embedder is chosen: an OpenAI-compatible server when OPENAI_BASE_URL and
 * OPENAI_EMBEDDING_MODEL are set, else the embedded model in worker threads (a server may serve
 * only answers: OPENAI_CHAT_MODEL without OPENAI_EMBEDDING_MODEL).
 */
export async function createEmbedder(config: Config): Promise<Embedder> {
  if (config.openai.baseUrl && !config.openai.chatModel && !config.openai.embeddingModel) {
    throw new ConfigError(['OPENAI_EMBEDDING_MODEL: is required with OPENAI_BASE_URL (the embedding model to ask the server for), unless OPENAI_CHAT_MODEL is set and the server only answers']);
  }
  if (config.openai.baseUrl && config.openai.embeddingModel) {
    const { createOpenAIEmbedder } = await import('./openai-embedder.js');
    return createOpenAIEmbedder({
      baseUrl: config.openai.baseUrl,
      apiKey: config.openai.apiKey,
      model: config.openai.embeddingModel,
      dimensions: config.openai.embeddingDimensions,
      timeoutMs: config.openai.timeoutSeconds * 1000,
      batchSize: config.embeddings.batchSize,
    });
  }
  const { createOnnxEmbedder } = await import('./onnx-embedder.js');
  return createOnnxEmbedder({
    modelsDir: config.embeddings.modelsDir,
    model: config.embeddings.localModel,
    threads: config.embeddings.threads,
    workerNiceness: config.embeddings.workerNiceness,
    cpus: config.threadPlacement && { query: config.threadPlacement.queryCpus, passages: config.threadPlacement.allCpus },
  });
}
