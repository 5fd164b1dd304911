import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, inject, it } from 'vitest';

const run = promisify(execFile);
const gateway = (args: string[], env: Record<string, string>) =>
  run(process.execPath, [inject('bundlePath'), ...args], { env: { PATH: process.env['PATH'] ?? '', ...env } });

describe('harbor-gateway command line', () => {
  it('check-config validates as serve would, without serving', async () => {
    const good = await gateway(['check-config'], { GATEWAY_ENV: 'production', API_KEY: 'a-long-enough-production-key' });
    expect(good.stdout).toMatch(/^configuration valid \(production, API key from environment\)/);
    const bad = gateway(['check-config'], { GATEWAY_ENV: 'production', API_KEY: 'harbor-dev-key', PORT: 'x' });
    await expect(bad).rejects.toMatchObject({
      code: 78,
      stderr: expect.stringMatching(/PORT must be a whole number[\s\S]*API_KEY is a shipped test default/),
    });
    // A site with no sink left at all is refused here too, not only when it starts.
    await expect(gateway(['check-config'], { LOCAL_QUESTDB: 'off' })).rejects.toMatchObject({
      code: 78,
      stderr: expect.stringMatching(/LOCAL_QUESTDB=off leaves the gateway without a sink/),
    });
  });

  it('check-config says which site id a forwarding gateway fell back to, and refuses a host name many machines share', async () => {
    const forwarding = { UPSTREAM_URL: 'https://central.example:8443/api/v2/ingest/batch', UPSTREAM_API_KEY: 'central-key-0123456789' };
    // As on a fresh Raspberry Pi OS card: its host name is that of every other one.
    const onHost = (name: string, env: Record<string, string>) =>
      run(
        'unshare',
        [
          '--map-root-user',
          '--uts',
          'sh',
          '-c',
          `hostname ${name} && exec "$@"`,
          'sh',
          process.execPath,
          inject('bundlePath'),
          'check-config',
        ],
        {
          env: { PATH: process.env['PATH'] ?? '', ...env },
        },
      );
    await expect(onHost('raspberrypi', forwarding)).rejects.toMatchObject({
      code: 78,
      stderr: expect.stringMatching(
        /SITE_ID is not set and the site id falls back to the host name "raspberrypi", a name many machines share: set SITE_ID/,
      ),
    });
    const named = await onHost('pier-7-board', forwarding);
    expect(named.stdout).toMatch(/^configuration valid/);
    expect(named.stderr).toMatch(/warning: SITE_ID is not set: this site forwards its readings as the host name "pier-7-board"/);
    await expect(gateway(['check-config'], { ...forwarding, GATEWAY_NAME: 'gateway' })).rejects.toMatchObject({
      code: 78,
      stderr: expect.stringMatching(/falls back to the gateway's name \(GATEWAY_NAME\) "gateway", a name many machines share/),
    });
    // Set, or not forwarding: nothing to say.
    const explicit = await onHost('raspberrypi', { ...forwarding, SITE_ID: 'pier-7' });
    expect(explicit.stderr).toBe('');
    const standalone = await onHost('raspberrypi', {});
    expect(standalone.stdout).toMatch(/^configuration valid/);
    expect(standalone.stderr).toBe('');
  });

  it('prints its version, usage and the configuration table', async () => {
    expect((await gateway(['version'], {})).stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
    expect((await gateway(['help'], {})).stdout).toMatch(/check-config/);
    expect((await gateway(['config-table'], {})).stdout).toMatch(/^\| Variable \| Default \| Meaning \|/);
    expect((await gateway(['config-table', '--document'], {})).stdout).toMatch(/^# Configuration\n[\s\S]*\n\| `GATEWAY_ENV` \|/);
    await expect(gateway(['bogus'], {})).rejects.toMatchObject({ code: 64 });
  });
});
