/*
 * Sends readings the way the Arduino/ESP32 SDK does: a new TLS connection per request through
 * mbedTLS with its default client configuration and no certificate verification (as
 * WiFiClientSecure::setInsecure()), then one HTTP/1.1 POST with the SDK's headers and a body
 * built from 32-bit floats.
 *
 * usage: esp32-tls-client HOST PORT ENDPOINT API_KEY SHIP_ID single CARGO VALUE
 *        esp32-tls-client HOST PORT ENDPOINT API_KEY SHIP_ID batch CARGO VALUE [CARGO VALUE...]
 * "batch" posts to ENDPOINT/batch. Prints the negotiated protocol and suite, then the response.
 * Exits 0 once a response arrived, 1 on a TLS or connection error, 64 on bad usage.
 */
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BODY_MAX 16384
#define REQUEST_MAX (BODY_MAX + 1024)

static void append(char *out, size_t size, const char *text) {
  size_t used = strlen(out);
  if (used + strlen(text) >= size) {
    fprintf(stderr, "request too large\n");
    exit(64);
  }
  strcat(out, text);
}

/* ArduinoJson writes a float reading as the double it widens to: 23.7f becomes 23.700000762939453. */
static void append_reading(char *body, const char *ship, const char *cargo, const char *value) {
  char reading[512];
  float v = strtof(value, NULL);
  snprintf(reading, sizeof reading, "{\"ship_id\":\"%s\",\"cargo_id\":\"%s\",\"value\":%.17g}", ship, cargo, (double)v);
  append(body, BODY_MAX, reading);
}

static int fail(const char *what, int code) {
  char text[256];
  mbedtls_strerror(code, text, sizeof text);
  fprintf(stderr, "%s: %s (-0x%04x)\n", what, text, (unsigned)-code);
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 9 || (strcmp(argv[6], "single") == 0 && argc != 9) || argc % 2 == 0 ||
      (strcmp(argv[6], "single") != 0 && strcmp(argv[6], "batch") != 0)) {
    fprintf(stderr, "usage: %s HOST PORT ENDPOINT API_KEY SHIP_ID single|batch CARGO VALUE [CARGO VALUE...]\n", argv[0]);
    return 64;
  }
  const char *host = argv[1], *port = argv[2], *endpoint = argv[3], *key = argv[4], *ship = argv[5];
  int batch = strcmp(argv[6], "batch") == 0;

  static char body[BODY_MAX];
  body[0] = '\0';
  if (batch) append(body, BODY_MAX, "[");
  for (int i = 7; i + 1 < argc; i += 2) {
    if (i > 7) append(body, BODY_MAX, ",");
    append_reading(body, ship, argv[i], argv[i + 1]);
  }
  if (batch) append(body, BODY_MAX, "]");

  static char request[REQUEST_MAX];
  snprintf(request, sizeof request,
           "POST %s%s HTTP/1.1\r\nHost: %s:%s\r\nUser-Agent: ESP32HTTPClient\r\nConnection: close\r\n"
           "Accept-Encoding: identity;q=1,chunked;q=0.1,*;q=0\r\nContent-Type: application/json\r\n"
           "X-API-Key: %s\r\nContent-Length: %zu\r\n\r\n%s",
           endpoint, batch ? "/batch" : "", host, port, key, strlen(body), body);

  mbedtls_net_context net;
  mbedtls_ssl_context ssl;
  mbedtls_ssl_config conf;
  mbedtls_entropy_context entropy;
  mbedtls_ctr_drbg_context drbg;
  mbedtls_net_init(&net);
  mbedtls_ssl_init(&ssl);
  mbedtls_ssl_config_init(&conf);
  mbedtls_entropy_init(&entropy);
  mbedtls_ctr_drbg_init(&drbg);

  int rc = mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy, (const unsigned char *)"esp32", 5);
  if (rc != 0) return fail("seed", rc);
  rc = mbedtls_ssl_config_defaults(&conf, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
  if (rc != 0) return fail("config", rc);
  mbedtls_ssl_conf_authmode(&conf, MBEDTLS_SSL_VERIFY_NONE);
  mbedtls_ssl_conf_rng(&conf, mbedtls_ctr_drbg_random, &drbg);
  if ((rc = mbedtls_ssl_setup(&ssl, &conf)) != 0) return fail("setup", rc);
  if ((rc = mbedtls_ssl_set_hostname(&ssl, host)) != 0) return fail("hostname", rc);
  if ((rc = mbedtls_net_connect(&net, host, port, MBEDTLS_NET_PROTO_TCP)) != 0) return fail("connect", rc);
  mbedtls_ssl_set_bio(&ssl, &net, mbedtls_net_send, mbedtls_net_recv, NULL);
  while ((rc = mbedtls_ssl_handshake(&ssl)) != 0) {
    if (rc != MBEDTLS_ERR_SSL_WANT_READ && rc != MBEDTLS_ERR_SSL_WANT_WRITE) return fail("handshake", rc);
  }
  printf("%s %s\n", mbedtls_ssl_get_version(&ssl), mbedtls_ssl_get_ciphersuite(&ssl));

  size_t length = strlen(request), sent = 0;
  while (sent < length) {
    rc = mbedtls_ssl_write(&ssl, (const unsigned char *)request + sent, length - sent);
    if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE) continue;
    if (rc < 0) return fail("write", rc);
    sent += (size_t)rc;
  }
  unsigned char buffer[4096];
  int received = 0;
  for (;;) {
    rc = mbedtls_ssl_read(&ssl, buffer, sizeof buffer);
    if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE) continue;
    if (rc == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY || rc == 0) break;
    if (rc < 0) {
      if (received > 0) break;
      return fail("read", rc);
    }
    fwrite(buffer, 1, (size_t)rc, stdout);
    received += rc;
  }
  mbedtls_ssl_close_notify(&ssl);
  mbedtls_net_free(&net);
  mbedtls_ssl_free(&ssl);
  mbedtls_ssl_config_free(&conf);
  mbedtls_ctr_drbg_free(&drbg);
  mbedtls_entropy_free(&entropy);
  return received > 0 ? 0 : 1;
}
