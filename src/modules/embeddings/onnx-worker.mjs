// Entry point of the ONNX embedder's worker threads when the TypeScript sources run directly
// (vitest, tsx): a worker thread does not inherit the loader registered in the main thread. The
// compiled service (dist/) loads onnx-worker.js instead; see onnx-embedder.ts.
import { register } from 'tsx/esm/api';

register();
const { default: embedOne } = await import('./onnx-worker.ts');

export default embedOne;
