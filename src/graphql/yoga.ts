import { useGraphQLSSE } from '@graphql-yoga/plugin-graphql-sse';
import { usePersistedOperations } from '@graphql-yoga/plugin-persisted-operations';
import { GraphQLError, type DocumentNode } from 'graphql';
import { createYoga, type YogaServerInstance } from 'graphql-yoga';
import { AppError, badRequest } from '../errors.js';
import { invalidCursor } from '../ids.js';
import type { Logger } from '../logger.js';
import { createContext, type AppServices, type Context, type RestServerContext } from './context.js';
import { useOperationGate } from './operation-gate.js';
import { schema } from './schema.js';

export const graphqlEndpoint = '/graphql';
export const graphqlStreamEndpoint = '/graphql/stream';

export type Yoga = YogaServerInstance<RestServerContext, Context>;

/** `persistedOperations`: documents that may be sent by hash (the REST layer's). */
export function createGraphQLServer(app: AppServices, log: Logger, persistedOperations: ReadonlyMap<string, DocumentNode>): Yoga {
  return createYoga<RestServerContext, Context>({
    schema,
    graphqlEndpoint,
    landingPage: false,
    graphiql: { title: 'Knowledge base GraphQL' },
    logging: false,
    context: async ({ request, ...serverContext }) => {
      try {
        return await createContext(app, request, serverContext as RestServerContext);
      } catch (error) {
        if (error instanceof AppError) {
          throw new GraphQLError(error.message, { extensions: { code: error.code, http: { status: error.status } } });
        }
        throw error;
      }
    },
    maskedErrors: { maskError: (error) => toPublicError(error, log) },
    plugins: [
      usePersistedOperations({
        allowArbitraryOperations: true,
        getPersistedOperation: (hash) => persistedOperations.get(hash) ?? null,
      }),
      useOperationGate(),
      useGraphQLSSE({ endpoint: graphqlStreamEndpoint }),
    ],
  });
}

/**
 * Every error leaves with a code from the catalogue in `extensions.code`. Errors of the request
 * itself (syntax, validation, variable coercion) are `bad_request`; anything unexpected is
 * logged and reported as `internal_error` without its details.
 */
function toPublicError(error: unknown, log: Logger): Error {
  const graphQLError = isGraphQLError(error) ? error : undefined;
  const original = graphQLError ? graphQLError.originalError : error;
  const appError = original instanceof AppError ? original : knownAppError(original);
  if (appError) {
    const publicError = appError.toGraphQLError();
    return new GraphQLError(publicError.message, {
      nodes: graphQLError?.nodes,
      path: graphQLError?.path,
      extensions: publicError.extensions,
    });
  }
  if (graphQLError && (!original || isGraphQLError(original))) {
    const code = graphQLError.extensions.code;
    if (typeof code === 'string' && code === code.toLowerCase()) return graphQLError;
    return new GraphQLError(graphQLError.message, {
      nodes: graphQLError.nodes,
      path: graphQLError.path,
      extensions: { ...graphQLError.extensions, code: 'bad_request' },
    });
  }
  log.error('unexpected error while executing GraphQL', original);
  return new GraphQLError('internal error', { path: graphQLError?.path, extensions: { code: 'internal_error' } });
}

/** Errors from libraries that are the request's fault, in the catalogue's terms. */
function knownAppError(error: unknown): AppError | undefined {
  if (!(error instanceof Error)) return undefined;
  if (error.name === 'PothosValidationError') {
    return /cursor/i.test(error.message) ? invalidCursor() : new AppError('bad_request', error.message);
  }
  // PostgreSQL text cannot hold U+0000 (SQLSTATE 22021); the value came from the request.
  if (error.name === 'PrismaClientKnownRequestError' && error.message.includes('22021')) {
    return badRequest('input', 'text must not contain NUL (\\u0000) characters');
  }
  return undefined;
}

// graphql ships CommonJS and ESM builds and both can be loaded in one process, so `instanceof`
// cannot be trusted across packages; Yoga tells GraphQL errors apart by name too.
function isGraphQLError(error: unknown): error is GraphQLError {
  return error instanceof Error && error.name === 'GraphQLError';
}
