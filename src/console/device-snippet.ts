import encodeQR from 'qr';

export interface SnippetFacts {
  name: string;
  key: string;
  shipPrefix: string | undefined;
  /** The ingest endpoint over HTTPS, as the device will post to it. */
  url: string;
  fingerprintSha256: string;
}

/** What a device's sketch needs, as C defines: ESP32 and ESP8266 sketches and the Arduino SDK take these three. */
export function deviceSnippet(f: SnippetFacts): string {
  return [
    `// Harbor Gateway device key "${f.name}"${f.shipPrefix === undefined ? '' : ` (ships starting with "${f.shipPrefix}")`}`,
    `#define HARBOR_URL "${f.url}"`,
    `#define HARBOR_API_KEY "${f.key}"`,
    "// SHA-256 fingerprint of the gateway's HTTPS certificate",
    `#define HARBOR_CERT_SHA256 "${f.fingerprintSha256}"`,
    '',
  ].join('\n');
}

/** The text as a QR code in SVG (medium error correction: a phone reads it off a screen at arm's length). */
export const qrSvg = (text: string): string => encodeQR(text, 'svg', { ecc: 'medium', border: 2 });
