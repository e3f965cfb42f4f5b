import OpenAI from 'openai';

/**
 * The `openai` SDK's client as the service uses it, for embeddings and for answers alike: its
 * configuration comes from src/config.ts only.
 */
export function createOpenAIClient(options: { baseUrl: string; apiKey: string | undefined; timeoutMs: number; maxRetries: number }): OpenAI {
  return new OpenAI({
    baseURL: options.baseUrl,
    // Local servers often need no key; the SDK insists on one.
    apiKey: options.apiKey ?? 'unused',
    timeout: options.timeoutMs,
    maxRetries: options.maxRetries,
    // Without these the SDK would read OPENAI_ORG_ID, OPENAI_PROJECT_ID, OPENAI_ADMIN_KEY and
    // OPENAI_WEBHOOK_SECRET from the environment itself.
    organization: null,
    project: null,
    adminAPIKey: null,
    webhookSecret: null,
  });
}
