import { describe, expect, it } from 'vitest';
import type { PrismaClient } from '../../generated/prisma/client.js';
import type { Logger } from '../../logger.js';
import type { RunEventLog } from './event-log.js';
import { AgentRuns } from './runs.js';

// Without a store: tracking and following touch only this process's registry.
function registry() {
  const errors: string[] = [];
  const log = { error: (message: string) => errors.push(message), warn() {}, info() {}, debug() {} } as unknown as Logger;
  return { runs: new AgentRuns({} as PrismaClient, 1_000, log), errors };
}

describe("this process's agent runs", () => {
  it('forgets a run that failed and logs it, rather than leaving its rejection unhandled to end the process', async () => {
    const { runs, errors } = registry();
    runs.track('job-1', Promise.reject(new Error('the store went away')), {} as RunEventLog);
    runs.follow(Promise.reject(new Error('the reader failed')));
    expect(runs.localLog('job-1')).toBeDefined();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(runs.localLog('job-1')).toBeUndefined();
    expect(errors).toEqual(['agent: run job-1 ended with an error', 'agent: following a run ended with an error']);
  });
});
