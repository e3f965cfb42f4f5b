import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { environmentSchema } from './config-schema.js';
import type { OcrSettings } from './modules/ingestion/ocr.js';
import { planThreadPlacement, threadCpus, type ThreadPlacement } from './thread-placement.js';

/** `models/` in the package's own directory, wherever the command is run from. */
export const defaultModelsDir = fileURLToPath(new URL('../models', import.meta.url));

/** What one document of an upload's answer may take as JSON: 64 KiB of metadata and the rest of its fields. */
const uploadAnswerBytesPerFile = 68 * 1024;

export type Config = {
  host: string;
  port: number;
  /** This process's name among several: the `kb_instance` label of its metrics. */
  instance: string;
  /**
   * What this process does (docs/deployment.md, "Process roles"): `all` (HTTP and background work),
   * `api` (HTTP only) or `worker` (ingestion and maintenance; health and metrics only over HTTP).
   */
  role: 'all' | 'api' | 'worker';
  /** On SIGTERM: how long requests and uploads in flight may take to finish before the process stops. */
  drainSeconds: number;
  /**
   * Whether this process brings the database and the index (the pgvector tables, or the
   * Elasticsearch layout) up to its version at start; when not, it refuses to start on a
   * database or an index `kb migrate` has not brought there.
   */
  migrate: boolean;
  /** On SIGTERM: how long `/readyz` says 503 while requests are still accepted, for a load balancer's health checks to notice. */
  drainNoticeSeconds: number;
  dataDir: string;
  databaseUrl: string | undefined;
  /** Elasticsearch, when it keeps the index (docs/retrieval.md, "Elasticsearch as a cluster"). */
  elasticsearch:
    | {
        nodes: string[];
        /** The alias that searches and writes name (docs/retrieval.md, "Rebuilding the index beside itself"). */
        index: string;
        /** Primary shards of a new index. */
        shards: number;
        /** Copies of each shard, applied at every start; by default 0 with one node named, 1 with several. */
        replicas: number;
        /** Ask the cluster for its nodes at start and after a connection fails, beyond those named. */
        sniff: boolean;
      }
    | undefined;
  openai: {
    baseUrl: string | undefined;
    apiKey: string | undefined;
    embeddingModel: string | undefined;
    /** Asked of the server (models that can shorten their vectors) and checked on every answer. */
    embeddingDimensions: number | undefined;
    chatModel: string | undefined;
    timeoutSeconds: number;
    /** `max_tokens` of a streamed answer. */
    maxAnswerTokens: number;
    /** `max_tokens` of a follow-up's rewrite and of each deep-research plan. */
    maxPlanTokens: number;
    /** What all the chat model's calls of one run may take together; then the answer ends as written so far (docs/agent.md). */
    generationSeconds: number;
    /** An answer that repeats a span of this many words is cut there; 0: never. */
    repeatStopWords: number;
  };
  embeddings: {
    /** Where `npm install` and `kb models pull` put the embedded model's files. */
    modelsDir: string;
    /** The embedded (offline) model, used unless OPENAI_BASE_URL is set. */
    localModel: 'bge-small-en-v1.5-q' | 'bge-small-en-v1.5';
    /** Worker threads running the embedded model. */
    threads: number;
    /** Most texts sent to the embedder in one call. */
    batchSize: number;
    /** How far the embedded model's passage workers lower their CPU priority (nice steps, Linux; 0: not at all). */
    workerNiceness: number;
  };
  /**
   * On the embedded store (KB_THREAD_PLACEMENT=auto, 2 CPUs or more): the CPUs each kind of thread
   * keeps to (thread-placement.ts). Read from the CPUs the process may use when the configuration
   * is loaded, before any placement.
   */
  threadPlacement: ThreadPlacement | undefined;
  /** A search whose backend (embedder or index) does not answer in time is a 503. */
  searchTimeoutSeconds: number;
  /** Searches a user may make per minute (REST and GraphQL together, each alias counted); more is a 429. */
  searchesPerMinute: number;
  /** Memory the pgvector index's keyword side may hold before it drops the least recently searched workspaces. */
  keywordMemoryBytes: number;
  /**
   * Whether the pgvector index also keeps the vectors of the workspaces it holds in an HNSW graph
   * in memory (within `keywordMemoryBytes`): `auto` does on the embedded store only.
   */
  vectorsInMemory: 'auto' | 'on' | 'off';
  /**
   * Where the pgvector index saves the keyword postings of the large workspaces it holds, so that
   * a start reads them back instead of every chunk's terms (`KB_INDEX_SNAPSHOTS`); undefined: off.
   */
  indexSnapshotDir: string | undefined;
  /**
   * The embedded store's page cache (PostgreSQL's shared_buffers) in MB; unset, it is sized from
   * the store's tables at each start. PostgreSQL's own is its administrator's.
   */
  storeCacheMb: number | undefined;
  /** How much of the embedded store's page cache is read in after each start, in percent (0: none). */
  storeCacheWarmPercent: number;
  jwtSecret: string | undefined;
  agentCost: { fast: number; deep: number };
  agent: {
    /** A run still going after this ends with an error event and a refund. */
    timeoutSeconds: number;
    /** A running job's lease: another process refunds it once the lease has passed unrenewed. */
    leaseSeconds: number;
    /** Longest silence on an open agent stream before a comment line is sent (at most 15 s). */
    heartbeatSeconds: number;
    /**
     * How long a resumable run goes on with no client reading its events (docs/agent.md,
     * "Resuming a stream"); then it is cancelled and refunded.
     */
    resumeGraceSeconds: number;
  };
  maxJsonBytes: number;
  /** What one GraphQL response (REST answers included) may hold; a file's base64 counts before it is read. */
  maxGraphqlResponseBytes: number;
  uploads: { maxFileBytes: number; maxFiles: number };
  /** What the HTTP server allows a connection (docs/api.md, "Server limits"). */
  server: {
    /** Open connections at once; more are closed as they arrive. */
    maxConnections: number;
    /** A request's headers must have arrived within this of its connection's start (kept alive: of the request's first byte). */
    headersTimeoutSeconds: number;
    /** A whole request, its body included, must have arrived within this. */
    requestTimeoutSeconds: number;
    /** An idle keep-alive connection is closed after this. */
    keepAliveTimeoutSeconds: number;
    /** A connection whose answer waits to be sent and has sent nothing for this long is closed. */
    sendTimeoutSeconds: number;
    /** A request body arriving slower than this, over each window of `uploadRateWindowSeconds`, is cut. */
    minUploadBytesPerSecond: number;
    uploadRateWindowSeconds: number;
    /** Where upload bodies are written as they arrive, a file each. */
    uploadSpoolDir: string;
  };
  /** graphql-sse's single connection mode at /graphql/stream (docs/api.md, "Event streams of graphql-sse"). */
  graphqlSse: {
    /** Reserved streams (PUT) a user may hold at once; more is a 429. */
    streamsPerUser: number;
    /** A reserved stream not opened (GET) within this is dropped, with the operations sent to it. */
    unopenedSeconds: number;
    /** Results a stream may hold that its reader has not taken: subscriptions wait beyond it, other results are dropped. */
    queueBytes: number;
  };
  ingestion: {
    chunkTokens: number;
    overlapTokens: number;
    concurrency: number;
    /** How long a claim holds without its worker renewing it (every third of it); by default 15 s on PostgreSQL, 60 s on the embedded store. */
    leaseSeconds: number;
    /** How often idle workers look for due jobs nobody signalled (retries whose wait ended, claims whose lease ran out); by default 5 s on the embedded store, 1 s on PostgreSQL. */
    pollSeconds: number;
    /** How long an embed job runs before it gives way to another user's waiting jobs, keeping what it embedded. */
    turnSeconds: number;
    /** Attempts of a document's embedding stage (the embedder may be down) before it fails. */
    embedMaxAttempts: number;
    /** Longest wait between two of those attempts; the waits double from 1 s up to it. */
    embedMaxBackoffSeconds: number;
    /** Heap of each parsing process; a parse that needs more fails its document. */
    parseMemoryMb: number;
    parseIdleSeconds: number;
    /** A parse may take `base + perMegabyte × size in MiB` seconds before it fails its document. */
    parseTimeoutSeconds: { base: number; perMegabyte: number };
    /** Largest total the parsed parts of an archive (a DOCX's XML) may unpack to. */
    maxUnpackedBytes: number;
    /** Most characters of text a document may yield. */
    maxTextCharacters: number;
    /** How scanned pages are read (KB_OCR_LANGUAGE; null when off), and the most of them one document may have. */
    ocr: OcrSettings;
    maxOcrPages: number;
  };
  logLevel: 'silent' | 'error' | 'info' | 'debug';
  /** When set, GET /metrics needs `Authorization: Bearer <it>`. */
  metricsToken: string | undefined;
  /** Where `kb import` finds a running server, and the key it uses there. */
  client: { url: string | undefined; apiKey: string | undefined };
};

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Parses the whole environment at once and reports every problem, not just the first. */
export function loadConfig(environment: Record<string, string | undefined> = process.env): Config {
  // A variable set to nothing (`KB_ES_SHARDS=` in a compose file) is taken as unset: its default.
  const parsed = environmentSchema.safeParse(Object.fromEntries(Object.entries(environment).filter(([, value]) => value === undefined || value.trim() !== '')));
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message} (got ${JSON.stringify(environment[String(issue.path[0])])})`),
    );
  }
  const env = parsed.data;
  if (env.KB_CHUNK_OVERLAP_TOKENS >= env.KB_CHUNK_TOKENS) {
    throw new ConfigError([`KB_CHUNK_OVERLAP_TOKENS: must be smaller than KB_CHUNK_TOKENS (${env.KB_CHUNK_TOKENS})`]);
  }
  // The answer to an upload lists its documents, each with the upload's metadata: it must never be
  // refused for its size after the files were stored.
  const uploadAnswerBytes = env.KB_MAX_UPLOAD_FILES * uploadAnswerBytesPerFile;
  if (env.KB_MAX_GRAPHQL_RESPONSE_BYTES < uploadAnswerBytes) {
    throw new ConfigError([
      `KB_MAX_GRAPHQL_RESPONSE_BYTES: must be at least ${uploadAnswerBytes} for KB_MAX_UPLOAD_FILES=${env.KB_MAX_UPLOAD_FILES}, so that the answer to an upload fits (68 KiB a file: its metadata of up to 64 KiB and the document's other fields)`,
    ]);
  }
  if (env.KB_MIGRATE === 'off' && !env.DATABASE_URL) {
    throw new ConfigError(['KB_MIGRATE: off needs DATABASE_URL: the embedded store is migrated by the one process that opens it']);
  }
  if (env.KB_ROLE !== 'all' && !env.DATABASE_URL) {
    throw new ConfigError([
      `KB_ROLE: ${env.KB_ROLE} needs DATABASE_URL: the embedded store belongs to one process, which does everything (kb serve)`,
    ]);
  }
  return {
    host: env.HOST,
    port: env.PORT,
    role: env.KB_ROLE,
    drainSeconds: env.KB_DRAIN_SECONDS,
    migrate: env.KB_MIGRATE === 'on',
    // Behind a load balancer (several processes need PostgreSQL): long enough for two health checks a second apart.
    drainNoticeSeconds: Math.min(env.KB_DRAIN_SECONDS, env.KB_DRAIN_NOTICE_SECONDS ?? (env.DATABASE_URL ? 2 : 0)),
    instance: env.KB_INSTANCE ?? `${os.hostname()}:${env.PORT === 0 ? `pid${process.pid}` : env.PORT}`,
    dataDir: path.resolve(env.KB_DATA_DIR),
    databaseUrl: env.DATABASE_URL,
    elasticsearch: env.ELASTICSEARCH_URL && {
      nodes: env.ELASTICSEARCH_URL,
      index: env.KB_ES_INDEX,
      shards: env.KB_ES_SHARDS,
      replicas: env.KB_ES_REPLICAS ?? (env.ELASTICSEARCH_URL.length > 1 ? 1 : 0),
      sniff: env.KB_ES_SNIFF === 'on',
    },
    openai: {
      baseUrl: env.OPENAI_BASE_URL,
      apiKey: env.OPENAI_API_KEY,
      embeddingModel: env.OPENAI_EMBEDDING_MODEL,
      embeddingDimensions: env.OPENAI_EMBEDDING_DIMENSIONS,
      chatModel: env.OPENAI_CHAT_MODEL,
      timeoutSeconds: env.OPENAI_TIMEOUT_SECONDS,
      maxAnswerTokens: env.OPENAI_MAX_ANSWER_TOKENS,
      maxPlanTokens: env.OPENAI_MAX_PLAN_TOKENS,
      generationSeconds: env.OPENAI_GENERATION_SECONDS,
      repeatStopWords: env.OPENAI_REPEAT_STOP_WORDS,
    },
    embeddings: {
      modelsDir: env.KB_MODELS_DIR ? path.resolve(env.KB_MODELS_DIR) : defaultModelsDir,
      localModel: env.KB_EMBEDDING_MODEL,
      threads: env.KB_EMBED_THREADS,
      batchSize: env.KB_EMBED_BATCH_SIZE,
      workerNiceness: env.KB_EMBED_NICENESS,
    },
    threadPlacement: planThreadPlacement(env.KB_THREAD_PLACEMENT, !env.DATABASE_URL, threadCpus()),
    searchTimeoutSeconds: env.KB_SEARCH_TIMEOUT_SECONDS,
    keywordMemoryBytes: env.KB_KEYWORD_MEMORY_MB * 1024 * 1024,
    vectorsInMemory: env.KB_VECTORS_IN_MEMORY,
    indexSnapshotDir: env.KB_INDEX_SNAPSHOTS === 'on' ? path.join(path.resolve(env.KB_DATA_DIR), 'index-snapshots') : undefined,
    storeCacheMb: env.KB_STORE_CACHE_MB,
    storeCacheWarmPercent: env.KB_STORE_CACHE_WARM_PERCENT,
    searchesPerMinute: env.KB_SEARCH_RATE_PER_MINUTE,
    jwtSecret: env.KB_JWT_SECRET,
    agentCost: { fast: env.KB_AGENT_COST_FAST, deep: env.KB_AGENT_COST_DEEP },
    agent: {
      timeoutSeconds: env.KB_AGENT_TIMEOUT_SECONDS,
      // Several processes need PostgreSQL: a run whose process died is ended within seconds there,
      // while a store outage of up to ~10 s (renewals every 5 s) does not end live runs.
      leaseSeconds: env.KB_AGENT_LEASE_SECONDS ?? (env.DATABASE_URL ? 15 : 60),
      heartbeatSeconds: env.KB_AGENT_HEARTBEAT_SECONDS,
      resumeGraceSeconds: env.KB_AGENT_RESUME_GRACE_SECONDS,
    },
    maxJsonBytes: env.KB_MAX_JSON_BYTES,
    maxGraphqlResponseBytes: env.KB_MAX_GRAPHQL_RESPONSE_BYTES,
    uploads: { maxFileBytes: env.KB_MAX_UPLOAD_BYTES, maxFiles: env.KB_MAX_UPLOAD_FILES },
    server: {
      maxConnections: env.KB_MAX_CONNECTIONS,
      headersTimeoutSeconds: env.KB_HEADERS_TIMEOUT_SECONDS,
      requestTimeoutSeconds: env.KB_REQUEST_TIMEOUT_SECONDS,
      keepAliveTimeoutSeconds: env.KB_KEEP_ALIVE_TIMEOUT_SECONDS,
      sendTimeoutSeconds: env.KB_SEND_TIMEOUT_SECONDS,
      minUploadBytesPerSecond: env.KB_MIN_UPLOAD_BYTES_PER_SECOND,
      uploadRateWindowSeconds: env.KB_MIN_UPLOAD_RATE_WINDOW_SECONDS,
      uploadSpoolDir: env.KB_UPLOAD_SPOOL_DIR ? path.resolve(env.KB_UPLOAD_SPOOL_DIR) : path.join(path.resolve(env.KB_DATA_DIR), 'uploads'),
    },
    graphqlSse: {
      streamsPerUser: env.KB_GRAPHQL_SSE_STREAMS_PER_USER,
      unopenedSeconds: env.KB_GRAPHQL_SSE_UNOPENED_SECONDS,
      queueBytes: Math.round(env.KB_GRAPHQL_SSE_QUEUE_MB * 1024 * 1024),
    },
    ingestion: {
      chunkTokens: env.KB_CHUNK_TOKENS,
      overlapTokens: env.KB_CHUNK_OVERLAP_TOKENS,
      concurrency: env.KB_INGEST_CONCURRENCY,
      // On PostgreSQL another process takes a dead one's jobs over when their leases run out; the
      // embedded store has no other process, and releases a dead one's claims when it starts.
      leaseSeconds: env.KB_INGEST_LEASE_SECONDS ?? (env.DATABASE_URL ? 15 : 60),
      pollSeconds: env.KB_INGEST_POLL_SECONDS ?? (env.DATABASE_URL ? 1 : 5),
      turnSeconds: env.KB_INGEST_TURN_SECONDS,
      embedMaxAttempts: env.KB_EMBED_MAX_ATTEMPTS,
      embedMaxBackoffSeconds: env.KB_EMBED_MAX_BACKOFF_SECONDS,
      parseMemoryMb: env.KB_PARSE_MEMORY_MB,
      parseIdleSeconds: env.KB_PARSE_THREAD_IDLE_SECONDS,
      parseTimeoutSeconds: { base: env.KB_PARSE_TIMEOUT_SECONDS, perMegabyte: env.KB_PARSE_TIMEOUT_SECONDS_PER_MB },
      maxUnpackedBytes: env.KB_MAX_UNPACKED_BYTES,
      maxTextCharacters: env.KB_MAX_TEXT_CHARACTERS,
      ocr: env.KB_OCR_LANGUAGE === 'off' ? null : { language: env.KB_OCR_LANGUAGE },
      maxOcrPages: env.KB_OCR_MAX_PAGES,
    },
    logLevel: env.KB_LOG_LEVEL,
    metricsToken: env.KB_METRICS_TOKEN,
    client: { url: env.KB_URL, apiKey: env.KB_API_KEY },
  };
}
