import { type ChildProcess, spawn } from 'node:child_process';
import { inject } from 'vitest';
import { GATEWAY_GLIBC_TUNABLES, GATEWAY_NODE_OPTIONS } from '../../scripts/lib/node-options.mjs';
import { waitUntil } from './wait.js';

/** The built gateway on a terminal of its own, as a person starts it in a shell. */
export interface TerminalGateway {
  /** script(1), which holds the terminal: killing it closes the terminal. */
  terminal: ChildProcess;
  /** The gateway's own pid: it runs in a session of its own under script(1). */
  pid: number;
  /** Everything the terminal showed so far. */
  output(): string;
}

/** Starts the gateway under script(1) with `env` added to its settings and waits until it listens. */
export async function startOnTerminal(env: Record<string, string>): Promise<TerminalGateway> {
  const settings = {
    PATH: process.env['PATH'] ?? '',
    NODE_OPTIONS: GATEWAY_NODE_OPTIONS,
    GLIBC_TUNABLES: GATEWAY_GLIBC_TUNABLES,
    QUESTDB_URL: inject('questdbUrl'),
    HEALTH_REPORT: 'false',
    HOST: '127.0.0.1',
    PORT: '0',
    HTTPS_PORT: '0',
    ...env,
  };
  const command = `echo "gateway pid $$"; exec ${process.execPath} ${inject('bundlePath')}`;
  const terminal = spawn('script', ['-qfec', command, '/dev/null'], { env: settings, detached: true });
  let output = '';
  terminal.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  // On a terminal the start line is a plain line that names the API's address.
  const startLine = /Harbor Gateway \S+: API http:\/\/[^:]+:(\d+)\//;
  await waitUntil(`the gateway to start: ${output}`, () => startLine.test(output), 15_000);
  // An answer means the event loop has turned since the start line, so the signal handlers that
  // follow it are in place (a SIGHUP before them would end the process).
  const port = startLine.exec(output)![1];
  await waitUntil('an answer', async () => (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.status === 200);
  return { terminal, pid: Number(/gateway pid (\d+)/.exec(output)![1]), output: () => output };
}
