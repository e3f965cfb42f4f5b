import { usePersistedOperations } from '@graphql-yoga/plugin-persisted-operations';
import { GraphQLError, type DocumentNode, type ExecutionResult } from 'graphql';
import { createGraphQLError, createYoga, type Plugin, type YogaServerInstance } from 'graphql-yoga';
import type { Config } from '../config.js';
import { AppError, authenticationRequired, badRequest, errorCatalogue, isErrorCode, type ErrorCode } from '../errors.js';
import { storeUnavailable } from '../db/store-errors.js';
import { invalidCursor } from '../ids.js';
import type { Logger } from '../logger.js';
import { graphqlEndpoint, graphqlStreamEndpoint } from './endpoints.js';
import { createContext, type AppServices, type Context, type GraphQLServerContext } from './context.js';
import { useDocumentLimits } from './document-limits.js';
import { useOperationGate } from './operation-gate.js';
import { requestError } from './request-error.js';
import { useResponseLimit } from './response-limit.js';
import { graphqlSseStreams } from './stream-tokens.js';
import { schema } from './schema.js';


export type Yoga = YogaServerInstance<GraphQLServerContext, Context>;

/**
 * The largest GraphQL multipart upload: as many files of the largest size as one upload takes,
 * and a JSON body's worth for the `operations` and `map` parts and the part headers.
 */
export const graphqlUploadLimit = (config: Pick<Config, 'uploads' | 'maxJsonBytes'>) =>
  config.uploads.maxFiles * config.uploads.maxFileBytes + config.maxJsonBytes;

/** `persistedOperations`: documents that may be sent by hash (the REST layer's). */
export function createGraphQLServer(app: AppServices, log: Logger, persistedOperations: ReadonlyMap<string, DocumentNode>): Yoga {
  const sseStreams = graphqlSseStreams(app.config.graphqlSse, app.streamRouting);
  const yoga = createYoga<GraphQLServerContext, Context>({
    schema,
    graphqlEndpoint,
    landingPage: false,
    // Served by src/http/graphiql.ts from local assets, under this origin's policy.
    graphiql: false,
    logging: false,
    // Bodies are held to their limits before Yoga reads them (http.ts).
    maxRequestBodySize: false,
    context: async ({ request, ...serverContext }) => {
      try {
        return await createContext(app, request, serverContext as GraphQLServerContext);
      } catch (error) {
        if (error instanceof AppError) throw requestError(error);
        throw error;
      }
    },
    maskedErrors: { maskError: (error) => toPublicError(error, log) },
    plugins: [
      useQueryParameterErrors(),
      ...useDocumentLimits(),
      usePersistedOperations({
        allowArbitraryOperations: true,
        getPersistedOperation: (hash) => persistedOperations.get(hash) ?? null,
      }),
      useOperationGate(),
      // Before the plugins that take results away (graphql-sse's streams, the REST hand-over).
      useResponseLimit(app.config.maxGraphqlResponseBytes),
      ...sseStreams.plugins,
      useSubscriptionRefusalsWithData(),
      usePublicValidationErrors(),
      useRestResultHandOver(),
    ],
  });
  sseStreams.attach((request, context) => yoga.fetch(request, context));
  validatePersistedOperations(yoga, persistedOperations);
  return yoga;
}

/**
 * Validates every persisted operation once, at start, through Yoga's own validation (its plugins'
 * rules included), which caches the result by document: an operation that does not validate
 * stops the start, and a request's first run of one does not pay for validating it (the search's
 * took 24 ms in the first request after a start, which then shares the thread with the load of
 * the keyword postings: docs/benchmarks.md).
 */
function validatePersistedOperations(yoga: Yoga, persistedOperations: ReadonlyMap<string, DocumentNode>) {
  const { validate, schema: envelopedSchema } = yoga.getEnveloped({} as Parameters<Yoga['getEnveloped']>[0]);
  for (const [hash, document] of persistedOperations) {
    const errors = validate(envelopedSchema, document);
    if (errors.length === 0) continue;
    throw new Error(`the persisted operation ${hash} does not validate: ${errors.map((error: GraphQLError) => error.message).join('; ')}`);
  }
}

/**
 * A subscription refused before its first event (graphql-js `subscribe` returns `{errors}`)
 * gets `data: null`: graphql-sse tells a result from operation arguments by its `data` key, and
 * without one answered "Unable to detect operation AST" instead of the refusal, leaving a
 * single-connection client waiting for events that never came.
 */
function useSubscriptionRefusalsWithData(): Plugin {
  return {
    onSubscribe() {
      return {
        onSubscribeResult({ result, setResult }) {
          if (!(Symbol.asyncIterator in result) && !('data' in result)) setResult({ ...result, data: null });
        },
      };
    },
  };
}

