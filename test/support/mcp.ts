import type { PrismaClient } from '../../src/generated/prisma/client.js';

/** Reads an MCP `ask` call's event stream until its progress names the agent run ("research started (run <id>)"). */
export async function runStartedIn(response: Response): Promise<string> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let seen = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended before the run started: ${seen}`);
    seen += value;
    const jobId = /run ([0-9a-f-]{36})/.exec(seen)?.[1];
    if (jobId) return jobId;
  }
}

/** An agent run once it is no longer running (or after 10 s). */
export async function settledJob(prisma: PrismaClient, jobId: string) {
  let job = await prisma.agentJob.findUniqueOrThrow({ where: { id: jobId } });
  for (let waited = 0; waited < 10_000 && job.status === 'running'; waited += 25) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    job = await prisma.agentJob.findUniqueOrThrow({ where: { id: jobId } });
  }
  return job;
}
