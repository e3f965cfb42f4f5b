import type { DocumentNode } from 'graphql';
import { z } from 'zod';
import type { RestCalls } from './rest-calls.js';

/** What a tool's run is given besides its arguments. */
export type ToolContext = {
  rest: RestCalls;
  /** Reports progress to a client that asked for it (`_meta.progressToken`); a no-op otherwise. */
  progress(message: string): Promise<void>;
};

export type Tool = {
  name: string;
  title: string;
  /** Written for a model choosing a tool: when to use it and what it costs (test/mcp.test.ts keeps them short). */
  description: string;
  input: z.ZodObject;
  output: z.ZodObject;
  /** The REST operations the tool runs: a credential that may not run them does not see the tool. */
  operations: DocumentNode[];
  annotations: { readOnlyHint: boolean; openWorldHint: false; destructiveHint?: boolean; idempotentHint?: boolean };
  run(input: never, context: ToolContext): Promise<Record<string, unknown>>;
};

/** Most characters of document text one call returns; the rest is a call away (`next_chunk`). */
export const maxTextCharacters = 40_000;
/** Most characters of passages a search or a context returns: the first items that fit (at least one). */
export const maxPassageCharacters = 100_000;

/** The first items whose content fits `maxPassageCharacters`, and whether any were left out. */
export function fitting<T extends { content: string }>(items: readonly T[]): { kept: T[]; truncated: boolean } {
  let characters = 0;
  const kept: T[] = [];
  for (const item of items) {
    characters += item.content.length;
    if (kept.length > 0 && characters > maxPassageCharacters) return { kept, truncated: true };
    kept.push(item);
  }
  return { kept, truncated: false };
}

export const id = z.string().min(1).max(100);
export const limit = (defaultValue: number, max: number) => z.number().int().min(1).max(max).default(defaultValue);
export const json = z.record(z.string(), z.unknown());

export const define = <Input extends z.ZodObject>(tool: Omit<Tool, 'input' | 'run'> & { input: Input; run(input: z.infer<Input>, context: ToolContext): Promise<Record<string, unknown>> }) =>
  tool as unknown as Tool;
