import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../errors.js';
import { agentLimits, checkInput, type AgentStreamInput } from './input.js';

const refusal = (input: Partial<AgentStreamInput>) => {
  try {
    checkInput({ message: 'What is a wiki?', workspaceIds: [randomUUID()], ...input } as AgentStreamInput);
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return (error as AppError).message;
  }
  return null;
};

describe("a run's request, checked by the rules of the GraphQL input", () => {
  it('names the first field that breaks a rule, in the words GraphQL uses', () => {
    expect(refusal({ message: '   ' })).toBe('message: must not be empty');
    expect(refusal({ message: '\u200b' })).toBe('message: must hold a question (it has only invisible characters)');
    expect(refusal({ message: 'x'.repeat(agentLimits.maxMessageCharacters + 1) })).toBe(`message: must be at most ${agentLimits.maxMessageCharacters} characters`);
    expect(refusal({ message: 'a\u0000b' })).toBe('message: must not contain NUL (\\u0000) characters');
    expect(refusal({ workspaceIds: [] })).toBe('workspaceIds: must name at least one workspace');
    expect(refusal({ workspaceIds: [randomUUID(), 'not-an-id'] })).toBe('workspaceIds[1]: must be a workspace id (a UUID)');
    expect(refusal({ workspaceIds: Array.from({ length: agentLimits.maxWorkspaces + 1 }, () => randomUUID()) })).toBe('workspaceIds: must name at most 100 workspaces');
    expect(refusal({ sessionId: '' })).toBe('sessionId: must not be empty (leave it out to start a new session)');
    expect(refusal({ mode: 'slow' as never })).toBe('mode: must be fast or deep');
    expect(refusal({ limits: { maxHops: 0 } })).toBe('limits.maxHops: must be an integer from 1 to 6');
    expect(refusal({ limits: { maxSeconds: 2.5 } })).toMatch(/^limits\.maxSeconds: /);
  });

  it('counts a workspace named twice once, and fills in the defaults', () => {
    const id = randomUUID();
    const others = Array.from({ length: agentLimits.maxWorkspaces - 1 }, () => randomUUID());
    const checked = checkInput({ message: '  Who invented the wiki?  ', workspaceIds: [...others, id, id.toUpperCase()] });
    expect(checked.workspaceIds).toEqual([...others, id]);
    expect(checked).toMatchObject({ message: 'Who invented the wiki?', mode: 'fast', budget: { hops: 4, searches: 8, seconds: 60 } });
    expect(checkInput({ message: 'Why?', workspaceIds: [id], mode: 'deep', limits: { maxHops: 2 } })).toMatchObject({ mode: 'deep', budget: { hops: 2, searches: 8, seconds: 60 } });
  });
});
