import { describe, expect, it } from 'vitest';
import { fleetReportSchema, type FleetReport } from './fleet-report.js';
import { encodeFleetReport, encodeSiteConflicts } from './fleet-rows.js';

const report: FleetReport = {
  site: 'Hafen Süd, pier 7',
  gateway: 'gw 1',
  version: '0.5.0',
  sentAt: '2026-11-25T12:00:00.250Z',
  uptimeSeconds: 3600,
  state: 'buffering',
  stateText: 'buffering — upstream central.example.com:8443 unreachable for 12 min, queue 60 % full',
  ready: true,
  clockSynchronized: false,
  queue: { readings: 1200, bytes: 60_000, maxBytes: 100_000, oldestAgeSeconds: 725.5 },
  deadLetters: 2,
  acceptedReadings: 50_000,
  sinks: [
    {
      sink: 'questdb',
      state: 'up to date',
      backlogReadings: 0,
      oldestAgeSeconds: null,
      deliveredReadings: 50_000,
      failedDeliveries: 0,
      deadLettered: 2,
      droppedReadings: 0,
    },
    {
      sink: 'upstream',
      state: 'failing',
      backlogReadings: 1200,
      oldestAgeSeconds: 725.5,
      deliveredReadings: 48_800,
      failedDeliveries: 80,
      deadLettered: 0,
      droppedReadings: 0,
    },
  ],
};

describe("a site's report to the centre", () => {
  it('is what the centre checks it against, and a newer site may add fields', () => {
    expect(fleetReportSchema.parse(report)).toEqual(report);
    expect(fleetReportSchema.parse({ ...report, comesLater: 1 })).toEqual(report);
    expect(fleetReportSchema.safeParse({ ...report, site: 'bell\u0007' }).success).toBe(false);
    expect(fleetReportSchema.safeParse({ ...report, sentAt: 'yesterday' }).success).toBe(false);
    expect(fleetReportSchema.safeParse({ ...report, sinks: Array.from({ length: 33 }, () => report.sinks[0]) }).success).toBe(false);
  });

  it("becomes a site row and a row per sink, at the centre's receipt time or the server's", () => {
    expect(encodeFleetReport(report, 1_795_780_800_000).toString()).toBe(
      'fleet_site_health,site=Hafen\\ Süd\\,\\ pier\\ 7,gateway=gw\\ 1,version=0.5.0,state=buffering,clock=unsynchronised ' +
        'state_text="buffering — upstream central.example.com:8443 unreachable for 12 min, queue 60 % full",ready=t,' +
        'site_time=1795608000250000t,uptime_s=3600i,queue_readings=1200i,queue_bytes=60000i,queue_max_bytes=100000i,dead_letters=2i,' +
        'accepted_readings=50000i,oldest_age_s=725.5 1795780800000000000n\n' +
        'fleet_sink_health,site=Hafen\\ Süd\\,\\ pier\\ 7,sink=questdb,state=up\\ to\\ date backlog_readings=0i,delivered_readings=50000i,failed_deliveries=0i,dead_lettered=2i,dropped_readings=0i 1795780800000000000n\n' +
        'fleet_sink_health,site=Hafen\\ Süd\\,\\ pier\\ 7,sink=upstream,state=failing backlog_readings=1200i,delivered_readings=48800i,failed_deliveries=80i,dead_lettered=0i,dropped_readings=0i,oldest_age_s=725.5 1795780800000000000n\n',
    );
    expect(encodeFleetReport({ ...report, clockSynchronized: null, sinks: [] }, undefined).toString()).toMatch(
      /,state=buffering [^\n]*oldest_age_s=725\.5\n$/,
    );
    expect(encodeFleetReport({ ...report, instance: 'k3xq7aenm2pz4d5w', sinks: [] }, undefined).toString()).toMatch(
      /^fleet_site_health,site=Hafen\\ Süd\\,\\ pier\\ 7,instance=k3xq7aenm2pz4d5w,gateway=gw\\ 1,/,
    );
  });

  it('of a site two instances claim is a conflict row with the owner and the claimant', () => {
    const row = {
      site: 'pier 7',
      owner: { instance: 'owner1', gateway: 'pier 7 gw' },
      instance: 'clone1',
      gateway: null,
      firstMs: 1_795_780_000_000,
      refusedRequests: 12,
    };
    expect(encodeSiteConflicts([row], 1_795_780_800_000).toString()).toBe(
      'fleet_site_conflicts,site=pier\\ 7,owner_instance=owner1,owner_gateway=pier\\ 7\\ gw,claimant_instance=clone1 ' +
        'refused_since=1795780000000000t,refused_requests=12i 1795780800000000000n\n',
    );
  });
});
