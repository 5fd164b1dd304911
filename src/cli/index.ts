import { type Config, ConfigError, loadConfig } from '../config/config.js';
import { renderConfigReference, renderConfigTable } from '../config/config-table.js';
import { checkConfig } from '../config/check-config.js';
import { type Gateway, startGateway } from '../gateway.js';
import { createLogger } from '../log/logger.js';
import { CertificateError } from '../tls/certificate-store.js';
import { QueueFormatError } from '../queue/queue-format.js';
import { DataDirInUseError } from '../queue/data-dir-lock.js';
import { VERSION } from '../version.js';
import { EXIT_IN_USE } from './data-dir-access.js';

/**
 * Exit status for configuration errors (EX_CONFIG), a queue file from a newer release among them;
 * systemd is told not to restart on it.
 */
const EXIT_CONFIG = 78;

const USAGE = `harbor-gateway ${VERSION}

Usage: harbor-gateway [command]

  serve          run the gateway (default); configured by environment variables. Exits 75 when
                 another gateway owns DATA_DIR, 78 on a configuration error, 74 when the disk
                 failed to make the queue file durable (started again, it recovers the queue)
  check-config   validate the configuration as serve would, print the problems, exit 78 if any
  dead-letters   list, re-queue or purge readings QuestDB refused (see: dead-letters help)
  keys           add, list or revoke device keys (see: keys help)
  audit          list the audit trail, or add entries to it (see: audit help)
  site-claims    at a centre: list which gateway owns each site id forwarded here, release one
                 (see: site-claims help)
  queue          export the readings a queue file holds as ingest batches (see: queue help)
  tls-certificate
                 print the HTTPS certificate's SHA-256 fingerprint, source and names; creates the
                 self-signed certificate when no other is configured
  catalogue      check the catalogue file and name cargo ids by it: catalogue [--file PATH] [CARGO_ID ...]
  config-table   print the configuration variables as a Markdown table (--document: the whole
                 configuration reference, docs/configuration.md)
  version        print the version
`;

