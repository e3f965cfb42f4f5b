import { Client, type TransportRequestOptions } from '@elastic/elasticsearch';
import type { Config } from '../../config.js';
import { generationOf, IndexLayout } from './elasticsearch-layout.js';
import { latestLayoutVersion, layoutMigrations, migrateLayout, type LayoutLockTiming, type LayoutMigration } from './elasticsearch-migrations.js';
import { readWithin, unavailable } from './elasticsearch-requests.js';
import { IndexUnavailableError, type IndexedChunk, type IndexHit, type IndexModel, type IndexRebuild, type IndexSearch, type VectorIndex } from './vector-index.js';

export type ElasticsearchOptions = {
  timeoutMs: number;
  /** False (KB_MIGRATE=off): an index behind on its layout is refused; `kb migrate` brings it up. Default true. */
  migrate?: boolean;
  /** The layout's migrations, and the timing of their lock (elasticsearch-migrations.ts); tests give their own. */
  migrations?: readonly LayoutMigration[];
  layoutLock?: LayoutLockTiming;
};

/** The nodes to reach and how the index is kept on them (config.ts, ELASTICSEARCH_URL and KB_ES_*). */
export type ElasticsearchCluster = NonNullable<Config['elasticsearch']>;

/** Candidates each shard examines per vector search: more than asked, for recall through int8 quantization. */
const numCandidates = (limit: number) => Math.min(10_000, Math.max(100, limit * 2));

/** Ids fetched per page when a deletion has to find a document's or workspace's chunks. */
const deletePage = 1_000;

/**
 * The index in Elasticsearch (ELASTICSEARCH_URL): one document per chunk, a `dense_vector` with
 * int8 HNSW on cosine for the vector side, BM25 (the same k1 and b as the pgvector index) on the
 * service's analysed terms for the keyword side, the workspace and document as keyword filters
 * inside `knn.filter`. The distribution run here has no `_delete_by_query`, so deletions find
 * the ids first and delete them in bulk. The model that built the index is in the mapping's
 * `_meta`. Requests go to the named nodes in turn; one that fails is retried at once on the
 * next, so a cluster keeps answering while one of its nodes is down.
 *
 * Searches and writes name an alias (KB_ES_INDEX, `kb_chunks`) that points at one index,
 * `<alias>-<generation>`; `rebuild` fills the next generation beside it and swaps the alias in
 * one step (`kb reindex`). An index made before aliases, named like the alias itself, is served
 * as it is until the first rebuild replaces it.
 */
export async function openElasticsearchIndex(cluster: ElasticsearchCluster, configured: IndexModel, options: ElasticsearchOptions): Promise<VectorIndex> {
  const alias = cluster.index;
  const named = cluster.nodes.join(', ');
  const client = new Client({
    nodes: cluster.nodes,
    requestTimeout: options.timeoutMs,
    // Every other node once before a request fails (the client waits between tries only after that).
    maxRetries: Math.max(2, cluster.nodes.length - 1),
    sniffOnStart: cluster.sniff,
    sniffOnConnectionFault: cluster.sniff,
  });
  try {
    // `GET /` answers 405 on this distribution, so ping() and info() cannot be used. The other
    // named nodes are tried at once, but no node twice: the client would retry a refused
    // connection after 1-2 s, then 2-4 s, and the server should refuse to start at once (the
    // server's own wait for yellow is bounded by `timeout`).
    await client.cluster.health(
      { wait_for_status: 'yellow', timeout: `${Math.ceil(options.timeoutMs / 1000)}s` },
      { requestTimeout: options.timeoutMs + 2_000, maxRetries: cluster.nodes.length - 1 },
    );
  } catch (error) {
    await client.close();
    throw new Error(`ELASTICSEARCH_URL (${named}) does not answer: ${(error as Error).message}`, { cause: error });
  }
  try {
    const migrations = options.migrations ?? layoutMigrations;
    const layout = new IndexLayout(client, alias, cluster, latestLayoutVersion(migrations));
    const index = (await layout.current()) ?? (await layout.create(`${alias}-1`, configured, { behindAlias: true }));
    const applied = await migrateLayout(client, layout, index, migrations, { migrate: options.migrate ?? true, lockTiming: options.layoutLock });
    // Replicas can change on a live index: the configured count is applied at every start. The
    // shard count is fixed when the index is made (`kb reindex` makes it anew).
    const settings = await client.indices.getSettings({ index: alias, flat_settings: true });
    const current = Object.values(settings)[0]?.settings as Record<string, string> | undefined;
    if (Number(current?.['index.number_of_replicas']) !== cluster.replicas) {
      await client.indices.putSettings({ index: alias, settings: { number_of_replicas: cluster.replicas } });
    }
    const builtWith = (await layout.model()) ?? configured;
    return new ElasticsearchIndex(client, named, alias, builtWith, options.timeoutMs, layout, applied);
  } catch (error) {
    await client.close();
    throw error;
  }
}

