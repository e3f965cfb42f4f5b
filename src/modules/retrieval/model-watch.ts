import type { Logger } from '../../logger.js';
import type { Embedder } from '../embeddings/embedder.js';
import { modelMismatch } from './service.js';
import type { VectorIndex } from './vector-index.js';

/** How often a process asks which model built the index it serves. */
export const modelWatchIntervalMs = 5_000;

/**
 * Another process's `kb reindex` may put an index of another model in place of the one this
 * process serves (Elasticsearch). Every `modelWatchIntervalMs` this reads the model again: when
 * it stops matching the configured one, searches answer 503 and `pause(true)` stops embedding, so
 * this process mixes no vectors into the new index; when it matches again (a process started with
 * the new model before the swap), `pause(false)` resumes embedding. An index without
 * `refreshBuiltWith` (pgvector: `kb reindex` stops the service's use of it) needs no watch.
 */
export function watchIndexModel(options: {
  index: VectorIndex;
  embedder: Pick<Embedder, 'modelId' | 'dimensions'>;
  log: Logger;
  paused: boolean;
  pause(paused: boolean): void;
}): NodeJS.Timeout | undefined {
  const { index, embedder, log } = options;
  if (!index.refreshBuiltWith) return undefined;
  let paused = options.paused;
  let checking = false;
  const timer = setInterval(() => {
    if (checking) return;
    checking = true;
    index
      .refreshBuiltWith!()
      .then(() => {
        const mismatch = modelMismatch({ embedder, index });
        if ((mismatch !== null) === paused) return;
        paused = mismatch !== null;
        options.pause(paused);
        if (mismatch) log.error(`the index was replaced; search and embedding are paused: ${mismatch}`);
        else log.info(`the index was replaced by one of ${embedder.modelId}; search and embedding resume`);
      })
      // The index does not answer: searches say so themselves; the next turn asks again.
      .catch(() => {})
      .finally(() => (checking = false));
  }, modelWatchIntervalMs);
  timer.unref();
  return timer;
}
