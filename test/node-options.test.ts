import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GATEWAY_NODE_OPTIONS } from '../scripts/lib/node-options.mjs';

const root = join(import.meta.dirname, '..');

describe('V8 heap settings', () => {
  it('are the same wherever the gateway runs: systemd unit, container image, local run, benchmarks', () => {
    expect(readFileSync(join(root, 'systemd', 'harbor-gateway.service'), 'utf8')).toContain(`"NODE_OPTIONS=${GATEWAY_NODE_OPTIONS}"`);
    expect(readFileSync(join(root, 'Dockerfile'), 'utf8')).toContain(`NODE_OPTIONS="${GATEWAY_NODE_OPTIONS}"`);
    expect(readFileSync(join(root, 'scripts', 'run-local.mjs'), 'utf8')).toContain('NODE_OPTIONS: GATEWAY_NODE_OPTIONS');
    // Tests, fault runs and benchmarks start it through this one helper.
    expect(readFileSync(join(root, 'scripts', 'lib', 'gateway-process.mjs'), 'utf8')).toContain('NODE_OPTIONS: GATEWAY_NODE_OPTIONS');
  });
});
