import { ConfigError, type Config } from '../../config.js';
import type { Embedder } from '../embeddings/embedder.js';
import type { AnswerModel } from './answer-model.js';
import { createExtractiveAnswerer } from './extractive-answerer.js';
import { createOpenAIAnswerer } from './openai-answerer.js';

/**
 * The one place the answer model is chosen: an OpenAI-compatible chat model when OPENAI_BASE_URL
 * and OPENAI_CHAT_MODEL are set, else the embedded extractive answerer (offline, no model server).
 */
export function createAnswerModel(config: Config, embedder: Embedder): AnswerModel {
  const { baseUrl, chatModel } = config.openai;
  if (chatModel && !baseUrl) throw new ConfigError(['OPENAI_CHAT_MODEL: needs OPENAI_BASE_URL (the server to ask)']);
  if (baseUrl && chatModel) {
    return createOpenAIAnswerer({ baseUrl, apiKey: config.openai.apiKey, model: chatModel, timeoutMs: config.openai.timeoutSeconds * 1000 });
  }
  return createExtractiveAnswerer(embedder);
}
