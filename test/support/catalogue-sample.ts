/**
 * A site's catalogue (`CATALOGUE_FILE`) as the tests write it: a named ship, a ship id that YAML
 * must quote, one cargo id with its normal range and decimals, and two patterns, one each way.
 */
export const SAMPLE_CATALOGUE = `# the site's ships and cargo
ships:
  ship-a: MV Alpha
  "buoy 3": Harbour entrance buoy
cargo:
  - match: reefer4_temp
    name: Reefer 4 temperature
    unit: °C
    min: 2
    max: 8
    decimals: 1
  - match: temp*
    name: Temperature
    unit: °C
  - match: "*_humidity"
    name: Humidity
    unit: '%'
    max: 80
`;
