import type { Context, Hono } from 'hono';
import type { Logger } from 'pino';
import type { Catalogue } from '../catalogue/catalogue.js';
import { describeGatewayState, OutageWatch, type GatewayState } from '../health/gateway-state.js';
import { takeSnapshot, type GatewaySnapshot, type SiteClaimsSource, type SinkDescription } from '../health/snapshot.js';
import type { AuditTrail } from '../audit/audit-trail.js';
import type { KeyStore, Principal } from '../keys/key-store.js';
import type { QueueWriter } from '../queue/queue-writer.js';
import type { GatewayStats } from '../stats.js';
import { CounterMinutes } from './activity/minute-counts.js';
import { RefusalTable } from './activity/refusal-table.js';
import { CargoHistorySource, type ReadingsStore } from './cargo-history.js';
import { SAVE_EVERY_MS, readShipFile, shipFile, writeShipFile } from './activity/ship-file.js';
import { ShipTable, type SavedShips } from './activity/ship-table.js';
import { ConsolePassword } from './auth/password.js';
import { LoginThrottle } from './auth/login-throttle.js';
import { RequestRate } from './auth/request-rate.js';
import { SessionStore } from './auth/sessions.js';
import type { CertificateFacts } from './pages/settings.js';
import { peerAddress } from './request-facts.js';
import { mountConsole } from './routes/mount.js';
import { type UpdateInstaller, updateInstaller as systemUpdateInstaller } from './update-bundle.js';

/** The refusal's message and its first detail: "…: body.value: Input should be a number". */
function describeProblem(problem: { message: string; details: { loc: (string | number)[]; msg: string }[] }): string {
  const first = problem.details[0];
  return first === undefined ? problem.message : `${problem.message}: ${first.loc.join('.')}: ${first.msg}`;
}

const DEFAULT_LOGIN_ATTEMPTS_PER_MINUTE = 30;
/** Console requests without a session a second, and at once: a person's browser needs a handful per page. */
const UNAUTHENTICATED_PER_SECOND = 20;
const UNAUTHENTICATED_BURST = 40;

/** How often the console samples the accepted-readings counter and watches for delivery outages. */
const SAMPLE_MS = 10_000;

export interface ConsoleDeps {
  queue: QueueWriter;
  stats: GatewayStats;
  keys: KeyStore;
  /** The wrong-key delay's counts (the HTTP layer's FailureDelay). */
  failureDelay: { readonly total: number; readonly tracked: number };
  isStopping: () => boolean;
  version: string;
  /** The certificate HTTPS serves now (never its key). */
  certificate: () => CertificateFacts & { pem: string };
  sinks: readonly SinkDescription[];
  /** Wakes the sinks after dead letters were re-queued. */
  delivery: { notifyAppended(): void };
  password: string | undefined;
  metricsToken: string | undefined;
  /** Login attempts checked per minute, all sources but loopback together (`LOGIN_ATTEMPTS_PER_MINUTE`). */
  loginAttemptsPerMinute?: number;
  /** The environment the gateway started with: the settings page shows it (secrets masked) and checks it. */
  env: Record<string, string | undefined>;
  /** Where logins, key changes, dead letters and updates are recorded; the audit page reads it. */
  audit: Pick<AuditTrail, 'record' | 'latest' | 'counts'>;
  /** Takes update bundles uploaded in the console; by default the system's (the appliance's), if it has one. */
  updateInstaller?: UpdateInstaller | undefined;
  /** This gateway's site id and instance. */
  identity?: { site: string; instance: string };
  /** At a centre: the sites gateways forward here, and the release of one's claim (claims/site-claims.ts). */
  siteClaims?: () => SiteClaimsSource;
  releaseSiteClaim?: (site: string) => { site: string; instance: string; gateway: string | null } | undefined;
  /** The site's catalogue as loaded now: names ships and cargo, and keeps named ships on the Devices page. */
  catalogue: { readonly catalogue: Catalogue };
  logger: Logger;
  /** `HOST`: the address the servers are bound to, which decides where devices can reach them. */
  listenHost: string;
  /** The local QuestDB the ships' pages chart their cargo from; undefined when the gateway writes to none. */
  readings: ReadingsStore | undefined;
}

/**
 * The console's state: what ingest told it (ships, refusals), readings per minute sampled from the
 * ingest counter, delivery outages watched as the health rows watch them, and the sessions. All of
 * it in memory and bounded; nothing here runs on an accepted request but `accepted()`.
 */
