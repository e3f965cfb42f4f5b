import { z } from 'zod';

/** A job that failed in company runs alone next time, so one bad document cannot fail others with it. */
const solo = z.boolean().optional();

/**
 * What each kind of job carries beyond its document and user. Written through these types, and
 * read back through these schemas when a job is claimed: a job queued by a version that wrote
 * something else fails with a reason instead of running on guesses.
 */
export const jobPayloads = {
  parse: z.object({
    chunkTokens: z.number().int().positive(),
    overlapTokens: z.number().int().nonnegative(),
    /** A failed document processed again: an index outside the store may hold its old chunks' entries. */
    reindex: z.boolean().optional(),
    solo,
  }),
  embed: z.object({ solo }),
  index_delete: z.union([z.object({ documentId: z.guid() }), z.object({ workspaceId: z.guid() })]),
};

export type JobKind = keyof typeof jobPayloads;

export const allJobKinds = Object.keys(jobPayloads) as readonly JobKind[];

export type JobPayload<Kind extends JobKind> = z.infer<(typeof jobPayloads)[Kind]>;

/** The payload as this version reads it, or why it cannot. */
export function readPayload<Kind extends JobKind>(kind: Kind, stored: unknown): { ok: true; payload: JobPayload<Kind> } | { ok: false; reason: string } {
  const result = (jobPayloads[kind] as z.ZodType).safeParse(stored);
  if (result.success) return { ok: true, payload: result.data as JobPayload<Kind> };
  return { ok: false, reason: `its payload is not one this version reads: ${z.prettifyError(result.error).replace(/\n/g, '; ')}` };
}
