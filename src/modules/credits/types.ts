import { builder } from '../../graphql/builder.js';
import { UserRef } from '../user/types.js';
import { creditSummary } from './service.js';

type CreditSummary = Awaited<ReturnType<typeof creditSummary>>;

const CreditEntry = builder.prismaObject('CreditEntry', {
  fields: (t) => ({
    id: t.exposeID('id'),
    amount: t.exposeInt('amount', { description: 'Positive for grants and refunds, negative for usage.' }),
    reason: t.exposeString('reason'),
    jobId: t.exposeID('jobId', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const SubscriptionInfo = builder.objectRef<CreditSummary['subscription']>('SubscriptionInfo').implement({
  fields: (t) => ({
    plan: t.exposeString('plan'),
    status: t.exposeString('status'),
    currentPeriodEnd: t.expose('currentPeriodEnd', { type: 'DateTime', nullable: true }),
  }),
});

const CreditTotals = builder.objectRef<CreditSummary['totals']>('CreditTotals').implement({
  fields: (t) => ({
    granted: t.exposeInt('granted'),
    used: t.exposeInt('used'),
  }),
});

const CreditSummaryRef = builder.objectRef<CreditSummary>('CreditSummary').implement({
  fields: (t) => ({
    balance: t.exposeInt('balance'),
    subscription: t.field({ type: SubscriptionInfo, resolve: (summary) => summary.subscription }),
    totals: t.field({ type: CreditTotals, resolve: (summary) => summary.totals }),
    recent: t.field({ type: [CreditEntry], resolve: (summary) => summary.recent }),
  }),
});

builder.objectField(UserRef, 'credits', (t) =>
  t.field({
    type: CreditSummaryRef,
    description: 'Balance, subscription and the most recent ledger entries.',
    authScopes: { scope: 'user:read' },
    resolve: (user, _args, context) => creditSummary(context.prisma, user.id),
  }),
);