class ElasticsearchIndex implements VectorIndex {
  readonly kind = 'elasticsearch' as const;
  readonly traits = { deletesWithStore: false, keywordStatistics: 'whole_index', readsAlong: false, scorePrecision: 'single' } as const;
  #builtWith: IndexModel;

  /**
   * @param index what requests name: the alias, or (a rebuild's writer) the index being built
   * @param layout the alias's layout, to rebuild it; absent on a rebuild's writer
   * @param appliedMigrations the layout migrations this opening applied
   */
  constructor(
    private readonly client: Client,
    private readonly url: string,
    private readonly index: string,
    builtWith: IndexModel,
    private readonly timeoutMs: number,
    private readonly layout?: IndexLayout,
    readonly appliedMigrations: readonly string[] = [],
  ) {
    this.#builtWith = builtWith;
  }

  get builtWith() {
    return this.#builtWith;
  }

  async upsert(chunks: readonly IndexedChunk[], signal?: AbortSignal) {
    if (chunks.length === 0) return;
    const operations = chunks.flatMap((chunk) => {
      if (chunk.embedding.length !== this.#builtWith.dimensions) {
        throw new Error(`a ${chunk.embedding.length}-dimensional vector cannot go into an index of ${this.#builtWith.dimensions} dimensions`);
      }
      return [
        { index: { _index: this.index, _id: chunk.chunkId } },
        {
          chunk_id: chunk.chunkId,
          document_id: chunk.documentId,
          workspace_id: chunk.workspaceId,
          embedding: Array.from(chunk.embedding),
          terms: chunk.terms.join(' '),
        },
      ];
    });
    // The batch must be searchable when this returns: the document is marked ready right after its
    // last batch, and upsert cannot tell which batch is the last. `refresh: true` refreshes the
    // shards the batch wrote to (and their replicas) at once: 30-50 ms per batch of 32 on one shard here, against 600-1,000 ms for `wait_for`, which
    // waits for the next scheduled refresh (1 s). It makes one small segment per batch, at about
    // the rate the scheduled refresh would while documents are embedded (a batch takes ~1.4 s to
    // embed per worker), and merges fold them; `wait_for` would add up to a second to every
    // document's time to ready and to every test that indexes.
    const response = await this.client.bulk({ operations, refresh: true }, { signal }).catch((error: unknown) => {
      throw unavailable(this.url, error);
    });
    if (response.errors) {
      const failed = response.items.find((item) => item.index?.error)?.index?.error;
      throw new IndexUnavailableError(`Elasticsearch refused a chunk: ${failed?.type}: ${failed?.reason}`);
    }
  }

