// The embedded model inside a worker thread of the ONNX embedder's pool (onnx-embedder.ts): each
// thread loads the tokenizer and its own ONNX session once, from the paths in `workerData`, and
// then embeds one text per task.
import { readFile } from 'node:fs/promises';
import type { Tokenizer } from '@huggingface/tokenizers';
import ort from 'onnxruntime-node';
import { workerData } from 'piscina';
import { placeThisThread } from '../../thread-placement.js';
import { lowerThreadPriority } from './thread-priority.js';
import { encode, loadTokenizer } from './tokenize.js';

export type OnnxWorkerData = {
  onnxPath: string;
  tokenizerPath: string;
  /** ONNX Runtime's intra-op threads for this thread's session. */
  intraOpThreads: number;
  /** How far below the process's CPU priority this thread runs (a nice increment, 0 for none; thread-priority.ts). */
  niceness: number;
  /** The CPUs this thread keeps to (thread-placement.ts); any, when not given. */
  cpus?: number[];
};

/** One text, with the query prefix already in place when it is a query. */
export type OnnxTask = { text: string };

/** The L2-normalised CLS vector, and how many tokens went in ([CLS] and [SEP] included). */
export type OnnxTaskResult = { vector: Float32Array; tokens: number };

type Model = { tokenizer: Tokenizer; session: ort.InferenceSession; sepId: number };

async function load({ onnxPath, tokenizerPath, intraOpThreads }: OnnxWorkerData): Promise<Model> {
  const { tokenizer, sepId } = loadTokenizer(await readFile(tokenizerPath, 'utf8'));
  const session = await ort.InferenceSession.create(onnxPath, {
    intraOpNumThreads: intraOpThreads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    // Idle pool threads of a session would otherwise spin between runs, taking CPU from the
    // HTTP thread and the other sessions on a 2-core machine.
    extra: { session: { intra_op: { allow_spinning: '0' } } },
  });
  return { tokenizer, session, sepId };
}

// With one intra-op thread the session runs in this thread, at this thread's priority and on its CPUs.
lowerThreadPriority((workerData as OnnxWorkerData).niceness);
const { cpus } = workerData as OnnxWorkerData;
// A thread that cannot be placed runs anywhere; the server's start log says why (app.ts).
const placed = cpus ? placeThisThread(cpus) : Promise.resolve(undefined);

// Loading starts when the thread starts (the pool has atomics disabled, so the thread's event
// loop runs while it waits for tasks); a failure is reported by every task, not as a crash.
const model = placed.then(() => load(workerData as OnnxWorkerData));
model.catch(() => {});

/**
 * One sequence per `session.run`: measured fastest (no padding, small attention buffers);
 * see docs/embeddings.md.
 */
export default async function embedOne(task: OnnxTask): Promise<OnnxTaskResult> {
  const { tokenizer, session, sepId } = await model;
  const ids = encode(tokenizer, sepId, task.text);
  const length = ids.length;
  const inputIds = BigInt64Array.from(ids, (id) => BigInt(id));
  const attentionMask = new BigInt64Array(length).fill(1n);
  const tokenTypeIds = new BigInt64Array(length);
  const output = await session.run({
    input_ids: new ort.Tensor('int64', inputIds, [1, length]),
    attention_mask: new ort.Tensor('int64', attentionMask, [1, length]),
    token_type_ids: new ort.Tensor('int64', tokenTypeIds, [1, length]),
  });
  const hidden = output.last_hidden_state;
  if (!hidden) throw new Error('the model returned no last_hidden_state');
  const dimensions = hidden.dims[2] ?? 0;
  // CLS pooling: the first position's hidden state, then L2-normalised.
  const vector = Float32Array.from((hidden.data as Float32Array).subarray(0, dimensions));
  let norm = 0;
  for (const value of vector) norm += value * value;
  norm = Math.sqrt(norm);
  if (!(norm > 0) || !Number.isFinite(norm)) throw new Error(`the model returned a vector of norm ${norm}`);
  for (let index = 0; index < vector.length; index++) vector[index]! /= norm;
  for (const tensor of Object.values(output)) tensor.dispose();
  return { vector, tokens: length };
}
