// A central gateway's console shows a site two gateway instances forward under and releases its
// claim, behind the session's form token and a confirmation; the next instance then owns the site.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsoleClient } from './support/console-client.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';

const PASSWORD = 'console-claims-password-0123';
const OWNER = 'k3xq7aenm2pz4d5w';
const CLONE = 'b7yq2meowt5uc3ra';

let centre: TestGateway;
beforeAll(async () => {
  centre = await startTestGateway({ SITE_ID: 'centre', CONSOLE_PASSWORD: PASSWORD });
});
afterAll(() => centre.stop());

/** A batch forwarded as a site gateway sends it: its site and its instance beside the body. */
const forward = (instance: string) =>
  centre.post('/api/v2/ingest/batch', [{ ship_id: 'pump-1', cargo_id: 'pressure', value: 1 }], {
    'x-harbor-site': 'pier%207',
    'x-harbor-instance': instance,
  });

describe("the console's site claims", () => {
  it('lists a site two gateways forward under, and releases its claim after a confirmation', async () => {
    expect((await forward(OWNER)).status).toBe(200);
    const refused = await forward(CLONE);
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({ details: [{ loc: ['header', 'x-harbor-instance'], type: 'site_claimed' }] });

    const client = new ConsoleClient(`https://127.0.0.1:${centre.gateway.httpsPort}`);
    expect((await client.login(PASSWORD)).status).toBe(303);
    const overview = await client.request('/console');
    expect(overview.html).toContain('Sites forwarded by two gateways');
    expect(overview.html).toContain(OWNER);
    expect(overview.html).toContain(CLONE);
    expect(overview.html).toMatch(/site &quot;pier 7&quot; forwarded by two gateways|site "pier 7" forwarded by two gateways/);

    // Without the form token nothing happens; with it, a confirmation first.
    expect((await client.post('/console/site-claims/release', [['site', 'pier 7']], null)).status).toBe(403);
    const confirm = await client.post('/console/site-claims/release', [['site', 'pier 7']]);
    expect(confirm.status).toBe(200);
    expect(confirm.html).toContain('Release the claim of site');
    expect((await forward(CLONE)).status).toBe(409);
    const released = await client.post('/console/site-claims/release', [
      ['site', 'pier 7'],
      ['confirm', 'yes'],
    ]);
    expect(released.status).toBe(303);
    expect(released.location).toBe('/console');
    // The page says so once, from the session; a link cannot make it say so.
    expect((await client.request('/console')).html).toMatch(/The claim of site (&quot;|")pier 7(&quot;|") was released/);
    expect((await client.request('/console')).html).not.toContain('was released');
    expect((await client.request('/console?released=pier%207')).html).not.toContain('was released');

    // In the audit trail, with the instance that had the site.
    const audit = await client.request('/console/audit');
    expect(audit.html).toContain('Site claim released');
    expect(audit.html).toContain(`from instance ${OWNER}`);

    // The next instance to forward under the site owns it.
    expect((await forward(CLONE)).status).toBe(200);
    expect((await forward(OWNER)).status).toBe(409);
  });
});
