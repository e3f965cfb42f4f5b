import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { formatPrismaCursor } from '@pothos/plugin-prisma';
import type { z } from 'zod';
import type { ErrorCode } from '../errors.js';
import type { ResponseKind } from './response-kinds.js';

// What an endpoint is: its route entry (routes/<tag>.ts, beside the operation it runs) is the
// only place an endpoint is declared; the router, the persisted operations Yoga accepts, the
// OpenAPI description and /docs are derived from the list of routes (routes.ts).

export type RestRequest<Query = Record<string, unknown>, Body = unknown, Headers = Record<string, unknown>> = {
  params: Record<string, string>;
  /** The query parameters as the route's `query` shape parsed them. */
  query: Query;
  /** The request headers the route's `headers` shape names, as it parsed them (by the names it gives). */
  headers: Headers;
  /** A JSON body as the route's `body` mapped it onto the GraphQL input, or the upload. */
  body: Body;
};

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** The groups of /docs and of the OpenAPI description. */
export type RouteTag = 'User' | 'API keys' | 'Workspaces' | 'Documents' | 'Chat' | 'Search' | 'Agent';

/**
 * A JSON body: its REST fields and the GraphQL input type they fill. A GraphQL name ending in
 * `[]` is a list. `ids` name the fields that hold ids (strings only). The OpenAPI description
 * of the body is generated from the same declaration and the input type's validators.
 */
export type JsonBody = {
  kind: 'json';
  input: string;
  fields: Record<string, string>;
  optional?: boolean;
  ids?: readonly string[];
};

/** A document upload: multipart `file` parts and `metadata`, or JSON `{filename, content, metadata}`. */
export type UploadBodySpec = { kind: 'upload' };

/**
 * One documented endpoint: the persisted GraphQL operation it runs, how the HTTP request becomes
 * that operation's variables, and how the operation's `result` becomes the response. Query
 * parameters and bodies are declared (not parsed inside `variables`) so that the OpenAPI
 * description is generated from what the handler validates with.
 * `variables` may throw a 400/413/415 AppError; it is then reported from inside the GraphQL
 * pipeline, after authentication, scope and rate limit, as the contract orders them.
 */
export type Route<Result = unknown, Variables = Record<string, unknown>, Query = Record<string, unknown>, Body = unknown> = {
  method: Method;
  path: string;
  operation: TypedDocumentNode<{ result: Result }, Variables>;
  /** One line for the OpenAPI description and /docs (a test fails when one is missing). */
  summary: string;
  description?: string;
  tag: RouteTag;
  /** A POST that creates something: it honours `Idempotency-Key`. */
  idempotent?: boolean;
  /** How the body's fields are named in messages: snake_case (the default) or as the specification spells them. */
  fieldNames?: 'snake_case' | 'camelCase';
  /** Path parameters that are more than any non-empty string. */
  params?: Record<string, { pattern: RegExp; problem: string; description: string }>;
  query?: z.ZodRawShape;
  /** Request headers the route reads (parsed as query parameters are; a problem is a 400 naming the header). */
  headers?: z.ZodRawShape;
  body?: JsonBody | UploadBodySpec;
  variables?: (request: RestRequest<Query, Body>) => Variables;
  /** How a success is answered, written and described by one object (response-kinds.ts). */
  response: ResponseKind;
  /**
   * The errors its operation raises beyond those every endpoint and its shape bring
   * (route-errors.ts). The OpenAPI description lists their statuses; an answer with a status not
   * declared is logged and counted, and fails the tests.
   */
  raises?: readonly ErrorCode[];
};

/** What the operation of a `file` response selects (response-kinds.ts). */
export type FileResult = { document_id: string; filename: string; content_type: string; size_bytes: number };

export const route = <Result, Variables, Query = Record<string, unknown>, Body = unknown>(definition: Route<Result, Variables, Query, Body>) =>
  definition as unknown as Route;

export const jsonBody = (input: string, fields: Record<string, string>, options: { optional?: boolean; ids?: readonly string[] } = {}): JsonBody => ({
  kind: 'json',
  input,
  fields,
  ...options,
});

export const idParam = ({ params }: RestRequest) => ({ id: params.id! });

export type Listed = { limit: number; cursor?: string };
// A REST cursor is the id of the previous page's last item (as Stripe's `starting_after`), so
// that any UUID is a well-formed one; GraphQL's cursors wrap the same id.
export const listVariables = (query: Listed) => ({ first: query.limit, after: query.cursor ? formatPrismaCursor({ id: query.cursor.toLowerCase() }, 'id') : null });
