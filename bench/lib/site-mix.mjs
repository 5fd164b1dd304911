// A site's readings as its devices send them, the same on every run: several ships, each with its
// reefer containers and engine sensors posting a batch, and its GPS posting a fix, every few seconds.

const SHIPS = ['mv-aurora', 'mv-baltic-trader', 'mv-coral-bay', 'mv-dover-star', 'mv-elbe-pioneer', 'mv-fjord-queen'];
/** Reefer containers per ship, each a cargo id of its own (an ISO 6346 number and what is measured). */
const REEFERS = 8;

/** A small seeded generator (mulberry32): the same sensor noise on every run. */
function random(/** @type {number} */ seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const round = (/** @type {number} */ value, /** @type {number} */ digits) => Number(value.toFixed(digits));

/**
 * Each ship's sensors and its position, stepped once a tick.
 * @param {number} ships
 */
function fleet(ships) {
  const next = random(20261128);
  return SHIPS.slice(0, ships).map((ship, s) => ({
    ship,
    reefers: Array.from({ length: REEFERS }, (_, r) => ({
      cargo: `${['MSKU', 'TGHU', 'CAIU', 'SZLU'][r % 4]}${String(7_000_000 + s * 1000 + r * 37).padStart(7, '0')}_temp_c`,
      setpoint: r % 3 === 0 ? -18 : r % 3 === 1 ? 4 : 13,
      value: 0,
    })),
    latitude: 53.5 + s * 0.7,
    longitude: 8.2 + s * 0.9,
    course: (s * 47) % 360,
    speed: 11 + s,
    rpm: 88 + s,
    next,
  }));
}

/**
 * The requests a site's devices make over `ticks` rounds `tickMs` apart from `startMs`: per ship
 * and round, a batch of its reefer temperatures (two decimals) and engine figures, and a GPS fix
 * (six decimals, speed and course). Readings per round: ships × (reefers + 2 + 4).
 * @param {{ ships: number, ticks: number, tickMs: number, startMs: number }} options
 * @returns {Generator<{ path: string, body: string, readings: number }>}
 */
export function* siteRequests({ ships, ticks, tickMs, startMs }) {
  const state = fleet(ships);
  for (let tick = 0; tick < ticks; tick++) {
    for (const [s, ship] of state.entries()) {
      const next = ship.next;
      // Each ship's devices have their own phase within the round, to the millisecond.
      const time = new Date(startMs + tick * tickMs + s * 731 + Math.floor(next() * 40)).toISOString();
      const readings = ship.reefers.map((reefer) => ({
        time,
        ship_id: ship.ship,
        cargo_id: reefer.cargo,
        value: round(reefer.setpoint + (next() - 0.5) * 0.6, 2),
      }));
      ship.rpm = Math.min(96, Math.max(82, ship.rpm + Math.round((next() - 0.5) * 2)));
      readings.push(
        { time, ship_id: ship.ship, cargo_id: 'main_engine_rpm', value: ship.rpm },
        { time, ship_id: ship.ship, cargo_id: 'fuel_flow_lph', value: round(410 + ship.rpm * 2 + next() * 15, 1) },
      );
      yield { path: '/api/v2/ingest/batch', body: JSON.stringify(readings), readings: readings.length };
      ship.course = (ship.course + (next() - 0.5) * 2 + 360) % 360;
      ship.speed = Math.max(0, ship.speed + (next() - 0.5) * 0.2);
      const distance = (ship.speed * tickMs) / 3_600_000 / 60;
      ship.latitude += distance * Math.cos((ship.course * Math.PI) / 180);
      ship.longitude += distance * Math.sin((ship.course * Math.PI) / 180);
      const fix = {
        ship_id: ship.ship,
        time,
        latitude: round(ship.latitude, 6),
        longitude: round(ship.longitude, 6),
        speed_kn: round(ship.speed, 1),
        course_deg: round(ship.course, 1),
      };
      yield { path: '/api/v2/ingest/gps', body: JSON.stringify(fix), readings: 4 };
    }
  }
}

export const READINGS_PER_SHIP_AND_TICK = REEFERS + 2 + 4;
export const MAX_SHIPS = SHIPS.length;
