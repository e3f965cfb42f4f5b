import { z } from 'zod';
import { validationErrorFromIssues } from '../../graphql/validation-error.js';
import { countFromOneTo, hasVisibleCharacter, refusedInText, textInput, visibleCharacterPattern, withMaxCharacters } from '../../input-limits.js';
import type { AgentMode } from './answer-model.js';

export const agentLimits = {
  maxMessageCharacters: 50_000,
  maxWorkspaces: 100,
  /** Passages a fast answer reads, and each deep search. */
  fastPassages: 6,
  deepPassagesPerSearch: 4,
  /** Turns of the session read to rewrite a follow-up. */
  historyTurns: 10,
  /** Deep research's budget when the request sets none, and the most a request may set. */
  deep: {
    hops: { default: 4, max: 6 },
    searches: { default: 8, max: 20 },
    seconds: { default: 60, max: 300 },
  },
} as const;

export type DeepLimits = { maxHops?: number | null; maxSearches?: number | null; maxSeconds?: number | null };

export type AgentStreamInput = {
  message: string;
  workspaceIds: readonly string[];
  sessionId?: string | null;
  mode?: AgentMode | null;
  limits?: DeepLimits | null;
  /** A disconnect does not cancel the run: it goes on for the grace period, and the client may resume (docs/agent.md). */
  resumable?: boolean | null;
};

const workspaceId = z
  .string()
  .regex(/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/, 'must be a workspace id (a UUID)');
const distinctIds = (ids: readonly string[]) => new Set(ids.map((id) => id.toLowerCase())).size;

/**
 * The rules of a run's request, field by field: the GraphQL input's validators (types.ts, and
 * through them the OpenAPI description) and the run's own check (`checkInput`) are these.
 */
export const agentInputRules = {
  message: withMaxCharacters(
    textInput()
      .refine((message) => message.trim().length > 0, 'must not be empty')
      .refine(hasVisibleCharacter, 'must hold a question (it has only invisible characters)'),
    agentLimits.maxMessageCharacters,
  ).meta({ pattern: `^[^${refusedInText}]*${visibleCharacterPattern}[^${refusedInText}]*$` }),
  workspaceIds: z
    .array(workspaceId)
    .min(1, 'must name at least one workspace')
    .refine((ids) => distinctIds(ids) <= agentLimits.maxWorkspaces, `must name at most ${agentLimits.maxWorkspaces} workspaces`),
  sessionId: z.string().min(1, 'must not be empty (leave it out to start a new session)').nullish(),
  mode: z.enum(['fast', 'deep'], { error: 'must be fast or deep' }).nullish(),
  limits: {
    maxHops: countFromOneTo(agentLimits.deep.hops.max),
    maxSearches: countFromOneTo(agentLimits.deep.searches.max),
    maxSeconds: countFromOneTo(agentLimits.deep.seconds.max),
  },
};

const agentInputSchema = z.object({ ...agentInputRules, limits: z.object(agentInputRules.limits).nullish() });

/** The request of a run, checked by the same rules as the GraphQL input (400 naming the first field that breaks one), with its defaults. */
export function checkInput(input: AgentStreamInput) {
  const checked = agentInputSchema.safeParse(input);
  if (!checked.success) throw validationErrorFromIssues(checked.error.issues);
  const { message, workspaceIds, mode, limits } = checked.data;
  const budget = {
    hops: limits?.maxHops ?? agentLimits.deep.hops.default,
    searches: limits?.maxSearches ?? agentLimits.deep.searches.default,
    seconds: limits?.maxSeconds ?? agentLimits.deep.seconds.default,
  };
  return { message: message.trim(), workspaceIds: [...new Set(workspaceIds.map((id) => id.toLowerCase()))], mode: mode ?? 'fast', budget };
}

export type RunRequest = ReturnType<typeof checkInput>;