export class GatewayConsole {
  readonly ships: ShipTable;
  readonly history: CargoHistorySource;
  readonly refusals = new RefusalTable();
  readonly minutes: CounterMinutes;
  readonly sessions = new SessionStore();
  readonly throttle: LoginThrottle;
  /** Console and `/metrics` requests from the network without a session or token, all together. */
  readonly unauthenticated = new RequestRate(UNAUTHENTICATED_PER_SECOND, UNAUTHENTICATED_BURST);
  readonly password: ConsolePassword;
  /** The HTTPS port as listening (known once the servers are up). */
  httpsPort = 0;
  readonly #outage = new OutageWatch();
  #outageSince: number | undefined;
  #timer: NodeJS.Timeout | undefined;
  #saveTimer: NodeJS.Timeout | undefined;

  constructor(readonly deps: ConsoleDeps) {
    this.minutes = new CounterMinutes(() => deps.stats.acceptedReadings);
    this.password = new ConsolePassword(deps.password);
    this.throttle = new LoginThrottle(deps.loginAttemptsPerMinute ?? DEFAULT_LOGIN_ATTEMPTS_PER_MINUTE);
    this.ships = new ShipTable({ known: (shipId) => deps.catalogue.catalogue.ships.has(shipId), saved: this.#savedShips() });
    this.history = new CargoHistorySource(deps.readings);
  }

  /** Starts sampling until the gateway stops; the timers never keep the process alive. */
  start(httpsPort: number): void {
    this.httpsPort = httpsPort;
    this.#sample();
    this.#timer ??= setInterval(() => {
      if (this.deps.isStopping()) clearInterval(this.#timer);
      else this.#sample();
    }, SAMPLE_MS).unref();
    this.#saveTimer ??= setInterval(() => this.saveShips(), SAVE_EVERY_MS).unref();
  }

  /** Once ingest has stopped: the ships as they are now, for the next start. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    clearInterval(this.#saveTimer);
    this.saveShips();
    await this.history.close();
  }

  /** Writes the ships to the data directory when anything changed since the last write. */
  saveShips(): void {
    const changes = this.ships.takeChanges();
    if (changes === undefined) return;
    const path = shipFile(this.deps.queue.dataDir);
    try {
      writeShipFile(path, changes);
    } catch (error) {
      this.deps.logger.warn(
        { event: 'console_ships_not_saved', path, err: error },
        "could not save the console's ships; the next start lists only the ships seen after it",
      );
    }
  }

  #savedShips(): SavedShips | undefined {
    const path = shipFile(this.deps.queue.dataDir);
    try {
      return readShipFile(path);
    } catch (error) {
      this.deps.logger.warn(
        { event: 'console_ships_unreadable', path, error: (error as Error).message },
        "the console's saved ships cannot be read; the Devices page starts empty and the file is replaced at the next save",
      );
      return undefined;
    }
  }

  /** What takes an uploaded update bundle here; undefined where nothing does. */
  updateInstaller(): UpdateInstaller | undefined {
    return 'updateInstaller' in this.deps ? this.deps.updateInstaller : systemUpdateInstaller(this.deps.env);
  }

  /** Its pages and `/metrics`, on the gateway's app. */
  mount(app: Hono): void {
    mountConsole(app, this);
  }

  /** Ingest committed this queue record of `readings` readings for this key (called on the request; the ship table only notes it). */
  accepted(principal: Principal, record: string, readings: number, values?: Float64Array): void {
    this.ships.record(principal.name, record, readings, Date.now(), values);
  }

  /** Ingest answered with an error (called after the answer was made; accepted requests never come here). */
  refused(c: Context): void {
    if (!c.req.path.startsWith('/api/')) return;
    const status = c.res.status;
    const problem = c.get('problem');
    this.refusals.record(
      {
        status,
        key: c.get('principal')?.name,
        address: peerAddress(c),
        message: problem === undefined ? undefined : describeProblem(problem),
        missingKey: problem?.details[0]?.type === 'missing',
      },
      Date.now(),
    );
  }

  snapshot(now = Date.now()): GatewaySnapshot {
    const { queue, stats, keys, failureDelay, isStopping, version, sinks, certificate, identity, siteClaims } = this.deps;
    const tls = () => {
      const { source, fingerprintSha256, notAfter } = certificate();
      return { source, fingerprintSha256, notAfter };
    };
    return takeSnapshot({ queue, stats, keys, failureDelay, isStopping, version, sinks, tls, identity, siteClaims }, now);
  }

  /** The state in the words of `gateway_health`, with the outage timed from when this console first saw it. */
  state(snapshot: GatewaySnapshot, now = Date.now()): GatewayState {
    this.#outageSince = this.#outage.observe(snapshot, now);
    return describeGatewayState(snapshot, this.#outageSince, now);
  }

  #sample(): void {
    const now = Date.now();
    this.minutes.sample(now);
    this.state(this.snapshot(now), now);
  }
}
