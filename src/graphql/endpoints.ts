/** Where GraphQL is served: Yoga (and its SSE for subscriptions), and graphql-sse. */
export const graphqlEndpoint = '/graphql';
export const graphqlStreamEndpoint = '/graphql/stream';
