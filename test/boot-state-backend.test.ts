// RAUC's boot loader backend on the board is boot-state.sh, which answers the reads without Node and
// hands the writes to boot-state.mjs: the two must answer alike on every state the boot partition
// can hold, as the board and U-Boot write it or damaged.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { backend } from '../appliance/board/boot-state.mjs';
import { tempDir } from './support/temp-dir.js';

const script = join(import.meta.dirname, '../appliance/board/boot-state.sh');

interface Answer {
  out: string;
  failed: boolean;
}

function shell(boot: string, cmdline: string, args: string[]): Answer {
  const run = spawnSync('sh', [script, ...args], {
    encoding: 'latin1',
    env: { ...process.env, HARBOR_BOOT_DIR: boot, HARBOR_CMDLINE_FILE: cmdline },
  });
  if (run.error) throw run.error;
  return { out: run.stdout.trim(), failed: run.status !== 0 };
}

function node(boot: string, cmdline: string, args: string[]): Answer {
  try {
    return { out: backend(args, { boot, cmdline: existsSync(cmdline) ? readFileSync(cmdline, 'latin1') : '' }), failed: false };
  } catch {
    return { out: '', failed: true };
  }
}

const slotValues = ['A', 'B', 'C', 'a', '', ' B ', 'B\t', '=B', '\u00ff', 'B\u00a0', '\vB\f'];
const countValues = ['0', '1', '2', 'ff', '-1', '-0', '+1', ' 1', '0x1', '0x', '0X0', '0x0x1', '1z', 'z1', '00', ''];
const keys = ['HARBOR_SLOT', 'HARBOR_TRY', 'HARBOR_TRY_LEFT', ' HARBOR_TRY ', 'HARBOR_TRY_LEFTX', 'OTHER', ''];
/** A line of the file: mostly its own keys with values of their kind, sometimes anything. */
const line = (own: string[]) =>
  fc
    .oneof(
      {
        arbitrary: fc
          .constantFrom(...own)
          .chain((key) =>
            fc.tuple(fc.constant(key), fc.constant('='), fc.constantFrom(...(key.endsWith('LEFT') ? countValues : slotValues))),
          ),
        weight: 4,
      },
      {
        arbitrary: fc.tuple(fc.constantFrom(...keys), fc.constantFrom('=', ' = ', ''), fc.constantFrom(...slotValues, ...countValues)),
        weight: 1,
      },
    )
    .map((parts) => parts.join(''));
/** A file as the board or U-Boot writes it (LF or CRLF, NUL padding), possibly cut short, or none. */
const envFile = (own: string[]) =>
  fc.option(
    fc
      .tuple(
        fc.array(line(own), { maxLength: 4 }),
        fc.constantFrom('\n', '\r\n'),
        fc.nat(4),
        fc.option(fc.nat(60), { nil: undefined, freq: 4 }),
      )
      .map(([lines, end, pad, cut]) => {
        const whole = lines.map((text) => text + end).join('') + '\0'.repeat(pad);
        return cut === undefined ? whole : whole.slice(0, cut);
      }),
    { nil: undefined, freq: 6 },
  );
const words = [
  'console=ttyAMA0',
  'rauc.slot=A',
  'rauc.slot=B',
  'rauc.slot=C',
  'rauc.slot=AB',
  'harbor.trial=1',
  'xrauc.slot=B',
  'rauc.slot=',
];
const cmdlineFile = fc.option(
  fc.array(fc.constantFrom(...words), { maxLength: 4 }).map((list) => `${list.join(' ')}\n`),
  { nil: undefined },
);
const reads = [['get-primary'], ['get-current'], ['get-state', 'A'], ['get-state', 'B'], ['get-state', 'C'], ['get-state']];

function place(path: string, text: string | undefined): void {
  if (text === undefined) rmSync(path, { force: true });
  else writeFileSync(path, text, 'latin1');
}

describe('boot-state.sh, RAUC backend on the board', () => {
  it('answers every read as boot-state.mjs does, on any state of the boot partition', () => {
    const boot = tempDir('boot-state');
    const cmdline = join(boot, 'cmdline');
    fc.assert(
      fc.property(envFile(['HARBOR_SLOT']), envFile(['HARBOR_TRY', 'HARBOR_TRY_LEFT']), cmdlineFile, (slotFile, tryFile, kernel) => {
        place(join(boot, 'harbor-slot.env'), slotFile);
        place(join(boot, 'harbor-try.env'), tryFile);
        place(cmdline, kernel);
        for (const args of reads) expect(shell(boot, cmdline, args), args.join(' ')).toEqual(node(boot, cmdline, args));
      }),
      { numRuns: 100 },
    );
  });

  it("counts a trial's attempts left as boot-state.mjs does, whatever the number looks like", () => {
    const boot = tempDir('boot-state');
    const cmdline = join(boot, 'cmdline');
    writeFileSync(join(boot, 'harbor-slot.env'), 'HARBOR_SLOT=A\n');
    writeFileSync(cmdline, 'rauc.slot=A\n');
    const agree = (left: string) => {
      writeFileSync(join(boot, 'harbor-try.env'), `HARBOR_TRY=B\nHARBOR_TRY_LEFT=${left}\n`, 'latin1');
      for (const args of [['get-primary'], ['get-state', 'B']])
        expect(shell(boot, cmdline, args), `${args.join(' ')} ${left}`).toEqual(node(boot, cmdline, args));
    };
    for (const left of countValues) agree(left);
    fc.assert(fc.property(fc.stringMatching(/^[-+]?(0[xX])?[0-9a-fA-Fz]{0,3}$/), agree), { numRuns: 40 });
  });

  it('hands the writes to boot-state.mjs: an install, its trial boot and its confirmation', () => {
    const boot = tempDir('boot-state');
    const cmdline = join(boot, 'cmdline');
    writeFileSync(cmdline, 'console=ttyAMA0 rauc.slot=A\n');
    expect(shell(boot, cmdline, ['set-state', 'B', 'bad'])).toEqual({ out: '', failed: false });
    expect(shell(boot, cmdline, ['set-primary', 'B'])).toEqual({ out: '', failed: false });
    expect(shell(boot, cmdline, ['get-primary']).out).toBe('B');
    writeFileSync(cmdline, 'console=ttyAMA0 rauc.slot=B harbor.trial=1\n');
    expect(shell(boot, cmdline, ['set-state', 'B', 'good'])).toEqual({ out: '', failed: false });
    expect(readFileSync(join(boot, 'harbor-slot.env'), 'latin1')).toBe('HARBOR_SLOT=B\n');
    expect(shell(boot, cmdline, ['get-primary']).out).toBe('B');
    expect(shell(boot, cmdline, ['set-state', 'A', 'good'])).toEqual({ out: '', failed: true });
    expect(shell(boot, cmdline, ['reboot-now']).failed).toBe(true);
  });
});
