import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SAMPLE_CATALOGUE as SAMPLE } from '../../test/support/catalogue-sample.js';
import { cargoEntryFor, cargoPattern, matchesCargo } from './catalogue.js';
import { CatalogueError, parseCatalogue } from './catalogue-file.js';

const problems = (text: string): string[] => {
  try {
    parseCatalogue(text);
  } catch (error) {
    if (error instanceof CatalogueError) return error.problems;
    throw error;
  }
  return [];
};

describe('the catalogue file', () => {
  it('reads ship names and cargo entries in the order written', () => {
    const catalogue = parseCatalogue(SAMPLE);
    expect([...catalogue.ships]).toEqual([
      ['ship-a', 'MV Alpha'],
      ['buoy 3', 'Harbour entrance buoy'],
    ]);
    expect(catalogue.cargo.map((e) => e.match)).toEqual(['reefer4_temp', 'temp*', '*_humidity']);
    expect(catalogue.cargo[0]).toEqual({ match: 'reefer4_temp', name: 'Reefer 4 temperature', unit: '°C', min: 2, max: 8, decimals: 1 });
  });

  it('reads an empty file, or one of comments, as an empty catalogue', () => {
    expect(parseCatalogue('')).toEqual({ ships: new Map(), cargo: [], thinning: [] });
    expect(parseCatalogue('# nothing yet\n')).toEqual({ ships: new Map(), cargo: [], thinning: [] });
  });

  it('reads thinning rules in the order written, and refuses one that is neither a deadband nor a summary', () => {
    expect(
      parseCatalogue('thinning:\n  - match: temp*\n    deadband: 0.5\n  - match: rpm\n    summary_seconds: 30\n    lateness_seconds: 5\n')
        .thinning,
    ).toEqual([
      { match: 'temp*', deadband: 0.5, maxIntervalMs: undefined },
      { match: 'rpm', summaryMs: 30_000, latenessMs: 5_000 },
    ]);
    const refused = problems(
      'thinning:\n  - match: temp\n    deadband: 1\n    summary_seconds: 60\n  - match: rpm\n    summary_seconds: 0.5\n',
    );
    expect(refused).toHaveLength(2);
    expect(refused[0]).toMatch(/^thinning rule 1/);
    expect(refused[1]).toMatch(/^thinning rule 2/);
  });

  it('refuses a file with mistakes, naming each one and where it is', () => {
    expect(
      problems(`cargo:
  - match: temp*
    nmae: Temperature
  - match: a*b*c
  - match: hum
    min: 80
    max: 20
  - match: rpm
    decimals: 1.5
  - match: door
    unit: "a\\tb"
`),
    ).toEqual([
      'cargo entry 1: Unrecognized key: "nmae"',
      'cargo entry 2, match: may hold one * at most (temp*, *_temp, reefer*_temp)',
      'cargo entry 3, max: min must not be above max',
      'cargo entry 4, decimals: must be a whole number',
      'cargo entry 5, unit: must be one line of printable text',
    ]);
    expect(problems('cargo:\n  match: temp*\n')).toEqual(['cargo: must be a list of entries, each starting with "- match:"']);
    expect(problems('ships:\n  ship-1: MV One\n  ship-1: MV Two\n')[0]).toMatch(/unique/i);
    expect(problems('ships: [a, b]\n')).toEqual(['ships: must map ship ids to names (ship-007: MV Nordlicht)']);
    expect(problems('cargo:\n  - match: x\n    min: "2"\n')).toEqual(['cargo entry 1, min: must be a number']);
  });

  it('matches cargo ids by pattern, case-insensitively, the first entry that matches winning', () => {
    const catalogue = parseCatalogue(SAMPLE);
    expect(cargoEntryFor(catalogue, 'reefer4_temp')?.name).toBe('Reefer 4 temperature');
    expect(cargoEntryFor(catalogue, 'Temp_hold_2')?.name).toBe('Temperature');
    expect(cargoEntryFor(catalogue, 'deck_humidity')?.name).toBe('Humidity');
    expect(cargoEntryFor(catalogue, '_humidity')?.name).toBe('Humidity');
    expect(cargoEntryFor(catalogue, 'humidity')).toBeUndefined();
    expect(cargoEntryFor(catalogue, 'reefer4_temp2')).toBeUndefined();
    expect(cargoPattern('reefer*_temp')).toEqual({ prefix: 'reefer', suffix: '_temp', minLength: 11, maxLength: 1024 });
  });

  it('matches as a glob with one * would, on generated ids and patterns', () => {
    const word = fc.stringMatching(/^[a-zA-Z0-9_]{0,6}$/);
    fc.assert(
      fc.property(word, fc.option(word, { nil: undefined }), word, (prefix, suffix, id) => {
        const match = suffix === undefined ? prefix : `${prefix}*${suffix}`;
        if (match === '') return;
        const glob = new RegExp(`^${match.replace('*', '.*')}$`, 'i');
        expect(matchesCargo(cargoPattern(match), id)).toBe(glob.test(id));
      }),
    );
  });
});

describe('the annotated sample, systemd/catalogue.yaml', () => {
  const sample = readFileSync(join(import.meta.dirname, '..', '..', 'systemd', 'catalogue.yaml'), 'utf8');

  it('is an empty catalogue as shipped, and a valid one with its examples uncommented', () => {
    expect(parseCatalogue(sample)).toEqual({ ships: new Map(), cargo: [], thinning: [] });
    const uncommented = sample
      .split('\n')
      .filter((line) => /^#(ships:|cargo:|thinning:| {2}- | {4}\w+:| {2}["\w-][^:]*:)/.test(line))
      .map((line) => line.slice(1))
      .join('\n');
    const catalogue = parseCatalogue(uncommented);
    expect(catalogue.ships.get('buoy 3')).toBe('Harbour entrance buoy');
    expect(catalogue.cargo.map((e) => e.match)).toEqual(['reefer4_temp', 'reefer*_temp', '*humidity', 'fuel_level']);
    expect(cargoEntryFor(catalogue, 'reefer4_temp')?.max).toBe(-18);
    expect(cargoEntryFor(catalogue, 'reefer7_temp')?.name).toBe('Reefer temperature');
    expect(catalogue.thinning).toEqual([
      { match: 'reefer*_temp', deadband: 0.2, maxIntervalMs: 900_000 },
      { match: '*_rpm', summaryMs: 60_000, latenessMs: 10_000 },
    ]);
  });
});
