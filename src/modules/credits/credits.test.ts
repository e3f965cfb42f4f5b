import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../../errors.js';
import { expectError, startTestServer, type TestServer, type TestUser } from '../../../test/support/server.js';
import { grantCredits, setSubscription } from './service.js';
import { isoTimestamp, uuid } from '../../../test/support/fixtures.js';

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());


type Entry = { id: string; amount: number; reason: string; job_id: string | null; created_at: string };
type Credits = {
  balance: number;
  subscription: { plan: string; status: string; current_period_end: string | null };
  totals: { granted: number; used: number };
  recent: Entry[];
};

async function getCredits(user: TestUser, key = user.key) {
  const response = await server.request('GET', '/v1/user/me/credits', { key });
  expect(response.status, response.text).toBe(200);
  return response.body as Credits;
}

async function balanceOnProfile(user: TestUser) {
  const response = await server.request('GET', '/v1/user/me', { key: user.key });
  expect(response.status).toBe(200);
  return response.body.creditsBalance as number;
}

/** Records usage the way an agent run is charged: balance and ledger in one transaction. */
async function recordUsage(user: TestUser, amount: number) {
  const prisma = server.app.db.prisma;
  await prisma.$transaction([
    prisma.user.update({ where: { id: user.id }, data: { creditsBalance: { decrement: amount } } }),
    prisma.creditEntry.create({ data: { userId: user.id, amount: -amount, reason: 'agent run' } }),
  ]);
}

