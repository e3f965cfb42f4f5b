import { describe, expect, it } from 'vitest';
import { AppError } from '../../errors.js';
import { checkSearchInput, searchLimits } from './input.js';

const refusal = (input: { query?: string; topK?: number | null }) => {
  try {
    checkSearchInput({ query: 'reactor coolant', ...input });
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return (error as AppError).message;
  }
  return null;
};

describe("a search's query and result count, checked by the rules of the GraphQL input", () => {
  it('names the field that breaks a rule, in the words GraphQL uses (REST writes topK as top_k)', () => {
    expect(refusal({ query: '  \n ' })).toBe('query: must not be empty');
    expect(refusal({ query: 'x'.repeat(searchLimits.maxQueryCharacters + 1) })).toBe(`query: must be at most ${searchLimits.maxQueryCharacters} characters`);
    expect(refusal({ query: 'a\u0000b' })).toBe('query: must not contain NUL (\\u0000) characters');
    expect(refusal({ topK: 0 })).toBe('topK: must be an integer from 1 to 100');
    expect(refusal({ topK: 101 })).toBe('topK: must be an integer from 1 to 100');
    expect(refusal({ topK: 2.5 })).toBe('topK: must be an integer from 1 to 100');
  });

  it('fills in the default count', () => {
    expect(checkSearchInput({ query: 'reactor' })).toEqual({ query: 'reactor', topK: searchLimits.defaultTopK });
    expect(checkSearchInput({ query: 'reactor', topK: null })).toEqual({ query: 'reactor', topK: searchLimits.defaultTopK });
    expect(checkSearchInput({ query: 'reactor', topK: 100 })).toEqual({ query: 'reactor', topK: 100 });
  });
});
