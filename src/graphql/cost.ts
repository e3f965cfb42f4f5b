import type { FieldComplexityValue } from '@pothos/plugin-complexity';
import type { GraphQLField, GraphQLNamedType, GraphQLOutputType } from 'graphql';
import { badRequest } from '../errors.js';
import { graphqlLimits } from './limits.js';

/**
 * How many items a list field that is not a connection is taken to hold; the cost of its
 * selection is multiplied by this. Where the list has a bound it is the bound
 * (`DocumentPreview.chunks` follows `chunks`, at most 1,000; `ChunkContext.chunks` at most
 * 100 + 1 + 100). The others have no bound but what is stored, so a typical size is taken;
 * their items hold no further lists or connections, so a long one cannot multiply anything.
 */
export const listSizes: Record<string, number> = {
  // An agent event: a reasoning event holds one step; a step what a hop found (at most 4
  // searches of 4 passages); sources at most the 80 passages deep research may gather.
  'AgentReasoning.steps': 1,
  'ReasoningStep.found': 16,
  'AgentSources.sources': 80,
  'AgentSource.passages': 10,
  'ChatSession.messages': 100,
  'ChunkContext.chunks': 201,
  'CreditSummary.recent': 20,
  'DocumentPreview.chunks': 1000,
  'GrepChunk.matches': 10,
  'GrepResult.chunks': 100,
  'WorkspaceScan.documents': 1000,
};
/** A list not in `listSizes` (lists of scalars have no selection to multiply). */
export const defaultListSize = 100;

/**
 * The cost model, given to the Pothos complexity plugin for every field: each field costs 1,
 * and the cost of a list's or connection's selection is multiplied by the number of items it
 * may return. For a connection that is its `first` (or `last`; without either the default page
 * of 100), for its `edges` 1 (the connection counted them already), for another list of objects
 * its entry in `listSizes`. The plugin adds this up over the operation with the request's
 * variables applied, before anything runs (see the operation gate).
 *
 * Connection arguments are checked here too, since this is where every selected field's
 * arguments are known before execution: `first` or `last` below 0 or above the maximum is a 400
 * naming the argument (Pothos itself would clamp silently, or fail one field during execution).
 */
export function fieldCost<Context>(args: Record<string, unknown>, _context: Context, field: GraphQLField<unknown, Context>): FieldComplexityValue {
  if (isConnection(field)) {
    const sizes = (['first', 'last'] as const).flatMap((name) => {
      const value = args[name];
      if (value === null || value === undefined) return [];
      if (typeof value !== 'number' || value < 0) throw badRequest(name, 'must be at least 0');
      if (value > graphqlLimits.maxConnectionSize) throw badRequest(name, `must be at most ${graphqlLimits.maxConnectionSize}`);
      return [value];
    });
    return { field: 1, multiplier: sizes.length > 0 ? Math.min(...sizes) : graphqlLimits.defaultConnectionSize };
  }
  if (String(field.type).startsWith('[')) {
    if (field.name === 'edges' && hasFields(namedType(field.type), 'node', 'cursor')) return { field: 1, multiplier: 1 };
    const { parentType } = (field.extensions.pothosConfig ?? {}) as { parentType?: string };
    return { field: 1, multiplier: listSizes[`${parentType}.${field.name}`] ?? defaultListSize };
  }
  return 1;
}

// The schema's types are looked at by shape, not with graphql's predicates: under the test
// runner this module and Pothos can load two copies of graphql, whose `instanceof` checks fail.
function isConnection(field: GraphQLField<unknown, never>): boolean {
  return hasFields(namedType(field.type), 'edges', 'pageInfo') && field.args.some((arg) => arg.name === 'first');
}

function namedType(type: GraphQLOutputType): GraphQLNamedType {
  let named = type;
  while ('ofType' in named) named = named.ofType;
  return named;
}

function hasFields(type: GraphQLNamedType, ...names: string[]): boolean {
  if (!('getFields' in type)) return false;
  const fields = type.getFields();
  return names.every((name) => name in fields);
}
