import { complexityFromQuery } from '@pothos/plugin-complexity';
import type { Plugin } from 'graphql-yoga';
import {
  getDirectiveValues,
  getOperationAST,
  GraphQLIncludeDirective,
  GraphQLSkipDirective,
  Kind,
  type DocumentNode,
  type FieldNode,
  type FragmentSpreadNode,
  type GraphQLError,
  type GraphQLSchema,
  type InlineFragmentNode,
  type OperationDefinitionNode,
} from 'graphql';
import { AppError, authenticationRequired, missingScope } from '../errors.js';
import type { Viewer } from '../auth/authenticate.js';
import { unrestrictedOnly } from '../auth/policy.js';
import type { Context } from './context.js';
import { fieldRequirements, type RateLimitName } from './field-requirements.js';
import { graphqlLimits, limitExceeded } from './limits.js';
import { requestError } from './request-error.js';

type GateArgs = {
  schema: GraphQLSchema;
  document: DocumentNode;
  operationName?: string | null;
  variableValues?: Record<string, unknown> | null;
  contextValue: Context;
};

/**
 * Checks what the operation asks for before any variable is coerced or resolver runs, so every
 * transport answers in the contract's order: 401 (no credential), 403 (missing scope), 429
 * (rate limit), then 400: the request's own validation errors, then the operation's depth,
 * cost and connection sizes. 404s come later, from resolvers. Scope-auth still guards every
 * field during execution; this fixes the order and refuses the whole operation at once.
 */
export function useOperationGate(): Plugin<Context> {
  return {
    async onExecute({ args, setResultAndStopExecution }) {
      const error = await check(args as GateArgs);
      if (error) setResultAndStopExecution({ errors: [error] });
    },
    async onSubscribe({ args, setResultAndStopExecution }) {
      const error = await check(args as GateArgs);
      if (error) setResultAndStopExecution({ errors: [error] });
    },
  };
}

function requirementsOf(schema: GraphQLSchema, document: DocumentNode, operationName: string | null | undefined, variables: Record<string, unknown>) {
  const operation = getOperationAST(document, operationName);
  if (!operation) return null;
  const rootType = schema.getRootType(operation.operation);
  if (!rootType) return null;
  const fields = rootType.getFields();
  return { operation, requirements: rootFieldCalls(operation, document, variables).map((name) => fieldRequirements(fields[name])) };
}

/**
 * 401 when the operation's root fields need a credential and there is none, 403 when the
 * credential lacks a scope one of them needs or is a key restricted to workspaces asking for what
 * only an unrestricted credential may do; null when the viewer may run it. The REST layer
 * asks this before it reads an upload, so nobody without access can make the server take one in.
 */
export function accessError(schema: GraphQLSchema, document: DocumentNode, viewer: Viewer | null): AppError | null {
  const found = requirementsOf(schema, document, undefined, {});
  return found ? accessErrorOf(found.requirements, viewer) : null;
}

function accessErrorOf(requirements: ReturnType<typeof fieldRequirements>[], viewer: Viewer | null): AppError | null {
  const scopes = requirements.flatMap((requirement) => (requirement.scope ? [requirement.scope] : []));
  if (scopes.length > 0 && !viewer) return authenticationRequired();
  const missing = scopes.find((scope) => !viewer!.scopes.has(scope));
  if (missing) return missingScope(missing);
  for (const { unrestrictedOnly: action } of requirements) {
    const refusal = action ? unrestrictedOnly(viewer, action) : null;
    if (refusal) return refusal;
  }
  return null;
}

