// Entry point of the ONNX embedder's worker threads when the TypeScript sources run directly
// (vitest, tsx): see src/thread-module.mjs. The compiled service (dist/) loads onnx-worker.js
// instead; see onnx-embedder.ts.
import { importThreadModule } from '../../thread-module.mjs';

const { default: embedOne } = await importThreadModule(new URL('./onnx-worker.ts', import.meta.url).href);

export default embedOne;
