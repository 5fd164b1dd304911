import { spawn, type ChildProcess } from 'node:child_process';
import { inject } from 'vitest';
import { GATEWAY_NODE_OPTIONS } from '../../scripts/node-options.mjs';

export interface GatewayProcess {
  child: ChildProcess;
  url: string;
  /** Every log line so far, parsed. */
  logs(): Record<string, unknown>[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Runs the built bundle as its own process (for signals and kill -9) and waits until it listens. */
export async function spawnGateway(env: Record<string, string>): Promise<GatewayProcess> {
  const child = spawn(process.execPath, [inject('bundlePath')], {
    env: { PATH: process.env['PATH'] ?? '', NODE_OPTIONS: GATEWAY_NODE_OPTIONS, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', RETENTION_DAYS: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Record<string, unknown>[] = [];
  let stderr = '';
  let buffered = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    const parts = buffered.split('\n');
    buffered = parts.pop()!;
    for (const line of parts) if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
  });
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // A test that fails before it stops its gateway must not leave the process behind.
  const killOnExit = (): void => void child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      process.off('exit', killOnExit);
      resolve({ code, signal });
    }),
  );
  const deadline = Date.now() + 15_000;
  for (;;) {
    const started = lines.find((l) => l['event'] === 'started');
    if (started !== undefined) {
      const port = String(started['address']).split(':').pop();
      return { child, url: `http://127.0.0.1:${port}`, logs: () => lines, exited };
    }
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`gateway did not start: ${stderr}\n${JSON.stringify(lines)}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}