async function check(args: GateArgs): Promise<GraphQLError | null> {
  const found = requirementsOf(args.schema, args.document, args.operationName, args.variableValues ?? {});
  if (!found) return null;
  const { operation, requirements } = found;
  const { viewer } = args.contextValue;
  const denied = accessErrorOf(requirements, viewer);
  if (denied) return requestError(denied);
  // Refused before it starts: a subscription that ran first (the agent reserves credits) and
  // then found it could not be delivered would have done its work for nobody.
  if (operation.operation === 'subscription' && !args.contextValue.acceptsEventStream) {
    return requestError(new AppError('not_acceptable', 'a subscription answers as Server-Sent Events: send Accept: text/event-stream, or use /graphql/stream'));
  }

  const points = new Map<RateLimitName, number>();
  for (const { rateLimit } of requirements) if (rateLimit) points.set(rateLimit, (points.get(rateLimit) ?? 0) + 1);
  for (const [limit, count] of points) {
    try {
      await args.contextValue.rateLimits.consume(limit, viewer!.userId, count);
    } catch (error) {
      if (error instanceof AppError) return requestError(error);
      throw error;
    }
  }
  if (args.contextValue.restInputError) return requestError(args.contextValue.restInputError);
  return checkCost(args, operation);
}

/**
 * Depth and cost of the selected operation, with the request's variables applied, measured by
 * the Pothos complexity plugin before anything runs. The result depends on the variables, so it
 * cannot live in Yoga's validation, which is cached by document. `fieldCost` also refuses
 * connection sizes out of range while it is measured.
 */
function checkCost(args: GateArgs, operation: OperationDefinitionNode): GraphQLError | null {
  // complexityFromQuery measures a document's first operation: hand it the selected one.
  const document: DocumentNode = {
    kind: Kind.DOCUMENT,
    definitions: [operation, ...args.document.definitions.filter((definition) => definition.kind === Kind.FRAGMENT_DEFINITION)],
  };
  let measured: { depth: number; complexity: number };
  try {
    measured = complexityFromQuery(document, { schema: args.schema, ctx: args.contextValue, variables: args.variableValues ?? {} });
  } catch (error) {
    if (error instanceof AppError) return requestError(error);
    // Variables that do not coerce: execution refuses them, in GraphQL's words, before running anything.
    if (error instanceof Error && error.name === 'GraphQLError') return null;
    throw error;
  }
  if (measured.depth > graphqlLimits.maxDepth) return requestError(limitExceeded('depth', measured.depth, graphqlLimits.maxDepth));
  if (measured.complexity > graphqlLimits.maxCost) return requestError(limitExceeded('cost', measured.complexity, graphqlLimits.maxCost));
  return null;
}

/**
 * The root fields the operation will run, one entry per response key: every alias counts, a
 * field spread in through fragments counts, a field that `@skip`/`@include` leave out does not,
 * and selections that GraphQL merges into one (the same alias twice) count once.
 */
function rootFieldCalls(operation: OperationDefinitionNode, document: DocumentNode, variables: Record<string, unknown>): string[] {
  const calls = new Map<string, string>();
  const visited = new Set<string>();
  const included = (node: FieldNode | FragmentSpreadNode | InlineFragmentNode) => {
    try {
      if (getDirectiveValues(GraphQLSkipDirective, node, variables)?.if === true) return false;
      return getDirectiveValues(GraphQLIncludeDirective, node, variables)?.if !== false;
    } catch {
      return true; // a variable that does not coerce: execution refuses the operation anyway
    }
  };
  const collect = (selections: OperationDefinitionNode['selectionSet']['selections']) => {
    for (const selection of selections) {
      if (!included(selection)) continue;
      if (selection.kind === Kind.FIELD) {
        const key = selection.alias?.value ?? selection.name.value;
        if (!selection.name.value.startsWith('__') && !calls.has(key)) calls.set(key, selection.name.value);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        collect(selection.selectionSet.selections);
      } else if (!visited.has(selection.name.value)) {
        visited.add(selection.name.value);
        const fragment = document.definitions.find(
          (definition) => definition.kind === Kind.FRAGMENT_DEFINITION && definition.name.value === selection.name.value,
        );
        if (fragment?.kind === Kind.FRAGMENT_DEFINITION) collect(fragment.selectionSet.selections);
      }
    }
  };
  collect(operation.selectionSet.selections);
  return [...calls.values()];
}