describe('credit breakdown over REST', () => {
  it('shows an empty ledger and the free, active plan for a user created without credits', async () => {
    const user = await server.createUser();
    expect(await getCredits(user)).toEqual({
      balance: 0,
      subscription: { plan: 'free', status: 'active', current_period_end: null },
      totals: { granted: 0, used: 0 },
      recent: [],
    });
  });

  it('records the opening credits of a new user as a ledger entry', async () => {
    const user = await server.createUser({ credits: 50 });
    const credits = await getCredits(user);
    expect(credits).toEqual({
      balance: 50,
      subscription: { plan: 'free', status: 'active', current_period_end: null },
      totals: { granted: 50, used: 0 },
      recent: [
        {
          id: expect.stringMatching(uuid),
          amount: 50,
          reason: expect.any(String),
          job_id: null,
          created_at: expect.stringMatching(isoTimestamp),
        },
      ],
    });
    expect(credits.recent[0]!.reason.length).toBeGreaterThan(0);
    expect(await balanceOnProfile(user)).toBe(50);
  });

  it('shows granted credits in balance, totals and recent, newest first', async () => {
    const user = await server.createUser({ credits: 10 });
    const prisma = server.app.db.prisma;
    expect(await grantCredits(prisma, user.email, 25, 'promotion')).toEqual({ email: user.email, balance: 35 });
    await getCredits(user);
    expect((await grantCredits(prisma, user.email.toUpperCase(), 5)).balance).toBe(40);

    const credits = await getCredits(user);
    expect(credits.balance).toBe(40);
    expect(credits.totals).toEqual({ granted: 40, used: 0 });
    expect(credits.recent.map((entry) => [entry.amount, entry.reason])).toEqual([
      [5, 'grant'],
      [25, 'promotion'],
      [10, expect.any(String)],
    ]);
    const times = credits.recent.map((entry) => Date.parse(entry.created_at));
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    expect(new Set(credits.recent.map((entry) => entry.id)).size).toBe(3);
    expect(await balanceOnProfile(user)).toBe(40);
  });

  it('reports usage as negative amounts and in totals.used; balance equals granted minus used', async () => {
    const user = await server.createUser({ credits: 20 });
    await recordUsage(user, 3);
    await recordUsage(user, 5);
    await grantCredits(server.app.db.prisma, user.email, 4, 'refund');
    const credits = await getCredits(user);
    expect(credits.balance).toBe(16);
    expect(credits.totals).toEqual({ granted: 24, used: 8 });
    expect(credits.balance).toBe(credits.totals.granted - credits.totals.used);
    expect(credits.recent.map((entry) => entry.amount)).toEqual([4, -5, -3, 20]);
    expect(await balanceOnProfile(user)).toBe(16);
  });

  it('keeps the totals over the whole ledger while recent shows only the latest entries', async () => {
    const user = await server.createUser();
    const prisma = server.app.db.prisma;
    for (let amount = 1; amount <= 30; amount += 1) await grantCredits(prisma, user.email, amount, `grant ${amount}`);
    const credits = await getCredits(user);
    expect(credits.balance).toBe(465);
    expect(credits.totals).toEqual({ granted: 465, used: 0 });
    expect(credits.recent.length).toBeGreaterThan(0);
    expect(credits.recent.length).toBeLessThan(30);
    expect(credits.recent[0]).toMatchObject({ amount: 30, reason: 'grant 30' });
    const amounts = credits.recent.map((entry) => entry.amount);
    expect(amounts).toEqual(amounts.map((_, index) => 30 - index));
  });

  it('rejects invalid grants and unknown users without touching any balance', async () => {
    const user = await server.createUser({ credits: 8 });
    const prisma = server.app.db.prisma;
    for (const amount of [0, -5, 1.5, Number.NaN, Number.MAX_SAFE_INTEGER + 2]) {
      const error = await grantCredits(prisma, user.email, amount).catch((caught: unknown) => caught);
      expect(error, String(amount)).toBeInstanceOf(AppError);
      expect((error as AppError).code).toBe('bad_request');
      expect((error as AppError).message).toMatch(/^amount: /);
    }
    const unknown = await grantCredits(prisma, 'nobody-here@example.com', 5).catch((caught: unknown) => caught);
    expect(unknown).toBeInstanceOf(AppError);
    expect((unknown as AppError).code).toBe('not_found');
    const credits = await getCredits(user);
    expect(credits.balance).toBe(8);
    expect(credits.recent).toHaveLength(1);
  });

  it('reflects subscription changes in plan and status', async () => {
    const user = await server.createUser();
    const prisma = server.app.db.prisma;
    expect(await setSubscription(prisma, user.email, 'inactive', 'pro')).toEqual({ email: user.email, plan: 'pro', status: 'inactive' });
    expect((await getCredits(user)).subscription).toEqual({ plan: 'pro', status: 'inactive', current_period_end: null });

    // Changing only the status keeps the plan.
    expect(await setSubscription(prisma, user.email, 'active')).toEqual({ email: user.email, plan: 'pro', status: 'active' });
    expect((await getCredits(user)).subscription).toMatchObject({ plan: 'pro', status: 'active' });

    await expect(setSubscription(prisma, 'missing-user@example.com', 'active')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('shows current_period_end as an ISO timestamp when the subscription has one', async () => {
    const user = await server.createUser();
    const end = new Date('2031-01-31T23:59:59.123Z');
    await server.app.db.prisma.subscription.update({ where: { userId: user.id }, data: { currentPeriodEnd: end } });
    expect((await getCredits(user)).subscription.current_period_end).toBe(end.toISOString());
  });

  it('reports an inactive subscription for a user created inactive', async () => {
    const user = await server.createUser({ active: false, credits: 2 });
    const credits = await getCredits(user);
    expect(credits.subscription).toEqual({ plan: 'free', status: 'inactive', current_period_end: null });
    expect(credits.balance).toBe(2);
  });

  it('shows each user only their own ledger', async () => {
    const rich = await server.createUser({ credits: 100 });
    const poor = await server.createUser();
    await grantCredits(server.app.db.prisma, rich.email, 11);
    const credits = await getCredits(poor);
    expect(credits.balance).toBe(0);
    expect(credits.recent).toEqual([]);
    expect(credits.totals).toEqual({ granted: 0, used: 0 });
  });

  it('needs user:read, naming the scope, and a credential', async () => {
    const user = await server.createUser({ credits: 5 });
    const readOnly = await server.createKey(user, ['user:read']);
    expect((await getCredits(user, readOnly)).balance).toBe(5);
    for (const scopes of [['user:write'], ['kb:read', 'kb:write', 'chat:read', 'chat:write', 'user:write']]) {
      const key = await server.createKey(user, scopes);
      const denied = expectError(await server.request('GET', '/v1/user/me/credits', { key }), 403, 'forbidden');
      expect(denied.message).toContain('user:read');
    }
    for (const key of [null, 'sk_0000000000000000000000000000000000000000']) {
      expectError(await server.request('GET', '/v1/user/me/credits', { key }), 401, 'unauthorized');
    }
  });

  it('is read-only: other methods are not accepted', async () => {
    const user = await server.createUser({ credits: 5 });
    for (const method of ['POST', 'PATCH', 'DELETE']) {
      const response = await server.request(method, '/v1/user/me/credits', { key: user.key, json: { balance: 1000 } });
      expect(response.status, method).toBeGreaterThanOrEqual(400);
      expect(response.status, method).toBeLessThan(500);
    }
    expect((await getCredits(user)).balance).toBe(5);
  });
});

describe('credit breakdown over GraphQL', () => {
  it('exposes the same summary under me.credits', async () => {
    const user = await server.createUser({ credits: 9 });
    await grantCredits(server.app.db.prisma, user.email, 6, 'bonus');
    await recordUsage(user, 2);
    const result = await server.graphql<{
      me: { creditsBalance: number; credits: { balance: number; subscription: unknown; totals: unknown; recent: { amount: number; reason: string; jobId: string | null }[] } };
    }>(
      user.key,
      `{ me { creditsBalance credits {
          balance
          subscription { plan status currentPeriodEnd }
          totals { granted used }
          recent { id amount reason jobId createdAt }
      } } }`,
    );
    expect(result.errors).toBeUndefined();
    expect(result.data?.me.creditsBalance).toBe(13);
    expect(result.data?.me.credits).toMatchObject({
      balance: 13,
      subscription: { plan: 'free', status: 'active', currentPeriodEnd: null },
      totals: { granted: 15, used: 2 },
    });
    expect(result.data?.me.credits.recent.map((entry) => [entry.amount, entry.reason, entry.jobId])).toEqual([
      [-2, 'agent run', null],
      [6, 'bonus', null],
      [9, expect.any(String), null],
    ]);
    const rest = await getCredits(user);
    expect(rest.recent.map((entry) => entry.id)).toEqual(
      (result.data?.me.credits.recent as unknown as { id: string }[]).map((entry) => entry.id),
    );
  });

  it('requires user:read for the credits field', async () => {
    const user = await server.createUser();
    const writeOnly = await server.createKey(user, ['user:write']);
    const denied = await server.graphql(writeOnly, `{ me { credits { balance } } }`);
    expect(denied.errors?.[0]?.extensions?.code).toBe('forbidden');
    expect(denied.errors?.[0]?.message).toContain('user:read');
    const anonymous = await server.graphql(null, `{ me { credits { balance } } }`);
    expect(anonymous.errors?.[0]?.extensions?.code).toBe('unauthorized');
  });
});
