import { getOperationAST, type ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { AppError, shownMebibytes } from '../errors.js';
import { requestError } from './request-error.js';

/**
 * What one operation's response may still hold of KB_MAX_GRAPHQL_RESPONSE_BYTES, for the fields
 * that know their size before they read anything (DocumentFile.base64): they take it first, and
 * one that does not fit is refused without reading its bytes. One per operation, in its context.
 */
export class ResponseBudget {
  #leftBytes: number;

  constructor(readonly limitBytes: number) {
    this.#leftBytes = limitBytes;
  }

  get leftBytes(): number {
    return this.#leftBytes;
  }

  /** Takes `bytes` of what is left; false, taking nothing, when they do not fit. */
  take(bytes: number): boolean {
    if (bytes > this.#leftBytes) return false;
    this.#leftBytes -= bytes;
    return true;
  }
}

/**
 * Refuses a result larger than `maxBytes` as JSON, whole, rather than keeping it for a client
 * that may read it slowly or never: a query's or mutation's result, and each event of a
 * subscription. The result is measured before it is serialised, and the walk stops as soon as it
 * passes the limit. What is sent instead is a 400 `bad_request` naming both sizes (no `data`, as
 * for a request refused before it ran; a mutation's changes stand and the message says so).
 */
export function useResponseLimit(maxBytes: number): Plugin {
  return {
    onExecute({ args }) {
      const isMutation = getOperationAST(args.document, args.operationName)?.operation === 'mutation';
      return {
        onExecuteDone({ result, setResult }) {
          if (Symbol.asyncIterator in result) return;
          const refusal = refusalOf(result, maxBytes, isMutation);
          if (refusal) setResult(refusal);
        },
      };
    },
    onSubscribe() {
      return {
        onSubscribeResult() {
          return {
            onNext({ result, setResult }) {
              const refusal = refusalOf(result, maxBytes, false);
              if (refusal) setResult(refusal);
            },
          };
        },
      };
    },
  };
}

function refusalOf(result: ExecutionResult, maxBytes: number, isMutation: boolean): ExecutionResult | null {
  const bytes = jsonBytesPast(result, maxBytes);
  if (bytes <= maxBytes) return null;
  const carriedOut = isMutation ? '; the mutation was carried out' : '';
  const error = new AppError(
    'bad_request',
    `the response would be more than ${shownMebibytes(maxBytes)}, the limit of one response (KB_MAX_GRAPHQL_RESPONSE_BYTES): ask for less at a time, such as a smaller page or fewer fields${carriedOut}`,
    { field: 'query' },
  );
  return { errors: [requestError(error)] };
}

/**
 * The size of `value` as JSON.stringify would write it, in UTF-8 bytes, or the first count past
 * `limit` once it is clear the value is larger: a walk without recursion that writes nothing.
 * Values with a `toJSON` (errors, dates) are measured as what it returns.
 */
export function jsonBytesPast(value: unknown, limit: number): number {
  let bytes = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0 && bytes <= limit) {
    let item = stack.pop();
    if (item !== null && typeof item === 'object' && typeof (item as { toJSON?: unknown }).toJSON === 'function') {
      item = (item as { toJSON(): unknown }).toJSON();
    }
    if (typeof item === 'string') bytes += Buffer.byteLength(JSON.stringify(item));
    else if (typeof item === 'number' || typeof item === 'boolean') bytes += String(JSON.stringify(item)).length;
    else if (item === null || item === undefined) bytes += 4;
    else if (Array.isArray(item)) {
      bytes += 2 + Math.max(0, item.length - 1);
      for (let index = item.length - 1; index >= 0; index -= 1) stack.push(item[index]);
    } else if (typeof item === 'object') {
      const entries = Object.entries(item).filter(([, child]) => child !== undefined && typeof child !== 'function');
      bytes += 2 + Math.max(0, entries.length - 1);
      for (const [key, child] of entries) {
        bytes += Buffer.byteLength(JSON.stringify(key)) + 1;
        stack.push(child);
      }
    }
  }
  return bytes;
}
