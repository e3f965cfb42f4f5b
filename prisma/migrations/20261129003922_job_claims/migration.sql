-- AlterTable
ALTER TABLE "jobs" ADD COLUMN     "claim" UUID;
