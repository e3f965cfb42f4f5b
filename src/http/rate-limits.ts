import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { AppError } from '../errors.js';
import type { RateLimitName } from '../graphql/field-requirements.js';

export type RateLimits = { consume(name: RateLimitName, userId: string): Promise<void> };

/**
 * Named limits, counted per user in this process. The API-key endpoints share one budget of
 * 100 requests a minute, as the contract says.
 */
export function createRateLimits(): RateLimits {
  const limiters: Record<RateLimitName, RateLimiterMemory> = {
    apiKeys: new RateLimiterMemory({ keyPrefix: 'api-keys', points: 100, duration: 60 }),
  };
  return {
    async consume(name, userId) {
      try {
        await limiters[name].consume(userId);
      } catch (rejection) {
        if (!(rejection instanceof RateLimiterRes)) throw rejection;
        const retryAfterSeconds = Math.max(1, Math.ceil(rejection.msBeforeNext / 1000));
        throw new AppError('rate_limited', `rate limit of 100 requests per minute exceeded; retry in ${retryAfterSeconds} s`, {
          retryAfterSeconds,
        });
      }
    },
  };
}
