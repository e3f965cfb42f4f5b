import { allScopes } from '../../auth/scopes.js';
import { AppError } from '../../errors.js';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import { issueApiKey } from '../apiKeys/service.js';
import { checkNewUser, type NewUser } from './input.js';

export type { NewUser } from './input.js';

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

/**
 * Creates a user with a subscription, an opening credit grant and a key that carries every
 * scope, all in one transaction; the key's raw value is returned once.
 */
export async function createUser(prisma: PrismaClient, input: NewUser) {
  const { email, name, phone, credits, plan, active } = checkNewUser(input);
  try {
    return await prisma.$transaction(async (tx) => {
      const user = await tx.user.create({
        data: {
          email,
          name,
          phone: phone ?? null,
          creditsBalance: credits,
          subscription: { create: { plan, status: active ? 'active' : 'inactive' } },
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
