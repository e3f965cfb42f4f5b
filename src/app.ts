import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApiKeyCache } from './auth/api-key-cache.js';
import { lentModels, loadModels, openBackends, startIngestionQueue, type ModelOptions, type Models } from './backends.js';
import { adminSocketPath, startAdminChannel } from './cli/admin-channel.js';
import type { Config } from './config.js';
import { openDatabase, type Database } from './db/database.js';
import { AppError } from './errors.js';
import type { AppServices } from './graphql/context.js';
import { StreamRouting } from './graphql/stream-routing.js';
import { createGraphQLServer } from './graphql/yoga.js';
import { createRateLimits } from './http/rate-limits.js';
import { createMetrics, meteredEmbedder, meteredHandlers } from './observability/metrics.js';
import { removeStaleSpoolFiles } from './http/body.js';
import { createHttpServer } from './http/connections.js';
import { Drain } from './http/drain.js';
import { McpCalls } from './mcp/cancellations.js';
import { createRequestHandler } from './http/server.js';
import { createLogger, type Logger } from './logger.js';
import { placeThisThread, type ThreadPlacement } from './thread-placement.js';
import { FileReadTurns, fileReadsPerUser } from './modules/documents/file-reads.js';
import { allJobKinds, type JobKind } from './modules/jobs/job-handler.js';
import type { JobQueue } from './modules/jobs/queue.js';
import { AgentRuns } from './modules/agent/runs.js';
import { takeOverRun, type AgentDependencies } from './modules/agent/service.js';
import { IdempotencyStore } from './modules/idempotency/store.js';
import { createAnswerModel } from './modules/agent/select.js';
import { defaultGraphMergeOptions, postgresGraphMergeOptions, startGraphMerge } from './modules/retrieval/graph-merge.js';
import { watchIndexModel } from './modules/retrieval/model-watch.js';
import type { GraphRead } from './modules/retrieval/pgvector-graph-read.js';
import { modelMismatch, type RetrievalDependencies } from './modules/retrieval/service.js';
import { countUsers, createUser } from './modules/user/service.js';
import { persistedOperations } from './rest/routes.js';

export type RunningApp = {
  url: string;
  db: Database;
  server: Server;
  /** This process's ingestion workers (stopping them leaves the jobs to other processes). */
  ingestion: JobQueue;
  /** What this process's searches run with: its store, embedder and index. */
  retrieval: RetrievalDependencies;
  /** Settles when what the index prepares at start (see VectorIndex.warm) is done or failed. */
  warmed: Promise<void>;
  /**
   * Stops the process's work and closes the store; a second call waits for the first. `drain`
   * (SIGTERM): first `/readyz` answers 503 for `drainNoticeSeconds` while requests are still
   * taken, then no new connection is accepted and what is in flight (requests, uploads, streams,
   * jobs) has until `drainSeconds` after the start to finish; runs still going then end with an
   * `error` event and a refund.
   */
  close(options?: { drain?: boolean }): Promise<void>;
};

export const firstAdminEmail = 'admin@localhost';

/**
 * On an empty store, creates admin@localhost with 1,000 credits and returns its raw key: the
 * only time that key can be seen.
 */
export async function ensureFirstAdmin(db: Database) {
  if ((await countUsers(db.prisma)) > 0) return null;
  try {
    const { user, apiKey } = await createUser(db.prisma, { email: firstAdminEmail, name: 'Administrator', credits: 1000 });
    return { user, apiKey };
  } catch (error) {
    // Two processes starting on one new PostgreSQL database: the other one made the admin.
    if (error instanceof AppError && error.code === 'conflict') return null;
    throw error;
  }
}

/**
 * This thread (HTTP, keyword ranking, the graph in memory) goes where the embedded store's thread
 * is, apart from the query embedding (thread-placement.ts). Threads and processes it starts later
 * inherit its CPUs, so the embedding workers and the parsing processes take theirs themselves.
 */
