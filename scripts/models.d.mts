// Types of scripts/models.mjs for the TypeScript that imports it (src/cli/main.ts, the ONNX embedder).
export type ModelName = 'bge-small-en-v1.5-q' | 'bge-small-en-v1.5';

export type ModelFile = { entry: string; bytes: number; sha256: string };

export declare const manifest: {
  repository: string;
  models: Record<
    ModelName,
    {
      description: string;
      maven: { groupId: string; artifactId: string; version: string };
      jar: { bytes: number; sha256: string };
      files: Record<'model.onnx' | 'tokenizer.json', ModelFile>;
    }
  >;
};
export declare const modelNames: ModelName[];
export declare const defaultModel: ModelName;
export declare function defaultModelsDir(): string;
export declare class ProvisionError extends Error {}
export declare function modelPaths(dir: string, model: ModelName): { directory: string; onnx: string; tokenizer: string };
export declare function jarUrl(model: ModelName, repository?: string): string;
/** The problems found (missing files, wrong sizes or sha256); empty when the model is complete. */
export declare function verifyModel(dir: string, model: ModelName): Promise<string[]>;
export declare function provisionModel(options?: {
  dir?: string;
  model?: ModelName;
  repository?: string;
  /** Where progress lines go (stderr), or null for none. */
  progress?: NodeJS.WritableStream | null;
}): Promise<{ directory: string; downloaded: boolean }>;
