// The caller's own profile and credits: GET and PATCH /v1/user/me, GET /v1/user/me/credits.
import type { UpdateMeInput } from '../../generated/graphql/graphql.js';
import { graphql } from '../../generated/graphql/gql.js';
import { jsonBody, route, type Route } from '../route.js';
import * as respond from '../response-kinds.js';

export const RestGetMe = graphql(`
  query RestGetMe {
    result: me { id email name phone creditsBalance created_at: createdAt }
  }
`);

export const RestUpdateMe = graphql(`
  mutation RestUpdateMe($input: UpdateMeInput!) {
    result: updateMe(input: $input) {
      __typename
      ... on AppError { code message }
      ... on User { id email name phone creditsBalance created_at: createdAt }
    }
  }
`);

export const RestGetCredits = graphql(`
  query RestGetCredits {
    result: me {
      credits {
        balance
        subscription { plan status current_period_end: currentPeriodEnd }
        totals { granted used }
        recent { id amount reason job_id: jobId created_at: createdAt }
      }
    }
  }
`);

export const userRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/v1/user/me',
    tag: 'User',
    summary: "The caller's profile and credit balance.",
    operation: RestGetMe,
    response: respond.json(200),
  }),
  route({
    method: 'PATCH',
    path: '/v1/user/me',
    tag: 'User',
    summary: "Changes the caller's phone number (null removes it).",
    operation: RestUpdateMe,
    raises: ['conflict'],
    body: jsonBody('UpdateMeInput', { phone: 'phone' }),
    variables: ({ body }) => ({ input: body as UpdateMeInput }),
    response: respond.json(200),
  }),
  route({
    method: 'GET',
    path: '/v1/user/me/credits',
    tag: 'User',
    summary: 'The credit balance, subscription, totals and the most recent ledger entries.',
    operation: RestGetCredits,
    response: respond.field('credits'),
  }),
];
