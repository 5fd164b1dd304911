import type { QueueWriter } from '../../src/queue/queue-writer.js';

/**
 * Appends one-reading records `from` to `from + count - 1` together, as concurrent requests are, each
 * on a row of its own: a commit joins only consecutive records of one site (commit-rows.ts), and
 * neighbours here alternate between the gateway's own site and another.
 */
export async function appendApart(queue: QueueWriter, from: number, count: number): Promise<void> {
  await Promise.all(
    Array.from({ length: count }, (_, i) =>
      queue.append(`${from + i}\ts\tc\t1`, 1, from + i, undefined, i % 2 === 0 ? undefined : 'apart'),
    ),
  );
}
