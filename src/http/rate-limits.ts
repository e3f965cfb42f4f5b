import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
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
 * Named limits, counted per user in this process. The API-key endpoints share one budget of
 * 100 calls a minute, as the contract says. Searches have their own (`KB_SEARCH_RATE_PER_MINUTE`):
 * each runs the embedding model and both sides of the index. A GraphQL operation uses one per
 * limited field it calls (aliases and fragments included).
 */
export function createRateLimits(settings: { searchesPerMinute: number }): RateLimits {
  const budgets: Record<RateLimitName, Budget> = {
    apiKeys: { keyPrefix: 'api-keys', points: 100, duration: 60 },
    search: { keyPrefix: 'search', points: settings.searchesPerMinute, duration: 60 },
  };
  const limiters = Object.fromEntries(
    Object.entries(budgets).map(([name, options]) => [name, new RateLimiterMemory(options)]),
  ) as Record<RateLimitName, RateLimiterMemory>;
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
