// The MQTT fault rounds: kill -9 of the gateway under QoS 1 load in both durability modes, and power
// cuts (powercut-fs) in power-loss mode, for devices publishing to the gateway and for the gateway
// subscribed to a site Mosquitto. Every acknowledged reading must be stored exactly once, no refused
// one at all. The same cuts in process-crash mode are reported, to show whether they bite.
import { runMqttCrashConsistency } from '../lib/mqtt-crash-consistency.mjs';
import { powerCutStorage } from './power-cut.mjs';

/**
 * @param {{ rounds: number, cuts: number, questdbUrl: string, bundlePath: string, log: (line: string) => void }} options
 * @returns {Promise<boolean>} true when every promise held
 */
export async function runMqttFaults({ rounds, cuts, questdbUrl, bundlePath, log }) {
  let passed = true;
  /** @param {string} what @param {import('../lib/mqtt-crash-consistency.mjs').MqttCrashReport} report @param {boolean} mustKeepAll */
  const judge = (what, report, mustKeepAll) => {
    const wrong = report.forbidden.length + report.strangers.length + report.duplicates;
    const ok = wrong === 0 && (!mustKeepAll || report.missing.length === 0) && report.acknowledged > 0;
    const summary = {
      ...report,
      lost: report.missing.length,
      missing: report.missing.slice(0, 5),
      forbidden: report.forbidden.slice(0, 5),
      strangers: report.strangers.slice(0, 5),
    };
    log(`MQTT ${what}: ${ok ? 'PASS' : 'FAIL'} ${JSON.stringify(summary)}`);
    passed &&= ok;
  };
  for (const form of /** @type {const} */ (['publish', 'subscribe'])) {
    for (const durability of /** @type {const} */ (['process-crash', 'power-loss'])) {
      const report = await runMqttCrashConsistency({ rounds, durability, form, questdbUrl, bundlePath, log });
      judge(`${form}, kill -9, ${durability}`, report, true);
    }
    if (cuts > 0) {
      for (const durability of /** @type {const} */ (['power-loss', 'process-crash'])) {
        const storage = await powerCutStorage();
        const report = await runMqttCrashConsistency({ rounds: cuts, durability, form, questdbUrl, bundlePath, storage, log });
        judge(
          `${form}, power cuts, ${durability}${durability === 'process-crash' ? ' (losses expected, reported)' : ''}`,
          report,
          durability === 'power-loss',
        );
      }
    }
  }
  return passed;
}
