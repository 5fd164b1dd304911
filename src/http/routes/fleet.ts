import type { Hono, MiddlewareHandler } from 'hono';
import { fleetReportSchema, type FleetReport } from '../../health/fleet-report.js';
import { siteOfRequest } from '../../keys/site-binding.js';
import { encodeSite } from '../../reading/site-id.js';
import { toReadingIssues } from '../../reading/reading-issues.js';
import { readJsonBody } from '../body.js';
import { principalOf } from '../middleware/api-key/index.js';
import { problem } from '../problem-details.js';
import { type ClaimChecker, siteClaimRefusal } from '../site-claim-refusal.js';

/** Where site gateways send their health, beside the ingest paths and behind the same keys. */
export const FLEET_REPORT_PATH = '/api/v2/fleet/report';

/** Reports are small: a site with a few sinks sends about a kilobyte. */
const MAX_REPORT_BYTES = 64 * 1024;

export interface FleetDeps {
  /** Stores a site's report with the centre's receipt time; undefined when this gateway has no QuestDB to keep it in. */
  recordFleetReport: ((report: FleetReport, receivedMs: number) => Promise<{ ok: true } | { ok: false; message: string }>) | undefined;
  siteId: string;
  /** The centre's site claims: a report of an instance whose site another owns is refused as its readings are. */
  claims?: ClaimChecker;
}

/**
 * A site's health report (see health/fleet-report.ts), written into this gateway's QuestDB for
 * the Fleet dashboard. A key bound to a site reports as that site only, as it writes readings.
 */
export function registerFleetRoutes(app: Hono, deps: FleetDeps, requireApiKey: MiddlewareHandler): void {
  app.post(FLEET_REPORT_PATH, requireApiKey, async (c) => {
    const receivedMs = Date.now();
    const body = await readJsonBody(c, MAX_REPORT_BYTES);
    if (!body.ok) return problem(c, body.status, body.message, body.details);
    const parsed = fleetReportSchema.safeParse(body.json, { reportInput: true });
    if (!parsed.success) return problem(c, 422, 'Body is not a site health report', toReadingIssues(parsed.error.issues, ['body']));
    const origin = siteOfRequest(principalOf(c), encodeSite(parsed.data.site), deps.siteId);
    if (!origin.ok) return problem(c, origin.status, origin.message, origin.details);
    const instance = parsed.data.instance;
    if (instance !== undefined && deps.claims !== undefined) {
      const refusal = siteClaimRefusal(c, deps.claims, origin.site ?? deps.siteId, instance, parsed.data.gateway);
      if (refusal !== undefined) return refusal;
    }
    if (deps.recordFleetReport === undefined) {
      return problem(c, 404, 'This gateway keeps no site reports: it has no QuestDB', [
        { loc: ['path'], msg: 'No QuestDB sink', type: 'not_found' },
      ]);
    }
    const recorded = await deps.recordFleetReport(parsed.data, receivedMs);
    if (!recorded.ok) {
      return problem(c, 503, `The site report could not be stored: ${recorded.message.slice(0, 200)}`, [], { 'Retry-After': '10' });
    }
    return c.body(null, 204);
  });
}
