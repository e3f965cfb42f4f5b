import type { Drain } from '../http/drain.js';
import { authenticate, type AuthDependencies, type Viewer } from '../auth/authenticate.js';
import type { ExecutionResult } from 'graphql';
import type { Config } from '../config.js';
import type { Database } from '../db/database.js';
import type { AppError } from '../errors.js';
import type { PrismaClient } from '../generated/prisma/client.js';
import type { RateLimits } from '../http/rate-limits.js';
import type { JobQueue } from '../modules/jobs/queue.js';
import type { RetrievalDependencies } from '../modules/retrieval/service.js';
import type { AgentDependencies } from '../modules/agent/service.js';
import type { Metrics } from '../observability/metrics.js';
import type { IdempotencyStore } from '../modules/idempotency/store.js';
import type { FileReadTurns } from '../modules/documents/file-reads.js';
import { graphqlStreamEndpoint } from './endpoints.js';
import { ResponseBudget } from './response-limit.js';
import type { StreamRouting } from './stream-routing.js';

/** What lives for the whole process: configuration, the store, the rate limiters. */
export interface AppServices {
  config: Config;
  db: Database;
  auth: AuthDependencies;
  rateLimits: RateLimits;
  ingestion: Pick<JobQueue, 'notify' | 'cancelDeleted'>;
  retrieval: RetrievalDependencies;
  agent: AgentDependencies;
  /** Prometheus series (GET /metrics); absent in processes that serve no HTTP. */
  metrics?: Metrics;
  /** Idempotency-Key records of the creating REST POSTs (src/rest/idempotency.ts). */
  idempotency: IdempotencyStore;
  /** Turns for reading stored files, per user (src/modules/documents/file-reads.ts). */
  fileReads: FileReadTurns;
  /** Whether the process is leaving (SIGTERM), and what is still in flight (src/http/drain.ts). */
  drain: Drain;
  /** Where graphql-sse streams are open across processes (PostgreSQL only; src/graphql/stream-routing.ts). */
  streamRouting?: StreamRouting;
}

/** Where Yoga leaves a REST request's execution result for the REST layer, unserialised. */
export type RestResultHandOver = {
  result?: ExecutionResult;
  /** Set by a streaming route: the subscription's results arrive here, one per event, unserialised. */
  wantsStream?: boolean;
  stream?: AsyncIterableIterator<ExecutionResult>;
};

/** What the REST layer hands Yoga with a request. */
export interface RestServerContext {
  /** Set when the request itself was unusable (bad JSON, wrong type, ...). */
  restInputError?: AppError;
  restResult?: RestResultHandOver;
}

/** What the caller of `yoga.fetch` hands over: /graphql has authenticated the request already. */
export interface GraphQLServerContext extends RestServerContext {
  viewer?: Viewer;
  /**
   * What the operation's long work stops on, when it is not the request's own signal: an
   * operation sent to a graphql-sse stream lives as long as that stream, not its POST.
   */
  signal?: AbortSignal;
}

export interface Context {
  config: Config;
  prisma: PrismaClient;
  auth: AuthDependencies;
  rateLimits: RateLimits;
  ingestion: Pick<JobQueue, 'notify' | 'cancelDeleted'>;
  retrieval: RetrievalDependencies;
  agent: AgentDependencies;
  /** Aborts when the client goes away: long work (searches, the agent) stops. */
  signal: AbortSignal;
  viewer: Viewer | null;
  restInputError: AppError | undefined;
  /** Whether the answer can be an event stream: a subscription is refused before it starts otherwise. */
  acceptsEventStream: boolean;
  /** What the operation's response may still hold (KB_MAX_GRAPHQL_RESPONSE_BYTES); a file's base64 takes its share before it is read. */
  responseBudget: ResponseBudget;
  fileReads: FileReadTurns;
}

/** Builds the per-request context. Throws a 401 AppError for a credential that is not valid. */
export async function createContext(app: AppServices, request: Request, serverContext: GraphQLServerContext): Promise<Context> {
  const viewer =
    serverContext.viewer ??
    (await authenticate(request.headers.get('authorization'), app.auth));
  return {
    config: app.config,
    prisma: app.db.prisma,
    auth: app.auth,
    rateLimits: app.rateLimits,
    ingestion: app.ingestion,
    retrieval: app.retrieval,
    agent: app.agent,
    signal: serverContext.signal ?? request.signal,
    viewer,
    restInputError: serverContext.restInputError,
    acceptsEventStream:
      (request.headers.get('accept') ?? '').includes('text/event-stream') || new URL(request.url).pathname === graphqlStreamEndpoint,
    responseBudget: new ResponseBudget(app.config.maxGraphqlResponseBytes),
    fileReads: app.fileReads,
  };
}
