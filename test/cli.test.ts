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

  it('prints its version, usage and the configuration table', async () => {
    expect((await gateway(['version'], {})).stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
    expect((await gateway(['help'], {})).stdout).toMatch(/check-config/);
    expect((await gateway(['config-table'], {})).stdout).toMatch(/^\| Variable \| Default \| Meaning \|/);
    expect((await gateway(['config-table', '--document'], {})).stdout).toMatch(/^# Configuration\n[\s\S]*\n\| `GATEWAY_ENV` \|/);
    await expect(gateway(['bogus'], {})).rejects.toMatchObject({ code: 64 });
  });
});
