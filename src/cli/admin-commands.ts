import type { PrismaClient } from '../generated/prisma/client.js';
import { grantCredits, setSubscription, type SubscriptionStatus } from '../modules/credits/service.js';
import { createUser, type NewUser } from '../modules/user/service.js';

/** The account commands of `kb`, run either directly on the store or by the server that holds it. */
export const adminCommands = {
  'users.create': async (prisma: PrismaClient, input: NewUser) => {
    const { user, apiKey } = await createUser(prisma, input);
    return {
      user: {
        id: user.id,
        email: user.email,
        name: user.name,
        phone: user.phone,
        creditsBalance: user.creditsBalance,
        created_at: user.createdAt.toISOString(),
      },
      api_key: {
        id: apiKey.id,
        name: apiKey.name,
        display_key: apiKey.displayKey,
        raw_key: apiKey.rawKey,
        scopes: apiKey.scopes,
      },
    };
  },
  'credits.grant': (prisma: PrismaClient, input: { email: string; amount: number; reason?: string }) =>
    grantCredits(prisma, input.email, input.amount, input.reason),
  'subscription.set': (prisma: PrismaClient, input: { email: string; status: SubscriptionStatus; plan?: string }) =>
    setSubscription(prisma, input.email, input.status, input.plan),
};

export type AdminCommandName = keyof typeof adminCommands;

export function isAdminCommandName(name: string): name is AdminCommandName {
  return Object.hasOwn(adminCommands, name);
}
