import type { Logger } from 'pino';
import { describeGatewayState, OutageWatch } from './gateway-state.js';
import { buildFleetReport, type FleetReport } from './fleet-report.js';
import type { GatewaySnapshot } from './snapshot.js';

/** Where a site's report goes: the central gateway (over the upstream), a central QuestDB. */
export interface FleetDestination {
  readonly name: string;
  send(report: FleetReport): Promise<{ ok: true } | { ok: false; message: string }>;
}

/**
 * Sends the site's health to the centre at every report interval through the sinks it already
 * has, bypassing the queue: a report is about now, and must not wait behind the backlog it reports.
 * A report that does not arrive is not sent again; the next one follows.
 */
export class FleetReporter {
  readonly #outage = new OutageWatch();
  readonly #failing = new Set<string>();

  constructor(
    private readonly destinations: readonly FleetDestination[],
    private readonly identity: { site: string; instance: string; gateway: string },
    private readonly log: Logger,
  ) {}

  async report(snapshot: GatewaySnapshot, now = Date.now()): Promise<void> {
    const state = describeGatewayState(snapshot, this.#outage.observe(snapshot, now), now);
    const report = buildFleetReport(snapshot, state, this.identity, now);
    await Promise.all(
      this.destinations.map(async (destination) => {
        const sent = await destination.send(report);
        // One line when reports stop arriving and one when they arrive again, not one per report.
        if (!sent.ok && !this.#failing.has(destination.name)) {
          this.#failing.add(destination.name);
          this.log.warn(
            { event: 'fleet_report_failed', to: destination.name, error: sent.message },
            'site report not delivered to the centre',
          );
        } else if (sent.ok && this.#failing.delete(destination.name)) {
          this.log.info({ event: 'fleet_report_delivered', to: destination.name }, 'site reports reach the centre again');
        }
      }),
    );
  }
}