/**
 * GET carries `variables` and `extensions` as JSON in the query string; Yoga's parser lets
 * JSON.parse throw, which would surface as an internal error. Say which parameter is wrong.
 */
function useQueryParameterErrors(): Plugin {
  return {
    onRequestParse({ request, url }) {
      if (request.method !== 'GET') return;
      for (const name of ['variables', 'extensions']) {
        const value = url.searchParams.get(name);
        if (!value) continue;
        try {
          JSON.parse(value);
        } catch {
          throw requestError(badRequest(name, 'must be a JSON object'));
        }
      }
    },
  };
}

/**
 * A REST request's result goes to the REST layer as the object it is (errors already masked),
 * not as JSON that the REST layer would parse again to write its own body. Last among the
 * plugins, so that it replaces the result processor the others chose. A subscription's events are
 * handed over as the iterator they are to a streaming route, which writes them itself.
 */
function useRestResultHandOver(): Plugin<Record<string, unknown>, GraphQLServerContext> {
  return {
    onResultProcess({ result, serverContext, setResultProcessor }) {
      const handOver = serverContext.restResult;
      if (!handOver || Array.isArray(result)) return;
      if (Symbol.asyncIterator in result) {
        if (!handOver.wantsStream) return;
        setResultProcessor((processed) => {
          handOver.stream = processed as AsyncIterableIterator<ExecutionResult>;
          return new Response(null, { status: 204 });
        }, 'text/event-stream');
        return;
      }
      setResultProcessor((processed, fetchAPI) => {
        handOver.result = processed as ExecutionResult;
        return new fetchAPI.Response(null, { status: 204 });
      }, 'application/json');
    },
  };
}

/** Validation errors are returned, not thrown, so they miss the masking; give them the same shape. */
function usePublicValidationErrors(): Plugin {
  return {
    onValidate() {
      return ({ valid, result, setResult }) => {
        if (!valid) setResult(result.map((error) => publicGraphQLError(error)));
      };
    },
  };
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
    const { extensions } = appError.toGraphQLError();
    return publicGraphQLError(new GraphQLError(appError.message, { nodes: graphQLError?.nodes, path: graphQLError?.path, extensions }));
  }
  if (graphQLError && (!original || isGraphQLError(original))) return publicGraphQLError(graphQLError);
  log.error('unexpected error while executing GraphQL', original);
  return publicGraphQLError(new GraphQLError('internal error', { path: graphQLError?.path, extensions: { code: 'internal_error' } }));
}

/**
 * An error with nothing but the public extensions: `code` from the catalogue (Yoga's own codes
 * are replaced by the one of the HTTP status they carry), `field`, `retryAfterSeconds`.
 * Libraries put internals in extensions (Yoga's `originalError` for a body that is not JSON);
 * they are dropped. An error without a path refuses the whole request (syntax, validation,
 * variables, Yoga's request checks): it answers with its catalogue status whatever the Accept
 * header (`spec: false` keeps Yoga from answering 200 to `application/json`). An error with a
 * path happened during execution, beside data: 200. Made with Yoga's copy of graphql, so that
 * Yoga recognises it and leaves `http` out of the body (see request-error.ts).
 */
function publicGraphQLError(error: GraphQLError): GraphQLError {
  const extensions = error.extensions as {
    code?: unknown;
    field?: unknown;
    retryAfterSeconds?: unknown;
    http?: { status?: number; headers?: Record<string, string> };
  };
  const code: ErrorCode = isErrorCode(extensions.code) ? extensions.code : codeForStatus(extensions.http?.status);
  const headers = extensions.http?.headers;
  return createGraphQLError(error.message, {
    nodes: error.nodes,
    path: error.path,
    extensions: {
      code,
      ...(typeof extensions.field === 'string' && { field: extensions.field }),
      ...(typeof extensions.retryAfterSeconds === 'number' && { retryAfterSeconds: extensions.retryAfterSeconds }),
      ...(!error.path && { http: { status: errorCatalogue[code], spec: false, ...(headers && { headers }) } }),
    },
  });
}

function codeForStatus(status: number | undefined): ErrorCode {
  const code = Object.entries(errorCatalogue).find(([, catalogued]) => catalogued === status)?.[0];
  return isErrorCode(code) && status! < 500 ? code : 'bad_request';
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
  return storeUnavailable(error);
}

// graphql ships CommonJS and ESM builds and both can be loaded in one process, so `instanceof`
// cannot be trusted across packages; Yoga tells GraphQL errors apart by name too.
function isGraphQLError(error: unknown): error is GraphQLError {
  return error instanceof Error && error.name === 'GraphQLError';
}
