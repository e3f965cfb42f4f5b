import { allScopes } from '../../auth/scopes.js';
import { AppError, badRequest } from '../../errors.js';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import { issueApiKey } from '../apiKeys/service.js';

export function findUser<Query extends Omit<Prisma.UserFindUniqueOrThrowArgs, 'where'>>(prisma: PrismaClient, userId: string, query: Query) {
  return prisma.user.findUniqueOrThrow({ ...query, where: { id: userId } });
}

export function updatePhone<Query extends Omit<Prisma.UserUpdateArgs, 'where' | 'data'>>(
  prisma: PrismaClient,
  userId: string,
  phone: string | null,
  query: Query,
) {
  return prisma.user.update({ ...query, where: { id: userId }, data: { phone } });
}

export type NewUser = {
  email: string;
  name: string;
  phone?: string;
  credits?: number;
  plan?: string;
  active?: boolean;
};

const emailPattern = /^[^\s@]+@[^\s@]+$/;
export const phonePattern = /^\+[1-9]\d{7,14}$/;

/**
 * Creates a user with a subscription, an opening credit grant and a key that carries every
 * scope, all in one transaction; the key's raw value is returned once.
 */
export async function createUser(prisma: PrismaClient, input: NewUser) {
  const email = input.email.trim().toLowerCase();
  if (!emailPattern.test(email)) throw badRequest('email', 'must be an email address');
  const name = input.name.trim();
  if (!name) throw badRequest('name', 'must not be empty');
  if (input.phone !== undefined && !phonePattern.test(input.phone)) throw badRequest('phone', 'must be E.164, e.g. +14155550100');
  const credits = input.credits ?? 0;
  if (!Number.isSafeInteger(credits) || credits < 0) throw badRequest('credits', 'must be a non-negative integer');
  try {
    return await prisma.$transaction(async (tx) => {
      const user = await tx.user.create({
        data: {
          email,
          name,
          phone: input.phone ?? null,
          creditsBalance: credits,
          subscription: { create: { plan: input.plan ?? 'free', status: input.active === false ? 'inactive' : 'active' } },
          ...(credits > 0 && { creditEntries: { create: { amount: credits, reason: 'initial grant' } } }),
        },
      });
      const apiKey = await issueApiKey(tx, user.id, 'default', allScopes);
      return { user, apiKey };
    });
  } catch (error) {
    if (error instanceof Prisma.PrismaClientKnownRequestError && error.code === 'P2002') {
      throw new AppError('conflict', `a user with email ${email} already exists`);
    }
    throw error;
  }
}

export const countUsers = (prisma: PrismaClient) => prisma.user.count();
