import { type ChildProcess, spawn } from 'node:child_process';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MAX_HELD_BYTES, stdoutLines } from '../src/log/stdout-lines.js';

// A reader on the other end of a pipe that takes nothing until it gets SIGUSR2 (or its delay, 3 s unless given, passed), then copies all.
const READER = `
const start = () => process.stdin.pipe(process.stdout);
setTimeout(start, Number(process.argv[1] ?? 3000));
process.once('SIGUSR2', start);
process.stdout.write('ready\\n');
`;

const readers: ChildProcess[] = [];
afterEach(() => {
  for (const reader of readers.splice(0)) reader.kill('SIGKILL');
});

async function slowReader(delayMs = 3000) {
  const reader = spawn(process.execPath, ['-e', READER, String(delayMs)], { stdio: ['pipe', 'pipe', 'inherit'] });
  readers.push(reader);
  let text = '';
  reader.stdout?.on('data', (chunk: Buffer) => (text += chunk.toString()));
  await new Promise<void>((resolve) => reader.stdout?.once('data', () => resolve()));
  // The pipe's write end, as a gateway's stdout is to its journal: libuv opened it without blocking.
  const fd = (reader.stdin as unknown as { _handle: { fd: number } })._handle.fd;
  return {
    fd,
    lines: () => text.split('\n').filter((line) => line !== '' && line !== 'ready'),
    startReading: () => reader.kill('SIGUSR2'),
  };
}

const line = (i: number): string => `${JSON.stringify({ level: 30, time: 0, i, msg: 'x'.repeat(200) })}\n`;

describe('log lines on stdout', () => {
  it('never wait for a reader that takes nothing: they are held, then written in order', async () => {
    const reader = await slowReader();
    const destination = stdoutLines(true, reader.fd);
    // 2,000 lines of about 230 bytes: several times what the pipe holds. Were a write to wait for
    // the reader, this loop would last until the reader starts by itself, 3 s on.
    const started = performance.now();
    for (let i = 0; i < 2000; i++) destination.write(line(i));
    expect(performance.now() - started).toBeLessThan(1500);
    reader.startReading();
    await expect.poll(() => reader.lines().length, { timeout: 10_000 }).toBe(2000);
    expect(reader.lines().map((l) => JSON.parse(l).i)).toEqual([...Array(2000).keys()]);
  });

  it('drop what is past their bound while the reader is away, and say how many', async () => {
    const reader = await slowReader();
    const destination = stdoutLines(true, reader.fd);
    const total = Math.ceil((2 * MAX_HELD_BYTES) / line(0).length);
    for (let i = 0; i < total; i++) destination.write(line(i));
    reader.startReading();
    await expect.poll(() => reader.lines().some((l) => l.includes('log_lines_dropped')), { timeout: 10_000 }).toBe(true);
    destination.write(line(total));
    await expect.poll(() => reader.lines().at(-1), { timeout: 10_000 }).toBe(line(total).trim());
    const parsed = reader.lines().map((l) => JSON.parse(l) as { i?: number; event?: string; dropped?: number });
    const notice = parsed.findIndex((p) => p.event === 'log_lines_dropped');
    const kept = parsed.slice(0, notice).map((p) => p.i);
    // The first lines, in order, up to the bound; then the count of those let go; then the next.
    expect(kept).toEqual([...Array(kept.length).keys()]);
    expect(kept.length * line(0).length).toBeLessThanOrEqual(MAX_HELD_BYTES + 256 * 1024);
    expect(parsed[notice]?.dropped).toBe(total - kept.length);
    expect(parsed.slice(notice + 1).map((p) => p.i)).toEqual([total]);
  });

  it("keep a line whole when another thread's line comes while it was written in part", async () => {
    // The reader starts 50 ms after it said ready: within the time a line begun is given to end.
    const reader = await slowReader(50);
    // Both threads' destinations on one descriptor, as the ingest and delivery threads share stdout.
    const ingest = stdoutLines(true, reader.fd);
    const delivery = stdoutLines(true, reader.fd);
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    // The held rest of a line is retried on a timer: held still until the other thread has written.
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    try {
      // Larger than the pipe holds: written in part.
      ingest.write(`${JSON.stringify({ level: 30, time: 0, i: 0, msg: 'y'.repeat(256 * 1024) })}\n`);
      vi.useRealTimers();
      await sleep(200);
      vi.useFakeTimers({ toFake: ['setTimeout'] });
      // The reader has room by now: this line would land in the middle of the first, were it unfinished.
      delivery.write(line(1));
      for (let i = 0; i < 50; i++) {
        vi.advanceTimersByTime(10);
        vi.useRealTimers();
        await sleep(10);
        vi.useFakeTimers({ toFake: ['setTimeout'] });
      }
    } finally {
      vi.useRealTimers();
    }
    await expect.poll(() => reader.lines().length, { timeout: 10_000 }).toBe(2);
    expect(reader.lines().map((l) => JSON.parse(l).i)).toEqual([0, 1]);
  });
});
