import type { Plugin } from 'graphql-yoga';
import { getOperationAST, Kind, type DocumentNode, type GraphQLSchema, type SelectionSetNode } from 'graphql';
import { AppError, authenticationRequired, missingScope } from '../errors.js';
import type { Context } from './context.js';
import { fieldRequirements } from './field-requirements.js';

/**
 * Checks what the operation's root fields require before any variable is coerced or resolver
 * runs, so every transport answers in the contract's order: 401 (no credential), 403 (missing
 * scope), 429 (rate limit), then the request's own validation errors, then 404 from resolvers.
 * Scope-auth still guards every field during execution; this only fixes the order.
 */
export function useOperationGate(): Plugin<Context> {
  const check = async (args: { schema: GraphQLSchema; document: DocumentNode; operationName?: string | null; contextValue: Context }) => {
    const operation = getOperationAST(args.document, args.operationName);
    if (!operation) return null;
    const rootType = args.schema.getRootType(operation.operation);
    if (!rootType) return null;
    const fields = rootType.getFields();
    const requirements = rootFieldNames(operation.selectionSet, args.document).map((name) => fieldRequirements(fields[name]));
    const { viewer } = args.contextValue;
    const scopes = requirements.flatMap((requirement) => (requirement.scope ? [requirement.scope] : []));
    if (scopes.length > 0 && !viewer) {
      return authenticationRequired();
    }
    const missing = scopes.find((scope) => !viewer!.scopes.has(scope));
    if (missing) return missingScope(missing);
    const limits = new Set(requirements.flatMap((requirement) => (requirement.rateLimit ? [requirement.rateLimit] : [])));
    for (const limit of limits) {
      try {
        await args.contextValue.rateLimits.consume(limit, viewer!.userId);
      } catch (error) {
        if (error instanceof AppError) return error;
        throw error;
      }
    }
    return args.contextValue.restInputError ?? null;
  };
  return {
    async onExecute({ args, setResultAndStopExecution }) {
      const error = await check(args as never);
      if (error) setResultAndStopExecution({ errors: [error.toGraphQLError()] });
    },
    async onSubscribe({ args, setResultAndStopExecution }) {
      const error = await check(args as never);
      if (error) setResultAndStopExecution({ errors: [error.toGraphQLError()] });
    },
  };
}

function rootFieldNames(selectionSet: SelectionSetNode, document: DocumentNode, seen = new Set<string>()): string[] {
  const names: string[] = [];
  for (const selection of selectionSet.selections) {
    if (selection.kind === Kind.FIELD) {
      if (!selection.name.value.startsWith('__')) names.push(selection.name.value);
    } else if (selection.kind === Kind.INLINE_FRAGMENT) {
      names.push(...rootFieldNames(selection.selectionSet, document, seen));
    } else if (!seen.has(selection.name.value)) {
      seen.add(selection.name.value);
      const fragment = document.definitions.find(
        (definition) => definition.kind === Kind.FRAGMENT_DEFINITION && definition.name.value === selection.name.value,
      );
      if (fragment?.kind === Kind.FRAGMENT_DEFINITION) names.push(...rootFieldNames(fragment.selectionSet, document, seen));
    }
  }
  return names;
}
