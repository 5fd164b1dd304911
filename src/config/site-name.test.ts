import { describe, expect, it } from 'vitest';
import { forwardingSiteRefusal, siteFallbackNotice, siteNameOf } from './site-name.js';

describe('the site id', () => {
  it('is SITE_ID, else the gateway name, else the host name, and says which', () => {
    expect(siteNameOf('pier 7', 'gw', 'host')).toEqual({ name: 'pier 7', source: 'SITE_ID' });
    expect(siteNameOf(undefined, ' north\u0007 gate ', 'host')).toEqual({ name: 'north gate', source: 'GATEWAY_NAME' });
    expect(siteNameOf(undefined, '\u0000', 'pier-7-board')).toEqual({ name: 'pier-7-board', source: 'host name' });
    expect(siteNameOf(undefined, undefined, 'x'.repeat(200)).name).toHaveLength(128);
  });

  it('may not fall back, for a gateway that forwards, to a name many machines share or a container makes anew', () => {
    for (const host of ['raspberrypi', 'RaspberryPi', 'localhost', 'ubuntu', 'debian', 'dietpi', 'armbian', '3f2a9c1b7d4e']) {
      expect(forwardingSiteRefusal(siteNameOf(undefined, undefined, host)), host).toMatch(/^SITE_ID is not set .* set SITE_ID/);
    }
    expect(forwardingSiteRefusal(siteNameOf(undefined, 'gateway', 'pier-7-board'))).toMatch(/GATEWAY_NAME\) "gateway"/);
    expect(forwardingSiteRefusal(siteNameOf(undefined, undefined, 'pier-7-board'))).toBeUndefined();
    expect(forwardingSiteRefusal(siteNameOf('raspberrypi', undefined, 'raspberrypi'))).toBeUndefined();
  });

  it('fallen back to is named, set is not', () => {
    expect(siteFallbackNotice(siteNameOf(undefined, undefined, 'pier-7-board'))).toMatch(/as the host name "pier-7-board"/);
    expect(siteFallbackNotice(siteNameOf('pier-7', undefined, 'pier-7-board'))).toBeUndefined();
  });
});
