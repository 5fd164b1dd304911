import type { TlsOptions } from 'node:tls';

/**
 * TLS 1.2 and 1.3 only. TLS 1.2 suites: ECDHE key exchange with AES-GCM or ChaCha20-Poly1305,
 * which ESP32's mbedTLS offers by default; ECDSA for the generated certificate, RSA for operators'.
 * TLS 1.3 suites are all AEAD already (Node's defaults).
 */
export const TLS_PROTOCOL: TlsOptions = {
  minVersion: 'TLSv1.2',
  maxVersion: 'TLSv1.3',
  ciphers: [
    'ECDHE-ECDSA-AES128-GCM-SHA256',
    'ECDHE-ECDSA-AES256-GCM-SHA384',
    'ECDHE-ECDSA-CHACHA20-POLY1305',
    'ECDHE-RSA-AES128-GCM-SHA256',
    'ECDHE-RSA-AES256-GCM-SHA384',
    'ECDHE-RSA-CHACHA20-POLY1305',
  ].join(':'),
  honorCipherOrder: true,
};

/**
 * Both HTTP/1 versions: Node offers only `http/1.1` by default, which fails the handshake
 * (no_application_protocol) of a client that offers only `http/1.0` (`curl --http1.0`).
 * A client offering both gets HTTP/1.1, the first of these it offers.
 */
export const HTTP_ALPN_PROTOCOLS = ['http/1.1', 'http/1.0'];

/** The first byte of a TLS record carrying a handshake (ClientHello); no HTTP method starts with it. */
export const TLS_HANDSHAKE_BYTE = 0x16;
