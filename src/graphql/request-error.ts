import type { GraphQLError } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';
import type { AppError } from '../errors.js';

/**
 * The GraphQL shape of an error that refuses the whole request before execution: besides the
 * public extensions it tells Yoga the HTTP status (and `Retry-After`). Yoga answers with them
 * and leaves `http` out of the body, for errors made by its own copy of graphql (hence
 * `createGraphQLError`: the test runner can load a second copy for this module).
 */
export function requestError(error: AppError): GraphQLError {
  const { extensions } = error.toGraphQLError();
  const retryAfter = error.details.retryAfterSeconds;
  return createGraphQLError(error.message, {
    extensions: {
      ...extensions,
      http: { status: error.status, spec: false, ...(retryAfter !== undefined && { headers: { 'retry-after': String(retryAfter) } }) },
    },
  });
}
