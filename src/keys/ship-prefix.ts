import { MAX_REPORTED_PROBLEMS } from '../reading/parse-readings.js';
import type { Loc, ReadingIssue } from '../reading/reading-issues.js';
import type { Reading } from '../reading/reading-schema.js';
import type { Principal } from './key-store.js';

/**
 * The readings a key limited to a ship_id prefix may not send, one detail per place in the body
 * (a GPS fix or TTN message yields several readings from one ship id); undefined when all are allowed.
 */
export function foreignShips(
  principal: Principal,
  readings: readonly Reading[],
  shipLoc: (index: number) => Loc,
): { message: string; details: ReadingIssue[] } | undefined {
  const prefix = principal.shipPrefix;
  if (prefix === undefined) return undefined;
  const details: ReadingIssue[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < readings.length && details.length < MAX_REPORTED_PROBLEMS; i++) {
    const ship = readings[i]!.shipId;
    if (ship.startsWith(prefix)) continue;
    const loc = shipLoc(i);
    const where = JSON.stringify(loc);
    if (seen.has(where)) continue;
    seen.add(where);
    details.push({ loc, msg: `Ship ${JSON.stringify(ship)} is not allowed for the key ${principal.name}`, type: 'ship_not_allowed' });
  }
  if (details.length === 0) return undefined;
  return { message: `The key ${principal.name} may only send readings of ships starting with ${JSON.stringify(prefix)}`, details };
}
