import { z } from 'zod';

const optionalString = z
  .string()
  .trim()
  .transform((value) => (value === '' ? undefined : value))
  .optional();

const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback);

export const environmentSchema = z.object({
  HOST: z.string().trim().min(1).default('127.0.0.1'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  KB_DATA_DIR: z.string().trim().min(1).default('./data'),
  DATABASE_URL: optionalString.pipe(
    z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
      .optional(),
  ),
  // One node's URL, or several separated by commas (the nodes of a cluster).
  ELASTICSEARCH_URL: optionalString
    .transform((value) => value?.split(',').map((part) => part.trim()))
    .pipe(z.array(z.url({ message: 'each URL must be a URL; separate several with commas' })).optional()),
  KB_ES_SHARDS: z.coerce.number().int().min(1).max(64).default(1),
  KB_ES_REPLICAS: optionalString.pipe(z.string().regex(/^[0-8]$/, 'must be an integer from 0 to 8').transform(Number).optional()),
  KB_ES_SNIFF: z.enum(['off', 'on']).default('off'),
  // An alias: lower case, no spaces or the characters Elasticsearch refuses in index names.
  KB_ES_INDEX: z
    .string()
    .regex(/^[a-z0-9][a-z0-9_.]{0,99}$/, 'must be 1 to 100 lower-case letters, digits, "_" or ".", starting with a letter or digit')
    .default('kb_chunks'),
  OPENAI_BASE_URL: optionalString.pipe(z.url().optional()),
  OPENAI_API_KEY: optionalString,
  OPENAI_EMBEDDING_MODEL: optionalString,
  OPENAI_CHAT_MODEL: optionalString,
  OPENAI_EMBEDDING_DIMENSIONS: optionalString.pipe(
    z.string().regex(/^[1-9]\d{0,3}$/, 'must be an integer from 1 to 9999').transform(Number).optional(),
  ),
  OPENAI_TIMEOUT_SECONDS: z.coerce.number().min(1).max(600).default(30),
  OPENAI_MAX_ANSWER_TOKENS: z.coerce.number().int().min(16).max(65_536).default(512),
  OPENAI_MAX_PLAN_TOKENS: z.coerce.number().int().min(16).max(4096).default(128),
  OPENAI_GENERATION_SECONDS: z.coerce.number().min(0.1).max(3600).default(120),
  OPENAI_REPEAT_STOP_WORDS: z.coerce
    .number()
    .int()
    .refine((words) => words === 0 || (words >= 4 && words <= 64), 'must be 0 (off) or from 4 to 64')
    .default(8),
  KB_MODELS_DIR: optionalString,
  KB_EMBEDDING_MODEL: z.enum(['bge-small-en-v1.5-q', 'bge-small-en-v1.5']).default('bge-small-en-v1.5-q'),
  KB_EMBED_THREADS: z.coerce.number().int().min(1).max(64).default(2),
  KB_EMBED_BATCH_SIZE: z.coerce.number().int().min(1).max(2048).default(32),
  KB_EMBED_NICENESS: z.coerce.number().int().min(0).max(19).default(10),
  KB_THREAD_PLACEMENT: optionalString.pipe(z.enum(['auto', 'off']).default('auto')),
  KB_SEARCH_TIMEOUT_SECONDS: z.coerce.number().min(0.1).max(600).default(10),
  KB_SEARCH_RATE_PER_MINUTE: z.coerce.number().int().min(1).max(1_000_000).default(600),
  KB_KEYWORD_MEMORY_MB: z.coerce.number().int().min(1).max(1_048_576).default(1024),
  KB_VECTORS_IN_MEMORY: optionalString.pipe(z.enum(['auto', 'on', 'off']).default('auto')),
  KB_INDEX_SNAPSHOTS: optionalString.pipe(z.enum(['on', 'off']).default('on')),
  // PGlite's memory ends at 2 GB (32-bit WebAssembly): its page cache must leave room for the rest.
  KB_STORE_CACHE_MB: optionalString.pipe(
    z
      .string()
      .regex(/^\d+$/, 'must be a whole number of megabytes')
      .transform(Number)
      .pipe(z.number().int().min(16, 'must be at least 16').max(1024, 'must be at most 1024 (PGlite has 2 GB of memory in all)'))
      .optional(),
  ),
  KB_STORE_CACHE_WARM_PERCENT: z.coerce.number().int().min(0).max(90).default(75),
  KB_JWT_SECRET: optionalString.pipe(z.string().min(32, 'must be at least 32 characters').optional()),
  KB_AGENT_COST_FAST: positiveInt(1),
  KB_AGENT_COST_DEEP: positiveInt(5),
  KB_AGENT_TIMEOUT_SECONDS: z.coerce.number().min(1).max(3600).default(300),
  KB_AGENT_LEASE_SECONDS: z.coerce.number().min(0.1).max(3600).optional(),
  KB_AGENT_HEARTBEAT_SECONDS: z.coerce.number().min(0.05).max(15).default(10),
  KB_AGENT_RESUME_GRACE_SECONDS: z.coerce.number().min(0.5).max(3600).default(120),
  KB_MAX_JSON_BYTES: positiveInt(1024 * 1024),
  KB_MAX_GRAPHQL_RESPONSE_BYTES: z.coerce.number().int().min(65_536).max(1_073_741_824).default(8 * 1024 * 1024),
  KB_MAX_UPLOAD_BYTES: positiveInt(50 * 1024 * 1024),
  KB_MAX_UPLOAD_FILES: positiveInt(20),
  KB_CHUNK_TOKENS: z.coerce.number().int().min(16).max(8192).default(512),
  KB_CHUNK_OVERLAP_TOKENS: z.coerce.number().int().min(0).max(4096).default(64),
  KB_INGEST_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(2),
  KB_INGEST_LEASE_SECONDS: z.coerce.number().int().min(1).max(3600).optional(),
  KB_INGEST_POLL_SECONDS: z.coerce.number().min(0.1).max(3600).optional(),
  KB_INGEST_TURN_SECONDS: z.coerce.number().min(0.05).max(3600).default(1),
  KB_EMBED_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(1000).default(12),
  KB_EMBED_MAX_BACKOFF_SECONDS: z.coerce.number().min(0.01).max(86400).default(300),
  KB_PARSE_MEMORY_MB: z.coerce.number().int().min(128).max(65536).default(1024),
  KB_PARSE_THREAD_IDLE_SECONDS: z.coerce.number().int().min(1).max(86400).default(300),
  KB_PARSE_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(86400).default(30),
  KB_PARSE_TIMEOUT_SECONDS_PER_MB: z.coerce.number().min(0).max(3600).default(20),
  KB_MAX_UNPACKED_BYTES: positiveInt(64 * 1024 * 1024),
  KB_MAX_TEXT_CHARACTERS: positiveInt(10_000_000),
  KB_OCR_LANGUAGE: z
    .string()
    .regex(/^(off|[a-z_]{3,12})$/, 'must be a Tesseract language code whose @tesseract.js-data package is installed (eng, deu, fra...), or off')
    .default('eng'),
  KB_OCR_MAX_PAGES: positiveInt(500),
  KB_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(1_000_000).default(1000),
  KB_HEADERS_TIMEOUT_SECONDS: z.coerce.number().min(1).max(600).default(10),
  KB_REQUEST_TIMEOUT_SECONDS: z.coerce.number().min(1).max(86_400).default(1800),
  KB_KEEP_ALIVE_TIMEOUT_SECONDS: z.coerce.number().min(0.1).max(600).default(5),
  KB_SEND_TIMEOUT_SECONDS: z.coerce.number().min(1).max(3600).default(30),
  KB_MIN_UPLOAD_BYTES_PER_SECOND: z.coerce.number().int().min(1).max(1_073_741_824).default(4096),
  KB_MIN_UPLOAD_RATE_WINDOW_SECONDS: z.coerce.number().min(1).max(3600).default(15),
  KB_UPLOAD_SPOOL_DIR: optionalString,
  KB_GRAPHQL_SSE_STREAMS_PER_USER: z.coerce.number().int().min(1).max(1000).default(10),
  KB_GRAPHQL_SSE_UNOPENED_SECONDS: z.coerce.number().min(0.1).max(3600).default(30),
  KB_GRAPHQL_SSE_QUEUE_MB: z.coerce.number().min(0.01).max(1024).default(1),
  KB_METRICS_TOKEN: optionalString,
  KB_INSTANCE: optionalString.pipe(z.string().max(200).optional()),
  KB_ROLE: optionalString.pipe(z.enum(['all', 'api', 'worker']).default('all')),
  KB_DRAIN_SECONDS: z.coerce.number().min(0).max(3600).default(30),
  KB_MIGRATE: optionalString.pipe(z.enum(['on', 'off']).default('on')),
  KB_DRAIN_NOTICE_SECONDS: z.coerce.number().min(0).max(600).optional(),
  KB_LOG_LEVEL: z.enum(['silent', 'error', 'info', 'debug']).default('info'),
  KB_URL: optionalString.pipe(z.url().optional()),
  KB_API_KEY: optionalString,
});
