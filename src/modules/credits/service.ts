import { AppError, notFound } from '../../errors.js';
import type { PrismaClient } from '../../generated/prisma/client.js';

export type SubscriptionStatus = 'active' | 'inactive';

async function userIdByEmail(prisma: PrismaClient, email: string) {
  const user = await prisma.user.findUnique({ where: { email: email.trim().toLowerCase() }, select: { id: true } });
  if (!user) throw notFound('user', email);
  return user.id;
}

/** Adds credits and the matching ledger entry in one transaction; returns the new balance. */
export async function grantCredits(prisma: PrismaClient, email: string, amount: number, reason = 'grant') {
  if (!Number.isSafeInteger(amount) || amount <= 0) throw new AppError('bad_request', 'amount: must be a positive integer');
  const userId = await userIdByEmail(prisma, email);
  const [user] = await prisma.$transaction([
    prisma.user.update({ where: { id: userId }, data: { creditsBalance: { increment: amount } } }),
    prisma.creditEntry.create({ data: { userId, amount, reason } }),
  ]);
  return { email: user.email, balance: user.creditsBalance };
}

export async function setSubscription(prisma: PrismaClient, email: string, status: SubscriptionStatus, plan?: string) {
  const userId = await userIdByEmail(prisma, email);
  const subscription = await prisma.subscription.upsert({
    where: { userId },
    create: { userId, status, plan: plan ?? 'free' },
    update: { status, ...(plan !== undefined && { plan }) },
  });
  return { email: email.trim().toLowerCase(), plan: subscription.plan, status: subscription.status };
}

const recentEntryCount = 20;

export async function creditSummary(prisma: PrismaClient, userId: string) {
  const [user, subscription, granted, used, recent] = await Promise.all([
    prisma.user.findUniqueOrThrow({ where: { id: userId }, select: { creditsBalance: true } }),
    prisma.subscription.findUnique({ where: { userId } }),
    prisma.creditEntry.aggregate({ where: { userId, amount: { gt: 0 } }, _sum: { amount: true } }),
    prisma.creditEntry.aggregate({ where: { userId, amount: { lt: 0 } }, _sum: { amount: true } }),
    prisma.creditEntry.findMany({
      where: { userId },
      orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      take: recentEntryCount,
    }),
  ]);
  return {
    balance: user.creditsBalance,
    subscription: {
      plan: subscription?.plan ?? 'free',
      status: subscription?.status ?? ('inactive' as const),
      currentPeriodEnd: subscription?.currentPeriodEnd ?? null,
    },
    totals: { granted: granted._sum.amount ?? 0, used: -(used._sum.amount ?? 0) },
    recent,
  };
}
