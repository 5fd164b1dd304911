import { z } from 'zod';

/** The parts of a The Things Network v3 uplink webhook the gateway reads; everything else is ignored. */
const uplinkSchema = z.object({
  end_device_ids: z.object({ device_id: z.string() }),
  received_at: z.string().optional(),
  uplink_message: z.object({
    received_at: z.string().optional(),
    decoded_payload: z.record(z.string(), z.unknown()).optional(),
    rx_metadata: z
      .array(z.object({ rssi: z.number().optional(), channel_rssi: z.number().optional(), snr: z.number().optional() }))
      .optional(),
    settings: z
      .object({
        data_rate: z
          .object({ lora: z.object({ bandwidth: z.number().optional(), spreading_factor: z.number().optional() }).optional() })
          .optional(),
        frequency: z.union([z.string(), z.number()]).optional(),
      })
      .optional(),
  }),
});

export type UplinkResult = { ok: true; readings: unknown[] } | { ok: false; issues: z.core.$ZodIssue[] };

/**
 * Turns an uplink into plain readings of the end device: every finite number of the decoded
 * payload, plus rssi, channel_rssi and snr of the first gateway and the radio settings. The result
 * still goes through the reading schema like any batch.
 */
export function uplinkToReadings(body: unknown): UplinkResult {
  const parsed = uplinkSchema.safeParse(body, { reportInput: true });
  if (!parsed.success) return { ok: false, issues: parsed.error.issues };
  const uplink = parsed.data;
  const message = uplink.uplink_message;
  const time = message.received_at ?? uplink.received_at;
  const device = uplink.end_device_ids.device_id;
  const readings: unknown[] = [];
  const add = (cargo: string, value: unknown): void => {
    if (typeof value === 'number' && Number.isFinite(value)) readings.push({ time, ship_id: device, cargo_id: cargo, value });
  };
  for (const [field, value] of Object.entries(message.decoded_payload ?? {})) add(field, value);
  const gateway = message.rx_metadata?.[0];
  add('rssi', gateway?.rssi);
  add('channel_rssi', gateway?.channel_rssi);
  add('snr', gateway?.snr);
  add('bandwidth', message.settings?.data_rate?.lora?.bandwidth);
  add('spreading_factor', message.settings?.data_rate?.lora?.spreading_factor);
  const frequency = message.settings?.frequency;
  add('frequency', typeof frequency === 'string' && frequency.trim() !== '' ? Number(frequency) : frequency);
  return { ok: true, readings };
}
