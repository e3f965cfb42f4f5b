import { z } from 'zod';
import { validationErrorFromIssues } from '../../graphql/validation-error.js';

/** A phone number in E.164 form, the one rule of `PATCH /v1/user/me`, the `updateMe` mutation and `kb users create`. */
export const phoneRule = z.string().regex(/^\+[1-9]\d{7,14}$/, 'must be E.164: + and 8 to 15 digits, e.g. +14155550100');

export type NewUser = {
  email: string;
  name: string;
  phone?: string;
  credits?: number;
  plan?: string;
  active?: boolean;
};

const newUserSchema = z.object({
  email: z
    .string()
    .trim()
    .toLowerCase()
    .regex(/^[^\s@]+@[^\s@]+$/, 'must be an email address'),
  name: z.string().trim().min(1, 'must not be empty'),
  phone: phoneRule.optional(),
  credits: z
    .number()
    .int('must be a non-negative integer')
    .min(0, 'must be a non-negative integer')
    .max(Number.MAX_SAFE_INTEGER, 'must be a non-negative integer')
    .default(0),
  plan: z.string().trim().min(1, 'must not be empty').default('free'),
  active: z.boolean().default(true),
});

/**
 * A new user's fields, normalised (the email trimmed and lower-cased, the name trimmed), or a
 * 400 naming the first bad one. `kb users create` checks with it before it opens the store.
 */
export function checkNewUser(input: NewUser): z.output<typeof newUserSchema> {
  const checked = newUserSchema.safeParse(input);
  if (!checked.success) throw validationErrorFromIssues(checked.error.issues);
  return checked.data;
}
