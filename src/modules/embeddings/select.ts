import type { Config } from '../../config.js';
import type { Embedder } from './embedder.js';

/** The one place the embedder is chosen: an OpenAI-compatible server when configured, else the embedded model. */
export async function createEmbedder(config: Config): Promise<Embedder> {
  const { createOnnxEmbedder } = await import('./onnx-embedder.js');
  return createOnnxEmbedder({ modelsDir: config.embeddings.modelsDir, model: config.embeddings.localModel, threads: config.embeddings.threads });
}
