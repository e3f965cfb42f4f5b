import type pg from 'pg';
import { RateLimiterMemory, RateLimiterPostgres, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { AppError } from '../errors.js';
import type { RateLimitName } from '../graphql/field-requirements.js';

export type RateLimits = {
  /**
   * Takes `points` calls from the user's budget at once, or none: when they do not all fit, the
   * call is refused with a 429 and the budget is left as it was.
   */
  consume(name: RateLimitName, userId: string, points?: number): Promise<void>;
};

type Budget = { keyPrefix: string; points: number; duration: number };

/**
 * Named limits, counted per user. The API-key endpoints share one budget of 100 calls a minute,
 * as the contract says. Searches have their own (`KB_SEARCH_RATE_PER_MINUTE`): each runs the
 * embedding model and both sides of the index. A GraphQL operation uses one per limited field it
 * calls (aliases and fragments included).
 *
 * With `sharedPool` (PostgreSQL) the points are counted in the store's `rate_limit_points`, so a
 * user's budget is one budget whichever server answers; should the store fail to count, each
 * server falls back to counting alone in memory until it answers again. Without it (the embedded
 * store, one process) they are counted in memory.
 */
export function createRateLimits(settings: { searchesPerMinute: number; sharedPool?: pg.Pool }): RateLimits {
  const budgets: Record<RateLimitName, Budget> = {
    apiKeys: { keyPrefix: 'api-keys', points: 100, duration: 60 },
    search: { keyPrefix: 'search', points: settings.searchesPerMinute, duration: 60 },
  };
  const limiterOf = (options: Budget): RateLimiterAbstract =>
    settings.sharedPool
      ? new RateLimiterPostgres({
          ...options,
          storeClient: settings.sharedPool,
          storeType: 'pool',
          tableName: 'rate_limit_points',
          // Created by the store's migrations; expired rows are deleted by the limiter every few minutes.
          tableCreated: true,
          insuranceLimiter: new RateLimiterMemory(options),
        })
      : new RateLimiterMemory(options);
  const limiters = Object.fromEntries(Object.entries(budgets).map(([name, options]) => [name, limiterOf(options)])) as Record<RateLimitName, RateLimiterAbstract>;
  return {
    async consume(name, userId, points = 1) {
      const limiter = limiters[name];
      const { points: limit } = budgets[name];
      try {
        await limiter.consume(userId, points);
      } catch (rejection) {
        if (!(rejection instanceof RateLimiterRes)) throw rejection;
        // consume() counted the refused points too; give them back, since nothing runs.
        await limiter.reward(userId, points);
        const retryAfterSeconds = Math.max(1, Math.ceil(rejection.msBeforeNext / 1000));
        const remaining = Math.max(0, limit - (rejection.consumedPoints - points));
        const needs = points === 1 ? '' : ` (this operation makes ${points} calls, ${remaining} remain)`;
        throw new AppError('rate_limited', `rate limit of ${limit} requests per minute exceeded${needs}; retry in ${retryAfterSeconds} s`, {
          retryAfterSeconds,
        });
      }
    },
  };
}
