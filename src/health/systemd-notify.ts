import { execFile } from 'node:child_process';
import type { Logger } from 'pino';

/**
 * Talks to systemd through `systemd-notify` (Node has no unix datagram sockets): READY=1 once the
 * gateway listens, WATCHDOG=1 on a timer while `isHealthy` holds, STOPPING=1 on shutdown. A
 * blocked event loop sends no pings, so systemd restarts the gateway. The unit needs
 * `NotifyAccess=all` because the messages come from a child process.
 */
export class SystemdNotifier {
  #timer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly log: Logger,
    private readonly watchdogMs: number | undefined,
  ) {}

  /** A notifier when started by systemd with Type=notify, otherwise undefined. */
  static fromEnvironment(env: NodeJS.ProcessEnv, log: Logger): SystemdNotifier | undefined {
    if (!env['NOTIFY_SOCKET']) return undefined;
    const usec = Number(env['WATCHDOG_USEC']);
    const forUs = env['WATCHDOG_PID'] === undefined || Number(env['WATCHDOG_PID']) === process.pid;
    return new SystemdNotifier(log, Number.isFinite(usec) && usec > 0 && forUs ? usec / 1000 : undefined);
  }

  ready(status: string): Promise<void> {
    return this.#send(['--ready', `--status=${status}`]);
  }

  /** Pings at half the watchdog interval, and only while `isHealthy()` is true. */
  startWatchdog(isHealthy: () => boolean): void {
    if (this.watchdogMs === undefined) return;
    this.#timer = setInterval(() => {
      if (isHealthy()) void this.#send(['WATCHDOG=1']);
      else this.log.error({ event: 'watchdog_withheld' }, 'unhealthy: not feeding the systemd watchdog');
    }, this.watchdogMs / 2);
    this.#timer.unref();
  }

  stopping(): Promise<void> {
    clearInterval(this.#timer);
    return this.#send(['--status=stopping', 'STOPPING=1']);
  }

  #send(args: string[]): Promise<void> {
    return new Promise((resolve) => {
      execFile('systemd-notify', args, { timeout: 5000 }, (error) => {
        if (error) this.log.warn({ event: 'systemd_notify_failed', error: error.message }, 'systemd-notify failed');
        resolve();
      });
    });
  }
}