/** `entry`: the bundle's entry, which the delivery thread runs. */
async function serve(entry: URL): Promise<void> {
  // A terminal closed under a running gateway (the window of `npm run local`) fails each later write
  // to it with EIO, and an unheeded stream error would end the process in the middle of its stop,
  // the queue left unclosed: those lines are lost, the stop goes on.
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`harbor-gateway: ${error.message}\n`);
    process.exit(EXIT_CONFIG);
  }
  const logger = createLogger(config.logLevel);
  process.on('uncaughtException', (error) => {
    logger.fatal({ event: 'crash', err: error }, 'uncaught exception; exiting (queued readings are safe on disk)');
    process.exit(1);
  });
  process.on('unhandledRejection', (reason) => {
    logger.fatal({ event: 'crash', err: reason }, 'unhandled rejection; exiting (queued readings are safe on disk)');
    process.exit(1);
  });

  // Heard from before the gateway starts: its start line goes out before startGateway returns, and
  // a SIGTERM sent on seeing it (Ctrl-C under `npm run local`) would otherwise meet Node's default
  // action and end the process at once, the queue unclosed. A signal during the start stops the
  // gateway as soon as it has started.
  let gateway: Gateway | undefined;
  let stopAfterStart: NodeJS.Signals | undefined;
  let signals = 0;
  const stop = (running: Gateway, signal: NodeJS.Signals): void => {
    running.stop({ signal }).then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ event: 'stop_failed', err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    if (++signals > 1) {
      logger.warn({ event: 'forced_exit', signal }, 'second signal: exiting now; committed readings stay queued');
      process.exit(1);
    }
    logger.info({ event: 'signal', signal }, 'shutting down');
    if (gateway === undefined) stopAfterStart = signal;
    else stop(gateway, signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // SIGHUP re-reads the device keys, the catalogue and the certificate; connections and the queue
  // are untouched. During the start there is nothing to re-read: the start reads them all.
  process.on('SIGHUP', () => {
    if (gateway === undefined) return;
    gateway.keys.reload();
    void gateway.catalogue.reload().then(() => gateway?.catalogue.publish());
    try {
      gateway.reloadCertificate();
    } catch (error) {
      logger.error({ event: 'certificate_reload_failed', err: error }, 'could not re-read the TLS certificate; serving the previous one');
    }
  });
  try {
    gateway = await startGateway(config, logger, { deliveryScript: entry });
  } catch (error) {
    if (error instanceof CertificateError || error instanceof ConfigError) {
      process.stderr.write(`harbor-gateway: ${error.message}\n`);
      process.exit(EXIT_CONFIG);
    }
    // Another gateway owns DATA_DIR: its own exit status, which the unit does not restart on either.
    if (error instanceof DataDirInUseError) {
      process.stderr.write(`harbor-gateway: ${error.message}\n`);
      process.exit(EXIT_IN_USE);
    }
    logger.fatal({ event: 'start_failed', err: error }, 'could not start the gateway');
    process.exit(error instanceof QueueFormatError ? EXIT_CONFIG : 1);
  }
  if (stopAfterStart !== undefined) stop(gateway, stopAfterStart);
}

/** Where a command writes: the process's own stdout and stderr. */
const TERMINAL = { out: (text: string) => process.stdout.write(text), err: (text: string) => process.stderr.write(text) };

/** Standard input as text, to its end. */
async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Runs one command line; `args` are the arguments after the program name, `entry` the bundle's entry file. */
export async function runCli(args: string[], entry: URL): Promise<void> {
  const command = args[0] ?? 'serve';
  switch (command) {
    case 'serve':
      await serve(entry);
      break;
    // Each command's module is loaded by its command alone: serve holds none of them.
    case 'dead-letters': {
      const { deadLettersCommand } = await import('./dead-letters-command.js');
      process.exitCode = await deadLettersCommand(args.slice(1), process.env, TERMINAL);
      break;
    }
    case 'keys': {
      const { keysCommand } = await import('./keys-command.js');
      process.exitCode = await keysCommand(args.slice(1), process.env, TERMINAL);
      break;
    }
    case 'audit': {
      const { auditCommand } = await import('./audit-command.js');
      process.exitCode = await auditCommand(args.slice(1), process.env, TERMINAL, readStdin);
      break;
    }
    case 'site-claims': {
      const { siteClaimsCommand } = await import('./site-claims-command.js');
      process.exitCode = siteClaimsCommand(args.slice(1), process.env, TERMINAL);
      break;
    }
    case 'queue': {
      const { queueCommand } = await import('./queue-command.js');
      process.exitCode = queueCommand(args.slice(1), TERMINAL);
      break;
    }
    case 'tls-certificate': {
      const { tlsCertificateCommand } = await import('./tls-certificate-command.js');
      process.exitCode = await tlsCertificateCommand(args.slice(1), process.env, TERMINAL);
      break;
    }
    case 'catalogue': {
      const { catalogueCommand } = await import('./catalogue-command.js');
      process.exitCode = catalogueCommand(args.slice(1), process.env, TERMINAL);
      break;
    }
    case 'check-config': {
      const check = checkConfig();
      if (check.valid) {
        process.stdout.write(`${check.summary}\n`);
        for (const notice of check.notices) process.stderr.write(`harbor-gateway: warning: ${notice}\n`);
      } else {
        process.stderr.write(`harbor-gateway: ${new ConfigError(check.problems).message}\n`);
        process.exitCode = EXIT_CONFIG;
      }
      break;
    }
    case 'config-table':
      process.stdout.write(args[1] === '--document' ? renderConfigReference() : `${renderConfigTable()}\n`);
      break;
    case 'version':
    case '--version':
      process.stdout.write(`${VERSION}\n`);
      break;
    case 'help':
    case '--help':
      process.stdout.write(USAGE);
      break;
    default:
      process.stderr.write(`unknown command: ${command}\n\n${USAGE}`);
      process.exit(64);
  }
}
