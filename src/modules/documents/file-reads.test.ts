import { describe, expect, it } from 'vitest';
import { FileReadTurns } from './file-reads.js';

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('FileReadTurns', () => {
  it('runs at most perUser reads of one user at once, the rest in order, and other users beside them', async () => {
    const turns = new FileReadTurns(2);
    let running = 0;
    let most = 0;
    const order: string[] = [];
    const releases: (() => void)[] = [];
    const read = (user: string, name: string) =>
      turns.run(user, async () => {
        running++;
        most = Math.max(most, running);
        order.push(name);
        await new Promise<void>((resolve) => releases.push(resolve));
        running--;
      });
    const reads = ['a1', 'a2', 'a3', 'a4', 'a5'].map((name) => read('a', name));
    const other = read('b', 'b1');
    await tick();
    expect(order).toEqual(['a1', 'a2', 'b1']);
    while (releases.length > 0) {
      releases.shift()!();
      await tick();
      await tick();
    }
    await Promise.all([...reads, other]);
    expect(order).toEqual(['a1', 'a2', 'b1', 'a3', 'a4', 'a5']);
    expect(most).toBe(3);
  });

  it('lets a reader that gives up its place leave the queue, and passes its turn on when a read fails', async () => {
    const turns = new FileReadTurns(1);
    let release!: () => void;
    const first = turns.run('a', () => new Promise<void>((resolve) => (release = resolve)));
    const stop = new AbortController();
    const abandoned = turns.run('a', async () => 'never', stop.signal);
    const failing = turns.run('a', async () => {
      throw new Error('gone');
    });
    const last = turns.run('a', async () => 'ran');
    stop.abort(new Error('client left'));
    await expect(abandoned).rejects.toThrow('client left');
    release();
    await first;
    await expect(failing).rejects.toThrow('gone');
    await expect(last).resolves.toBe('ran');
  });
});
