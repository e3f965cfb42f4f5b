import { maxAliasesPlugin } from '@escape.tech/graphql-armor-max-aliases';
import { maxTokensPlugin } from '@escape.tech/graphql-armor-max-tokens';
import type { Plugin } from 'graphql-yoga';
import { graphqlLimits, limitExceeded } from './limits.js';
import { requestError } from './request-error.js';

/**
 * The limits that depend on the document alone, from GraphQL Armor: tokens while the document
 * is parsed (so an oversized one is never built), aliases with GraphQL's validation. Both are
 * cached with the document by Yoga. Armor's own errors ("Syntax Error: ...") are replaced by
 * the catalogue's 400 naming the limit.
 */
export function useDocumentLimits(): Plugin[] {
  return [
    maxTokensPlugin({
      n: graphqlLimits.maxTokens,
      propagateOnRejection: false,
      onReject: [
        () => {
          throw requestError(limitExceeded('token count', undefined, graphqlLimits.maxTokens));
        },
      ],
    }) as Plugin,
    maxAliasesPlugin({
      n: graphqlLimits.maxAliases,
      propagateOnRejection: false,
      onReject: [
        (context, error) => {
          const found = /found (\d+)/.exec(error.message)?.[1];
          context?.reportError(
            requestError(limitExceeded('alias count', found === undefined ? undefined : Number(found), graphqlLimits.maxAliases)),
          );
        },
      ],
    }) as Plugin,
  ];
}
