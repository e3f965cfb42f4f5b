import { ConfigError, type Config } from '../../config.js';
import type { Embedder } from '../embeddings/embedder.js';
import type { AnswerModel } from './answer-model.js';
import { createExtractiveAnswerer } from './extractive-answerer.js';
import { createOpenAIAnswerer } from './openai-answerer.js';

/**
 * The one place the answer model is chosen: an OpenAI-compatible chat model when OPENAI_BASE_URL
 * and OPENAI_CHAT_MODEL are set, else the embedded extractive answerer (offline, no model server),
 * which also stands in for the chat model where it gives no usable plan or has run out of time.
 */
export function createAnswerModel(config: Config, embedder: Embedder): AnswerModel {
  const { baseUrl, chatModel } = config.openai;
  if (chatModel && !baseUrl) throw new ConfigError(['OPENAI_CHAT_MODEL: needs OPENAI_BASE_URL (the server to ask)']);
  const extractive = createExtractiveAnswerer(embedder);
  if (baseUrl && chatModel) {
    const { apiKey, timeoutSeconds, maxAnswerTokens, maxPlanTokens, generationSeconds, repeatStopWords } = config.openai;
    return createOpenAIAnswerer({
      baseUrl,
      apiKey,
      model: chatModel,
      timeoutMs: timeoutSeconds * 1000,
      maxAnswerTokens,
      maxPlanTokens,
      generationMs: generationSeconds * 1000,
      repeatStopWords,
      fallback: extractive,
    });
  }
  return extractive;
}
