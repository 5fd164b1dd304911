import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { unitEnvironment, unitWords } from '../appliance/board/unit.mjs';
import { startGatewayProcess } from '../scripts/lib/gateway-process.mjs';
import { GATEWAY_GLIBC_TUNABLES, GATEWAY_NODE_OPTIONS } from '../scripts/lib/node-options.mjs';

const root = join(import.meta.dirname, '..');

// Stands in for the bundle: reports the settings its V8 got, as the gateway's start line would.
const PROBE = `import v8 from 'node:v8';
console.log(JSON.stringify({ event: 'started', address: '127.0.0.1:1', nodeOptions: process.env.NODE_OPTIONS,
  glibcTunables: process.env.GLIBC_TUNABLES,
  heapLimitMb: v8.getHeapStatistics().heap_size_limit / 2 ** 20 }));
setInterval(() => {}, 1000);
`;

/** The variables a Dockerfile's ENV instructions set. */
function dockerEnvironment(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const instruction of text.replace(/\\\n/g, ' ').split('\n')) {
    const [keyword, ...words] = unitWords(instruction);
    if (keyword !== 'ENV') continue;
    for (const word of words) {
      const eq = word.indexOf('=');
      if (eq > 0) env[word.slice(0, eq)] = word.slice(eq + 1);
    }
  }
  return env;
}

describe('V8 heap and malloc settings', () => {
  it('cap the heap and fix the malloc threshold of the gateway that tests, fault runs and benchmarks start', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'harbor-heap-'));
    try {
      writeFileSync(join(dir, 'probe.mjs'), PROBE);
      const probe = await startGatewayProcess({ bundle: join(dir, 'probe.mjs'), env: {} });
      probe.child.kill('SIGKILL');
      await probe.exited;
      const started = probe.logs.find((line) => line['event'] === 'started')!;
      expect(started['nodeOptions']).toBe(GATEWAY_NODE_OPTIONS);
      expect(started['glibcTunables']).toBe(GATEWAY_GLIBC_TUNABLES);
      // 96 MB of old generation and three 8 MB semi-spaces; V8's own default is gigabytes.
      expect(started['heapLimitMb']).toBeLessThan(160);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('are those of the systemd unit and the container image', () => {
    expect(unitEnvironment(readFileSync(join(root, 'systemd', 'harbor-gateway.service'), 'utf8'))['NODE_OPTIONS']).toBe(
      GATEWAY_NODE_OPTIONS,
    );
    expect(dockerEnvironment(readFileSync(join(root, 'Dockerfile'), 'utf8'))['NODE_OPTIONS']).toBe(GATEWAY_NODE_OPTIONS);
    expect(unitEnvironment(readFileSync(join(root, 'systemd', 'harbor-gateway.service'), 'utf8'))['GLIBC_TUNABLES']).toBe(
      GATEWAY_GLIBC_TUNABLES,
    );
    expect(dockerEnvironment(readFileSync(join(root, 'Dockerfile'), 'utf8'))['GLIBC_TUNABLES']).toBe(GATEWAY_GLIBC_TUNABLES);
  });
});
