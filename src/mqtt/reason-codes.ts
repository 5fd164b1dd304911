import type { QueueRefusal } from '../queue/queue-errors.js';
import type { RefusalKind } from './mqtt-ingest.js';

/** MQTT 3.1.1 CONNACK return codes. */
export const CONNACK_V4 = {
  accepted: 0,
  unacceptableProtocol: 1,
  identifierRejected: 2,
  serverUnavailable: 3,
  badCredentials: 4,
  notAuthorized: 5,
} as const;

/** MQTT 5 reason codes the gateway sends (CONNACK, PUBACK, PUBREC, PUBCOMP, SUBACK, DISCONNECT). */
export const REASON = {
  success: 0x00,
  noSubscriptionExisted: 0x11,
  unspecified: 0x80,
  malformed: 0x81,
  protocolError: 0x82,
  implementationSpecific: 0x83,
  unsupportedProtocol: 0x84,
  badCredentials: 0x86,
  notAuthorized: 0x87,
  serverUnavailable: 0x88,
  serverBusy: 0x89,
  shuttingDown: 0x8b,
  badAuthenticationMethod: 0x8c,
  keepAliveTimeout: 0x8d,
  sessionTakenOver: 0x8e,
  topicNameInvalid: 0x90,
  packetIdNotFound: 0x92,
  receiveMaximumExceeded: 0x93,
  topicAliasInvalid: 0x94,
  packetTooLarge: 0x95,
  quotaExceeded: 0x97,
  payloadFormatInvalid: 0x99,
  wildcardsNotSupported: 0xa2,
} as const;

/** The PUBACK/PUBREC reason an MQTT 5 client is told for a refused publish. */
export const REFUSAL_REASON: Record<RefusalKind, number> = {
  malformed: REASON.payloadFormatInvalid,
  invalid: REASON.payloadFormatInvalid,
  topic: REASON.topicNameInvalid,
  forbidden: REASON.notAuthorized,
};

/** The DISCONNECT reason when the queue cannot take a publish, which is then not acknowledged. */
export const UNAVAILABLE_REASON: Record<QueueRefusal, number> = {
  full: REASON.quotaExceeded,
  disk_full: REASON.quotaExceeded,
  io_error: REASON.unspecified,
  closed: REASON.shuttingDown,
};
