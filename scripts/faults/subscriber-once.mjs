// The subscriber's exactly-once rounds (scripts/lib/mqtt-subscriber-once.mjs), judged: 0 lost, 0
// stored twice, every refused message one dead letter. With `control`, the same rounds with the
// broker handing the messages on at QoS 1, as published: copies are expected there, and reported to
// show that the rounds bite.
import { heldOnce, runMqttSubscriberOnce } from '../lib/mqtt-subscriber-once.mjs';

/**
 * @param {{ rounds: number, burst: number, brokerRestarts: number, durabilities: ('power-loss' | 'process-crash')[],
 *           control: boolean, questdbUrl: string, bundlePath: string, log: (line: string) => void }} options
 * @returns {Promise<boolean>} true when every promise held
 */
export async function runSubscriberOnceFaults({ rounds, burst, brokerRestarts, durabilities, control, questdbUrl, bundlePath, log }) {
  let passed = true;
  for (const durability of durabilities) {
    const report = await runMqttSubscriberOnce({ rounds, burst, brokerRestarts, durability, questdbUrl, bundlePath, log });
    const ok = heldOnce(report);
    log(`MQTT subscriber, kill -9 and broker restarts, QoS 2, ${durability}: ${ok ? 'PASS' : 'FAIL'} ${JSON.stringify(report)}`);
    passed &&= ok;
  }
  if (control) {
    const report = await runMqttSubscriberOnce({
      rounds,
      burst,
      brokerRestarts,
      durability: durabilities[0] ?? 'power-loss',
      questdbUrl,
      bundlePath,
      upgradeQos: false,
      log,
    });
    log(`MQTT subscriber, the same at QoS 1 (copies expected, reported): ${JSON.stringify(report)}`);
  }
  return passed;
}
