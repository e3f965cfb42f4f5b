import { describe, expect, it } from 'vitest';
import { Prisma } from '../../generated/prisma/client.js';
import { ownersMessage } from './run-claimed.js';

describe("a failed job's message to the document's owner", () => {
  it("keeps an error's own words but not the store client's internals", () => {
    const store = new Prisma.PrismaClientKnownRequestError(
      'Invalid `prisma.$executeRaw()` invocation: Transaction API error: A rollback cannot be executed on an expired transaction.',
      { code: 'P2028', clientVersion: '7' },
    );
    expect(ownersMessage(store)).toBe('the store failed while the results were written; the service log has the details');
    expect(ownersMessage(new Error('the embedding server answered 503'))).toBe('the embedding server answered 503');
    expect(ownersMessage('a plain reason')).toBe('a plain reason');
  });
});