async function placeHttpThread(placement: ThreadPlacement, log: Logger) {
  const problem = await placeThisThread(placement.mainCpus);
  log.info(
    problem
      ? `threads: left to the scheduler, ${problem}`
      : `threads: HTTP and the store on CPU ${placement.mainCpus.join(',')}, query embedding on CPU ${placement.queryCpus.join(',')}, passages and parsing on any (KB_THREAD_PLACEMENT=off leaves them all to the scheduler)`,
  );
}

/** The models a server loads: a parsing process per ingestion worker, started at once where it ingests. */
export function serverModelOptions(config: Config): ModelOptions {
  return { parseProcesses: config.ingestion.concurrency, warmParsers: config.role !== 'api' };
}

export type StartOptions = {
  log?: Logger;
  onFirstAdmin?: (rawKey: string) => void;
  /**
   * Models loaded by the caller for this app's configuration, which it keeps open after the app
   * closes (see lentModels): the test suite loads them once for many servers in one process.
   */
  models?: Models;
};

export async function startApp(config: Config, options: StartOptions = {}): Promise<RunningApp> {
  const log = options.log ?? createLogger(config.logLevel);
  const concurrency = config.ingestion.concurrency;
  // Ingestion and maintenance: everywhere but in a process of the `api` role.
  const works = config.role !== 'api';
  // The model and the parsing processes load while the store opens: neither needs it.
  const models = options.models ? Promise.resolve(lentModels(options.models)) : loadModels(config, serverModelOptions(config));
  // Awaited by openBackends below; a failure meanwhile must not count as unhandled.
  models.catch(() => undefined);
  const closeModels = () => models.then((loaded) => loaded.close(), () => undefined);
  let db: Database;
  try {
    db = await openDatabase(config, log);
  } catch (error) {
    await closeModels();
    throw error;
  }
  // What the start has begun, each with the step that ends it. They run once each, the last begun
  // first: by a start that fails at a later step (a port in use), and by close once the server
  // has stopped serving. A step that fails is logged, and the ones after it still run.
  const undo: (() => unknown)[] = [() => db.close(), closeModels];
  const undoAll = async () => {
    for (const step of undo.splice(0).reverse()) {
      await Promise.resolve()
        .then(step)
        .catch((error: unknown) => log.error('stopping: a step of the shutdown failed', error));
    }
  };
  // Before anything addresses this process by its name (stream routing forgets what a previous
  // life of the name held as it starts).
  try {
    await db.claimInstance?.(config.instance);
  } catch (error) {
    await undoAll();
    throw error;
  }
  try {
    // Model and index first: a start that fails on them must not have used up the admin's one showing of its key.
    const metrics = createMetrics(db.prisma, db.backgroundWork, config.instance);
    const backends = await openBackends(config, db, models, { wrapEmbedder: (model) => meteredEmbedder(model, metrics) });
    // From here the backends close the models, the index between the parsing processes and the model.
    undo.splice(undo.indexOf(closeModels), 1, () => backends.close());
    const { embedder, index, parsePool } = backends;
    if (index.graphBacklog) metrics.watchGraphBacklog(index.graphBacklog.bind(index));
    const admin = await ensureFirstAdmin(db);
    if (admin) options.onFirstAdmin?.(admin.apiKey.rawKey);
    const mismatch = modelMismatch({ embedder, index });
    if (mismatch) log.error(`search and embedding are paused: ${mismatch}`);
    const queue = startIngestionQueue(
      config,
      db,
      backends,
      {
        // An `api` process queues jobs and signals them; the workers of other processes run them.
        concurrency: works ? concurrency : 0,
        pollMs: config.ingestion.pollSeconds * 1000,
        releaseStaleClaims: db.kind === 'pglite',
        signals: db.signals,
        wrapHandlers: (handlers) => meteredHandlers(handlers, metrics),
      },
      log,
    );
    // Vectors of another model must never be mixed into the index: embedding waits for `kb reindex`.
    const withoutEmbedding: JobKind[] = ['parse', 'index_delete'];
    if (mismatch) queue.setClaimable(withoutEmbedding);
    const modelWatch = watchIndexModel({ index, embedder, log, paused: mismatch !== null, pause: (paused) => queue.setClaimable(paused ? withoutEmbedding : allJobKinds) });
    const ingestion = queue;
    undo.push(() => queue.stop(), () => clearInterval(modelWatch));
    const graphMerge = works
      ? startGraphMerge({ index, activity: ingestion, log, backgroundWork: db.backgroundWork }, db.kind === 'postgres' ? postgresGraphMergeOptions : defaultGraphMergeOptions)
      : undefined;
    undo.push(() => graphMerge?.stop());
    const retrieval = { prisma: db.prisma, query: db.query, embedder, index, timeoutMs: config.searchTimeoutSeconds * 1000, storeWork: db.backgroundWork };
    // The embedded store is held by this process alone, so a cache of its valid keys stays exact.
    const auth = { prisma: db.prisma, jwtSecret: config.jwtSecret, apiKeyCache: db.kind === 'pglite' ? new ApiKeyCache() : null };
    const agentRuns = new AgentRuns(db.prisma, config.agent.leaseSeconds * 1000, log, db.signals);
    const agent: AgentDependencies = {
      prisma: db.prisma,
      retrieval,
      answerModel: createAnswerModel(config, embedder),
      runs: agentRuns,
      log,
      cost: config.agentCost,
      timeoutMs: config.agent.timeoutSeconds * 1000,
      resumeGraceMs: config.agent.resumeGraceSeconds * 1000,
      metrics,
    };
    // Resumable runs that draining processes hand over are run on here.
    agentRuns.takeOverWith((runs) => {
      for (const run of runs) takeOverRun(agent, run);
    });
    await agentRuns.start({ exclusive: db.kind === 'pglite' });
    undo.push(() => agentRuns.stop());
    const idempotency = new IdempotencyStore(db.prisma, log);
    await idempotency.start({ exclusive: db.kind === 'pglite' });
    undo.push(() => idempotency.stop());
    const app: AppServices = {
      config,
      db,
      auth,
      rateLimits: createRateLimits({ searchesPerMinute: config.searchesPerMinute, sharedPool: db.sharedPool }),
      ingestion,
      retrieval,
      agent,
      metrics,
      idempotency,
      fileReads: new FileReadTurns(fileReadsPerUser),
      drain: new Drain(),
      streamRouting: db.signals && new StreamRouting({ prisma: db.prisma, signals: db.signals, instance: config.instance, log }),
    };
    const yoga = createGraphQLServer(app, log, persistedOperations());
    const mcpCalls = new McpCalls(db.signals);
    await mcpCalls.listen();
    await app.streamRouting?.start();
    const server = createHttpServer(createRequestHandler(app, yoga, log, mcpCalls), config.server, log);
    app.drain.track(server);
    // A body is cut once its request times out: a spool file older than that (and a margin for its parsing) is left over.
    const leftOver = await removeStaleSpoolFiles(config.server.uploadSpoolDir, (config.server.requestTimeoutSeconds + 600) * 1000);
    if (leftOver > 0) log.info(`removed ${leftOver} upload spool files left by a process that stopped while receiving them`);
    const adminChannel = db.kind === 'pglite' ? await startAdminChannel(db.prisma, adminSocketPath(config.dataDir)) : null;
    undo.push(() => new Promise<void>((resolve) => (adminChannel ? adminChannel.close(() => resolve()) : resolve())));
    await parsePool.warmed;
    // Listening before taking requests: an upload another process takes next must wake this one's workers.
    await queue.listening;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, () => resolve());
    });
    // Searches should not wait for what can be prepared now (pgvector: keyword postings).
    const stopWarming = new AbortController();
    const warmed = { workspaces: 0, chunks: 0, fromSaved: 0, graphsFromSaved: 0, started: performance.now() };
    const megabytes = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MB`;
    const onGraphRead = (outcome: GraphRead) => {
      if (outcome.read) {
        const seconds = (outcome.ms / 1000).toFixed(1);
        log.info(`search: the HNSW graph and its table (${megabytes(outcome.bytes)}) read into PostgreSQL's shared buffers in ${seconds} s (${outcome.pages} pages, ${outcome.pagesFromOutside} from outside them)`);
      } else if (outcome.reason === 'another process reads it') {
        log.info("search: another process is reading the HNSW graph into PostgreSQL's shared buffers");
      } else if (outcome.reason === 'too large') {
        log.info(
          `search: the HNSW graph and its table (${megabytes(outcome.bytes)}) are more than 3/4 of PostgreSQL's shared buffers (${megabytes(outcome.budgetBytes)} of them), so they are not read in ahead and searches read their pages from outside the buffers; see docs/deployment.md on sizing shared_buffers`,
        );
      }
    };
    const warming = (index.warm?.(
      stopWarming.signal,
      (_workspaceId, chunks, _ms, readBack) => {
        warmed.workspaces += 1;
        warmed.chunks += chunks;
        if (readBack.postings) warmed.fromSaved += 1;
        if (readBack.graph) warmed.graphsFromSaved += 1;
      },
      onGraphRead,
    ) ?? Promise.resolve()).then(
      () => {
        if (warmed.workspaces === 0) return;
        const seconds = ((performance.now() - warmed.started) / 1000).toFixed(1);
        const graphs = warmed.graphsFromSaved > 0 ? `, with the vector graphs in memory of ${warmed.graphsFromSaved}` : '';
        const saved = warmed.fromSaved > 0 ? `, ${warmed.fromSaved} of them read back from index-snapshots/ and brought up to date${graphs}` : '';
        log.info(`search: keyword postings of ${warmed.workspaces} workspaces (${warmed.chunks} chunks) loaded in ${seconds} s${saved}`);
      },
      (error: unknown) => {
        if (!stopWarming.signal.aborted) log.error('search: preparing at start failed (the keyword postings, or the graph read into the buffers); searches will load what they need', error);
      },
    );
    // The load ahead at start keeps the HTTP thread and the store's thread busy together (postings
    // read back and taken in, graphs): it has both cores before the HTTP thread joins the store's.
    const placement = config.threadPlacement;
    if (placement) {
      const placed = warming.then(() => (stopWarming.signal.aborted ? undefined : placeHttpThread(placement, log)));
      // A process that goes on after this app (tests, benchmarks) gets its CPUs back.
      undo.push(async () => {
        await placed;
        await placeThisThread(placement.allCpus);
      });
    }
    undo.push(() => {
      stopWarming.abort();
      return warming;
    });
    const address = server.address() as AddressInfo;
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    const stop = async ({ drain = false }: { drain?: boolean }) => {
      if (drain) {
        const started = performance.now();
        const remainingMs = () => config.drainSeconds * 1000 - (performance.now() - started);
        app.drain.start();
        log.info(`draining: /readyz answers 503; requests in flight have ${config.drainSeconds} s to finish`);
        await new Promise((resolve) => setTimeout(resolve, config.drainNoticeSeconds * 1000));
        // No new connections; Node closes the idle kept-alive ones.
        server.close();
        const [finished] = await Promise.all([app.drain.settled(remainingMs()), ingestion.stop(remainingMs())]);
        if (!finished) log.info(`draining: ${app.drain.inFlight} requests still in flight after ${config.drainSeconds} s are cut`);
      }
      // Runs first: each still streaming ends with an error event and a refund, then connections close.
      await agentRuns.stop();
      await new Promise((resolve) => setTimeout(resolve, 20));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await undoAll();
    };
    let closing: Promise<void> | undefined;
    return {
      url: `http://${host}:${address.port}`,
      db,
      server,
      ingestion,
      retrieval,
      warmed: warming,
      close: (options = {}) => (closing ??= stop(options)),
    };
  } catch (error) {
    await undoAll();
    throw error;
  }
}
