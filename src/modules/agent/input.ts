import { badRequest } from '../../errors.js';
import { isUuid } from '../../ids.js';
import { characterCount, hasVisibleCharacter, textProblem } from '../../input-limits.js';
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

/** The request of a run, checked: the rules of POST /agent/stream's body (400 when one is broken). */
export function checkInput(input: AgentStreamInput) {
  if (typeof input.message !== 'string') throw badRequest('message', 'is required');
  const problem = textProblem(input.message);
  if (problem) throw badRequest('message', problem);
  if (input.message.trim().length === 0) throw badRequest('message', 'must not be empty');
  if (!hasVisibleCharacter(input.message)) throw badRequest('message', 'must hold a question (it has only invisible characters)');
  if (characterCount(input.message) > agentLimits.maxMessageCharacters) {
    throw badRequest('message', `must be at most ${agentLimits.maxMessageCharacters} characters`);
  }
  if (!Array.isArray(input.workspaceIds) || input.workspaceIds.length === 0) throw badRequest('workspaceIds', 'must name at least one workspace');
  if (new Set(input.workspaceIds.map((id) => String(id).toLowerCase())).size > agentLimits.maxWorkspaces) {
    throw badRequest('workspaceIds', `must name at most ${agentLimits.maxWorkspaces} workspaces`);
  }
  input.workspaceIds.forEach((id, position) => {
    if (typeof id !== 'string' || !isUuid(id)) throw badRequest(`workspaceIds[${position}]`, 'must be a workspace id (a UUID)');
  });
  if (input.sessionId === '') throw badRequest('sessionId', 'must not be empty (leave it out to start a new session)');
  const mode = input.mode ?? 'fast';
  if (mode !== 'fast' && mode !== 'deep') throw badRequest('mode', 'must be fast or deep');
  const limits = input.limits ?? {};
  const bounded = (name: keyof DeepLimits, budget: { default: number; max: number }) => {
    const value = limits[name];
    if (value === undefined || value === null) return budget.default;
    if (!Number.isInteger(value) || value < 1 || value > budget.max) throw badRequest(`limits.${name}`, `must be an integer from 1 to ${budget.max}`);
    return value;
  };
  const budget = {
    hops: bounded('maxHops', agentLimits.deep.hops),
    searches: bounded('maxSearches', agentLimits.deep.searches),
    seconds: bounded('maxSeconds', agentLimits.deep.seconds),
  };
  return { message: input.message.trim(), workspaceIds: [...new Set(input.workspaceIds.map((id) => id.toLowerCase()))], mode, budget };
}

export type RunRequest = ReturnType<typeof checkInput>;
