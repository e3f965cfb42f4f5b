import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { PrismaClient } from '../generated/prisma/client.js';
import type { Embedder } from '../modules/embeddings/embedder.js';
import type { JobHandler } from '../modules/jobs/job-handler.js';
import type { BackgroundWork } from './background-work.js';

/**
 * The service's Prometheus series, in a registry of their own (one per running app: tests run
 * several in one process). Served at GET /metrics; docs/observability.md lists them. Every series
 * carries `kb_instance`, so that one scrape configuration tells the processes of a fleet apart.
 */
export function createMetrics(prisma: PrismaClient, backgroundWork: BackgroundWork, instance: string) {
  const registry = new Registry();
  registry.setDefaultLabels({ kb_instance: instance });
  let graphBacklog: (() => Promise<number>) | undefined;
  // Seconds already added to the counter, per task: a scrape adds what was done since.
  const reportedSeconds = new Map<string, number>();
  const seconds = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
  const metrics = {
    registry,
    httpRequestDuration: new Histogram({
      name: 'kb_http_request_duration_seconds',
      help: 'Time to the response headers, by route pattern (an SSE stream: until it opens).',
      labelNames: ['method', 'route', 'status'],
      buckets: seconds,
      registers: [registry],
    }),
    undeclaredStatuses: new Counter({
      name: 'kb_http_undeclared_status_total',
      help: "Answers of an endpoint with an error status its route does not declare (so neither does /openapi.json): a defect to report.",
      labelNames: ['method', 'route', 'status'],
      registers: [registry],
    }),
    ingestionStageDuration: new Histogram({
      name: 'kb_ingestion_stage_duration_seconds',
      help: 'Time a claim of ingestion jobs took, by stage (job kind) and outcome.',
      labelNames: ['stage', 'outcome'],
      buckets: seconds,
      registers: [registry],
    }),
    ingestionJobs: new Gauge({
      name: 'kb_ingestion_queue_jobs',
      help: 'Ingestion jobs in the durable queue, by stage and status (read from the store at each scrape).',
      labelNames: ['stage', 'status'],
      registers: [registry],
      async collect() {
        const rows = await prisma.$queryRaw<{ kind: string; status: string; count: number }[]>`
          SELECT kind::text, status::text, count(*)::int AS count FROM jobs GROUP BY kind, status`;
        this.reset();
        for (const row of rows) this.set({ stage: row.kind, status: row.status }, row.count);
      },
    }),
    ocrPages: new Gauge({
      name: 'kb_ingestion_ocr_pages',
      help: 'Pages of the documents OCR is reading now (stage ocr): done (gone through) and total (their page counts); read from the store at each scrape.',
      labelNames: ['state'],
      registers: [registry],
      async collect() {
        const [row] = await prisma.$queryRaw<{ done: number; total: number }[]>`
          SELECT coalesce(sum(ocr_pages_done), 0)::int AS done, coalesce(sum(ocr_pages_total), 0)::int AS total
            FROM documents WHERE status = 'processing' AND chunk_count = 0 AND ocr_pages_total > 0`;
        this.set({ state: 'done' }, row?.done ?? 0);
        this.set({ state: 'total' }, row?.total ?? 0);
      },
    }),
    embeddedTexts: new Counter({
      name: 'kb_embedder_texts_total',
      help: 'Texts embedded, by purpose (passage: ingestion; query: searches and answers).',
      labelNames: ['purpose'],
      registers: [registry],
    }),
    embedderSeconds: new Counter({
      name: 'kb_embedder_seconds_total',
      help: 'Seconds spent in embedding calls, by purpose; texts_total / seconds_total is the throughput.',
      labelNames: ['purpose'],
      registers: [registry],
    }),
    agentTimeToFirstToken: new Histogram({
      name: 'kb_agent_time_to_first_token_seconds',
      help: "From the run's start (credits reserved) to its first token event, by mode.",
      labelNames: ['mode'],
      buckets: seconds,
      registers: [registry],
    }),
    agentRuns: new Counter({
      name: 'kb_agent_runs_total',
      help: 'Agent runs that ended on this process, by mode and outcome (done, failed, cancelled, handed_over: given to another process at a drain).',
      labelNames: ['mode', 'outcome'],
      registers: [registry],
    }),
    backgroundSeconds: new Counter({
      name: 'kb_store_background_seconds_total',
      help: 'Seconds of work the service did on the store of its own accord, by task (graph_merge, analyze, vacuum, keyword_load, vector_graph_build, cache_resize, cache_warm, index_save); counted when a run ends.',
      labelNames: ['task'],
      registers: [registry],
      collect() {
        for (const state of backgroundWork.states()) {
          const added = state.seconds - (reportedSeconds.get(state.task) ?? 0);
          reportedSeconds.set(state.task, state.seconds);
          this.inc({ task: state.task }, added);
        }
      },
    }),
    backgroundRunning: new Gauge({
      name: 'kb_store_background_running',
      help: 'Runs of each background task in progress on the store at the scrape.',
      labelNames: ['task'],
      registers: [registry],
      collect() {
        for (const state of backgroundWork.states()) this.set({ task: state.task }, state.running);
      },
    }),
    graphBacklog: new Gauge({
      name: 'kb_index_graph_backlog_chunks',
      help: "Chunks searchable but not yet merged into the vector index's graph (pgvector; searches choose among them by sketch until they are merged).",
      registers: [registry],
      async collect() {
        if (graphBacklog) this.set(await graphBacklog());
      },
    }),
    /** Where the graph backlog gauge reads from, once the index is open. */
    watchGraphBacklog(source: () => Promise<number>) {
      graphBacklog = source;
    },
    creditsCharged: new Counter({
      name: 'kb_credits_charged_total',
      help: 'Credits charged for agent runs, by mode.',
      labelNames: ['mode'],
      registers: [registry],
    }),
  };
  return metrics;
}

export type Metrics = ReturnType<typeof createMetrics>;

/** The embedder, counting texts and time per purpose. */
export function meteredEmbedder(embedder: Embedder, metrics: Metrics): Embedder {
  return {
    get modelId() {
      return embedder.modelId;
    },
    get dimensions() {
      return embedder.dimensions;
    },
    async embed(texts, purpose, signal) {
      const started = performance.now();
      const vectors = await embedder.embed(texts, purpose, signal);
      metrics.embeddedTexts.inc({ purpose }, texts.length);
      metrics.embedderSeconds.inc({ purpose }, (performance.now() - started) / 1000);
      return vectors;
    },
    close: () => embedder.close(),
  };
}

/** Each job kind's handler, timed per claim. */
export function meteredHandlers<Kind extends string>(handlers: Record<Kind, JobHandler>, metrics: Metrics): Record<Kind, JobHandler> {
  return Object.fromEntries(
    Object.entries<JobHandler>(handlers).map(([stage, handler]) => [
      stage,
      {
        ...handler,
        run: async (...args: Parameters<JobHandler['run']>) => {
          const end = metrics.ingestionStageDuration.startTimer({ stage });
          try {
            const outcome = await handler.run(...args);
            end({ outcome: outcome === 'yielded' ? 'yielded' : 'ok' });
            return outcome;
          } catch (error) {
            end({ outcome: 'error' });
            throw error;
          }
        },
      },
    ]),
  ) as Record<Kind, JobHandler>;
}