  /**
   * Deletes every chunk matching the filter: ids page by page, then a bulk delete, until none is
   * left. Each delete refreshes (as upsert does), so the next page does not find the same ids
   * again and the chunks have left search when this returns.
   */
  async #deleteWhere(field: 'document_id' | 'workspace_id', value: string, keep: ReadonlySet<string> = new Set()) {
    try {
      for (;;) {
        const found = await this.client.search({
          index: this.index,
          size: deletePage,
          _source: false,
          query: { bool: { filter: [{ term: { [field]: value } }], must_not: keep.size > 0 ? [{ ids: { values: [...keep] } }] : [] } },
        });
        const ids = found.hits.hits.map((hit) => hit._id!);
        if (ids.length === 0) return;
        const response = await this.client.bulk({ operations: ids.map((id) => ({ delete: { _index: this.index, _id: id } })), refresh: true });
        // A chunk already gone answers 404 without an error; anything else is one.
        const failed = response.errors ? response.items.find((item) => item.delete?.error)?.delete?.error : undefined;
        if (failed) throw new IndexUnavailableError(`Elasticsearch did not delete a chunk: ${failed.type}: ${failed.reason}`);
        if (ids.length < deletePage) return;
      }
    } catch (error) {
      if (error instanceof IndexUnavailableError) throw error;
      throw unavailable(this.url, error);
    }
  }

  deleteDocument(documentId: string) {
    return this.#deleteWhere('document_id', documentId);
  }

  deleteWorkspace(workspaceId: string) {
    return this.#deleteWhere('workspace_id', workspaceId);
  }

  async search(request: IndexSearch, signal?: AbortSignal) {
    const filter: object[] = [{ terms: { workspace_id: [...request.workspaceIds] } }];
    if (request.documentIds) filter.push({ terms: { document_id: [...request.documentIds] } });
    const mustNot = request.excludeDocumentIds.length > 0 ? [{ terms: { document_id: [...request.excludeDocumentIds] } }] : [];
    const restrict = { bool: { filter, must_not: mustNot } };
    const terms = [...new Set(request.terms ?? [])];
    const [vector, keyword] = await this.#read('search', signal, (requestOptions) =>
      Promise.all([
        // The keyword request leaves at once; the vector one when the query's vector is known.
        request.vector
          ? Promise.resolve(request.vector).then((queryVector) =>
              this.client.search(
                {
                  index: this.index,
                  _source: false,
                  size: request.limit,
                  track_total_hits: false,
                  knn: {
                    field: 'embedding',
                    query_vector: Array.from(queryVector),
                    k: request.limit,
                    num_candidates: numCandidates(request.limit),
                    filter: restrict,
                    // Ranks the int8 candidates again on the stored floats: exact cosine scores.
                    rescore_vector: { oversample: 2 },
                  },
                },
                requestOptions,
              ),
            )
          : undefined,
        terms.length > 0
          ? this.client.search(
              {
                index: this.index,
                _source: false,
                size: request.limit,
                // No hit count: Lucene can then skip documents that cannot reach the top.
                track_total_hits: false,
                query: { bool: { ...restrict.bool, must: [{ match: { terms: { query: terms.join(' '), operator: 'or' } } }] } },
              },
              requestOptions,
            )
          : undefined,
      ]),
    );
    return {
      // Elasticsearch scores cosine as (1 + cos) / 2; the service reports the cosine itself.
      vector: (vector?.hits.hits ?? []).map((hit): IndexHit => ({ chunkId: hit._id!, score: 2 * (hit._score ?? 0) - 1 })),
      keyword: (keyword?.hits.hits ?? []).map((hit): IndexHit => ({ chunkId: hit._id!, score: hit._score ?? 0 })),
    };
  }

  #read<T>(what: string, signal: AbortSignal | undefined, work: (options: TransportRequestOptions) => Promise<T>): Promise<T> {
    return readWithin(this.url, this.timeoutMs, what, signal, work);
  }

  countByDocument(workspaceId: string) {
    return this.#countByDocument(workspaceId);
  }

  /** Chunks by document, in one workspace or (undefined) in the whole index. */
  async #countByDocument(workspaceId: string | undefined) {
    const counts = new Map<string, number>();
    let after: Record<string, string> | undefined;
    for (;;) {
      // Each page within the timeout: a workspace of many documents takes several.
      const response = await this.#read('count', undefined, (options) =>
        this.client.search(
          {
            index: this.index,
            size: 0,
            query: workspaceId === undefined ? { match_all: {} } : { bool: { filter: [{ term: { workspace_id: workspaceId } }] } },
            aggregations: { documents: { composite: { size: 1_000, sources: [{ document_id: { terms: { field: 'document_id' } } }], ...(after && { after }) } } },
          },
          options,
        ),
      );
      const aggregation = response.aggregations?.documents as
        | { buckets: { key: { document_id: string }; doc_count: number }[]; after_key?: Record<string, string> }
        | undefined;
      for (const bucket of aggregation?.buckets ?? []) counts.set(bucket.key.document_id, bucket.doc_count);
      if (!aggregation?.after_key || aggregation.buckets.length === 0) return counts;
      after = aggregation.after_key;
    }
  }

  /** Empties the index by swapping in an empty one made for `model`. */
  async reset(model: IndexModel) {
    await (await this.rebuild(model)).swap();
  }

  async refreshBuiltWith() {
    const model = await this.layout?.model();
    if (model) this.#builtWith = model;
  }

  /**
   * Makes the alias's next index for `model` beside the current one, which goes on serving every
   * search and write until `swap`. Indexes of earlier builds that never swapped are deleted first:
   * `kb reindex` holds the store's lock, so no other build is under way.
   */
  async rebuild(model: IndexModel): Promise<IndexRebuild> {
    const layout = this.layout;
    if (!layout) throw new Error('an index being rebuilt cannot itself be rebuilt');
    for (const abandoned of await layout.unaliased()) await layout.delete(abandoned);
    const previous = await layout.current();
    if (previous === null) throw new Error(`the alias ${layout.alias} names no index`);
    // Unfinished builds are gone: the next number after the index in service is free.
    const name = `${layout.alias}-${generationOf(layout.alias, previous) + 1}`;
    await layout.create(name, model, { behindAlias: false });
    const target = new ElasticsearchIndex(this.client, this.url, name, model, this.timeoutMs);
    return {
      name,
      upsert: (chunks, signal) => target.upsert(chunks, signal),
      deleteDocument: (documentId) => target.deleteDocument(documentId),
      deleteChunksExcept: (documentId, keep) => target.#deleteWhere('document_id', documentId, keep),
      countByDocument: () => target.#countByDocument(undefined),
      swap: async () => {
        await layout.swap(previous, name);
        this.#builtWith = model;
      },
      abandon: () => layout.delete(name),
    };
  }

  async ping() {
    await this.#read('ping', undefined, (options) =>
      this.client.cluster.health({ index: this.index, wait_for_status: 'yellow', timeout: '2s' }, options),
    );
  }

  async close() {
    await this.client.close();
  }
}
