import type { Client } from '@elastic/elasticsearch';
import type { ElasticsearchCluster } from './elasticsearch-index.js';
import { bm25 } from './analyzer.js';
import { answeredWith, indexExisted } from './elasticsearch-requests.js';
import type { IndexModel } from './vector-index.js';

/** What an index's mapping records of it: the model that made its vectors, and its layout's version (elasticsearch-migrations.ts). */
type RecordedMeta = { model?: string; dimensions?: number; layout_version?: number };

/** The mapping of an index made for `model`, at the layout of `layoutVersion`. */
export const indexMappings = (model: IndexModel, layoutVersion: number) => ({
  _meta: { model: model.model, dimensions: model.dimensions, layout_version: layoutVersion },
  dynamic: 'strict' as const,
  properties: {
    chunk_id: { type: 'keyword' as const },
    document_id: { type: 'keyword' as const },
    workspace_id: { type: 'keyword' as const },
    embedding: { type: 'dense_vector' as const, dims: model.dimensions, index: true, similarity: 'cosine' as const, index_options: { type: 'int8_hnsw' as const } },
    // Terms are analysed in the service (analyzer.ts); here they are only split on spaces.
    terms: { type: 'text' as const, analyzer: 'whitespace', similarity: 'kb_bm25' },
  },
});

/** The generation number in an index's name (`kb_chunks-3` is 3); 0 for the alias's own name (an index made before aliases). */
export const generationOf = (alias: string, concrete: string) => (concrete === alias ? 0 : Number(concrete.slice(alias.length + 1)) || 0);

/** Where the alias points, and how the indexes behind it are made, swapped and deleted. */
export class IndexLayout {
  /** @param layoutVersion the layout version new indexes are made at: the latest migration's */
  constructor(
    private readonly client: Client,
    readonly alias: string,
    private readonly cluster: ElasticsearchCluster,
    readonly layoutVersion: number,
  ) {}

  /** The index the alias names (or the index named like the alias, made before aliases); null when there is none. */
  async current(): Promise<string | null> {
    try {
      const found = await this.client.indices.getAlias({ name: this.alias });
      const indexes = Object.keys(found);
      if (indexes.length !== 1) throw new Error(`the alias ${this.alias} names ${indexes.length} indexes (${indexes.join(', ')}); it must name one`);
      return indexes[0]!;
    } catch (error) {
      if (!answeredWith(error, 404)) throw error;
    }
    return (await this.client.indices.exists({ index: this.alias })) ? this.alias : null;
  }

  async #meta(index = this.alias): Promise<RecordedMeta> {
    const mapping = await this.client.indices.getMapping({ index });
    return (Object.values(mapping)[0]?.mappings?._meta ?? {}) as RecordedMeta;
  }

  /** The model recorded in the mapping of the index the alias names. */
  async model(): Promise<IndexModel | null> {
    const meta = await this.#meta();
    return meta.model === undefined ? null : { model: String(meta.model), dimensions: Number(meta.dimensions) };
  }

  /** The layout version recorded in the mapping of `index`; undefined for an index made before versions were recorded. */
  async recordedLayoutVersion(index: string): Promise<number | undefined> {
    const { layout_version: version } = await this.#meta(index);
    return version === undefined ? undefined : Number(version);
  }

  /** Records in the mapping of the index `index` that its layout is at `version`, the rest of `_meta` kept; a higher version recorded stays. */
  async recordLayoutVersion(index: string, version: number) {
    const meta = await this.#meta(index);
    if (Number(meta.layout_version ?? 0) >= version) return;
    await this.client.indices.putMapping({ index, _meta: { ...meta, layout_version: version } });
  }

  /** Makes an index for `model`, behind the alias or not, and waits until its shards can be written; returns its name. */
  async create(name: string, model: IndexModel, { behindAlias }: { behindAlias: boolean }): Promise<string> {
    try {
      await this.client.indices.create({
        index: name,
        settings: {
          number_of_shards: this.cluster.shards,
          number_of_replicas: this.cluster.replicas,
          similarity: { kb_bm25: { type: 'BM25', k1: bm25.k1, b: bm25.b } },
          // Each document's source is rebuilt from its fields when asked for, not kept beside
          // them: the vector as JSON text was two thirds of a chunk's size on disk, and searches
          // read no source (docs/retrieval.md).
          'mapping.source.mode': 'synthetic',
        },
        mappings: indexMappings(model, this.layoutVersion),
        // Made with the alias in one step: several processes starting at once make the same first index.
        ...(behindAlias && { aliases: { [this.alias]: {} } }),
      });
    } catch (error) {
      // Several processes (or test files) opening a new index at once: one of them made it.
      if (!indexExisted(error)) throw error;
    }
    // When another process made it, its shard may not be started yet: the first search would fail.
    await this.client.cluster.health({ index: name, wait_for_status: 'yellow', timeout: '30s' }, { requestTimeout: 35_000 });
    return name;
  }

  /** Points the alias at `next` and deletes `previous`, in one atomic step: no search sees neither or both. */
  async swap(previous: string, next: string) {
    await this.client.indices.updateAliases({ actions: [{ add: { index: next, alias: this.alias } }, { remove_index: { index: previous } }] });
  }

  async delete(name: string) {
    await this.client.indices.delete({ index: name, ignore_unavailable: true });
  }

  /** Indexes named `<alias>-<n>` that the alias does not name: builds that were abandoned or are under way. */
  async unaliased(): Promise<string[]> {
    const current = await this.current();
    const found = await this.client.cat.indices({ index: `${this.alias}-*`, format: 'json', h: 'index' });
    return (found as { index?: string }[]).map((row) => row.index!).filter((name) => name !== current && /^\d+$/.test(name.slice(this.alias.length + 1)));
  }
}
