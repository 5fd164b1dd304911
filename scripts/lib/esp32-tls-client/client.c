/*
 * Sends readings the way the Arduino/ESP32 SDK does: a new TLS connection per attempt through
 * mbedTLS with its default client configuration and no certificate verification (as
 * WiFiClientSecure::setInsecure()), then one HTTP/1.1 POST with the SDK's headers and a body
 * built from 32-bit floats. Like the ESP32 core's HTTPClient it waits at most 5 s for an answer
 * (HTTPCLIENT_DEFAULT_TCP_TIMEOUT; HTTPC_ERROR_READ_TIMEOUT, -11, when none comes), and like the
 * SDK it makes up to six attempts, 1, 2, 4, 8 and 16 s apart: it stops at a 2xx answer and at a
 * 4xx other than 429 ("Client error. Will not retry."), and retries 429, 5xx and failed attempts.
 *
 * usage: esp32-tls-client HOST PORT ENDPOINT API_KEY SHIP_ID single CARGO VALUE
 *        esp32-tls-client HOST PORT ENDPOINT API_KEY SHIP_ID batch CARGO VALUE [CARGO VALUE...]
 * "batch" posts to ENDPOINT/batch. For each attempt that got an answer, stdout has the negotiated
 * protocol and suite, then the answer; stderr has the SDK's log lines.
 * Exits 0 when the SDK stops at an answer (2xx, or a 4xx it does not retry), 1 when every attempt
 * failed, 64 on bad usage.
 */
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BODY_MAX 16384
#define REQUEST_MAX (BODY_MAX + 1024)
#define ANSWER_MAX 65536
/* HTTPClient's HTTPCLIENT_DEFAULT_TCP_TIMEOUT, and the SDK's _max_retries and _initial_backoff. */
#define READ_TIMEOUT_MS 5000
#define MAX_RETRIES 5
#define INITIAL_BACKOFF_MS 1000
#define HTTPC_ERROR_CONNECTION_REFUSED (-1)
#define HTTPC_ERROR_SEND_HEADER_FAILED (-2)
#define HTTPC_ERROR_CONNECTION_LOST (-5)
#define HTTPC_ERROR_READ_TIMEOUT (-11)

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

static int fail(const char *what, int code, int http_error) {
  char text[256];
  mbedtls_strerror(code, text, sizeof text);
  fprintf(stderr, "%s: %s (-0x%04x)\n", what, text, (unsigned)-code);
  return http_error;
}

/* HTTPClient::errorToString for the errors an attempt here can end with. */
static const char *error_text(int http_error) {
  switch (http_error) {
    case HTTPC_ERROR_CONNECTION_REFUSED: return "connection refused";
    case HTTPC_ERROR_SEND_HEADER_FAILED: return "send header failed";
    case HTTPC_ERROR_READ_TIMEOUT: return "read Timeout";
    default: return "connection lost";
  }
}

/*
 * One attempt on a new connection. Returns the HTTP status, or a negative HTTPC_ERROR_* code as
 * HTTPClient::POST does when no answer came.
 */
static int attempt(const char *host, const char *port, const char *request, mbedtls_ctr_drbg_context *drbg) {
  mbedtls_net_context net;
  mbedtls_ssl_context ssl;
  mbedtls_ssl_config conf;
  mbedtls_net_init(&net);
  mbedtls_ssl_init(&ssl);
  mbedtls_ssl_config_init(&conf);
  int status = HTTPC_ERROR_CONNECTION_LOST;
  int rc = mbedtls_ssl_config_defaults(&conf, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
  if (rc != 0) {
    status = fail("config", rc, HTTPC_ERROR_CONNECTION_LOST);
    goto done;
  }
  mbedtls_ssl_conf_authmode(&conf, MBEDTLS_SSL_VERIFY_NONE);
  mbedtls_ssl_conf_rng(&conf, mbedtls_ctr_drbg_random, drbg);
  mbedtls_ssl_conf_read_timeout(&conf, READ_TIMEOUT_MS);
  if ((rc = mbedtls_ssl_setup(&ssl, &conf)) != 0 || (rc = mbedtls_ssl_set_hostname(&ssl, host)) != 0) {
    status = fail("setup", rc, HTTPC_ERROR_CONNECTION_LOST);
    goto done;
  }
  if ((rc = mbedtls_net_connect(&net, host, port, MBEDTLS_NET_PROTO_TCP)) != 0) {
    status = fail("connect", rc, HTTPC_ERROR_CONNECTION_REFUSED);
    goto done;
  }
  mbedtls_ssl_set_bio(&ssl, &net, mbedtls_net_send, NULL, mbedtls_net_recv_timeout);
  while ((rc = mbedtls_ssl_handshake(&ssl)) != 0) {
    if (rc != MBEDTLS_ERR_SSL_WANT_READ && rc != MBEDTLS_ERR_SSL_WANT_WRITE) {
      status = fail("handshake", rc, HTTPC_ERROR_CONNECTION_REFUSED);
      goto done;
    }
  }
  size_t length = strlen(request), sent = 0;
  while (sent < length) {
    rc = mbedtls_ssl_write(&ssl, (const unsigned char *)request + sent, length - sent);
    if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE) continue;
    if (rc < 0) {
      status = fail("write", rc, HTTPC_ERROR_SEND_HEADER_FAILED);
      goto done;
    }
    sent += (size_t)rc;
  }
  static char answer[ANSWER_MAX];
  size_t received = 0;
  for (;;) {
    rc = mbedtls_ssl_read(&ssl, (unsigned char *)answer + received, sizeof answer - 1 - received);
    if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE) continue;
    if (rc == MBEDTLS_ERR_SSL_TIMEOUT && received == 0) {
      status = fail("read", rc, HTTPC_ERROR_READ_TIMEOUT);
      goto done;
    }
    if (rc <= 0 || rc == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY) break;
    received += (size_t)rc;
    if (received == sizeof answer - 1) break;
  }
  answer[received] = '\0';
  int code;
  if (received == 0 || sscanf(answer, "HTTP/1.%*d %d", &code) != 1) {
    fprintf(stderr, "no HTTP answer\n");
    goto done;
  }
  printf("%s %s\n", mbedtls_ssl_get_version(&ssl), mbedtls_ssl_get_ciphersuite(&ssl));
  fwrite(answer, 1, received, stdout);
  printf("\n");
  fflush(stdout);
  status = code;
  mbedtls_ssl_close_notify(&ssl);
done:
  mbedtls_net_free(&net);
  mbedtls_ssl_free(&ssl);
  mbedtls_ssl_config_free(&conf);
  return status;
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

  mbedtls_entropy_context entropy;
  mbedtls_ctr_drbg_context drbg;
  mbedtls_entropy_init(&entropy);
  mbedtls_ctr_drbg_init(&drbg);
  int rc = mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy, (const unsigned char *)"esp32", 5);
  if (rc != 0) return fail("seed", rc, 1);

  int answered = 0;
  for (int retries = 0; retries <= MAX_RETRIES; retries++) {
    fprintf(stderr, "[HTTP] Attempt %d to POST to %s%s\n", retries + 1, endpoint, batch ? "/batch" : "");
    int code = attempt(host, port, request, &drbg);
    if (code > 0) {
      fprintf(stderr, "[HTTP] Response code: %d\n", code);
      if (code >= 200 && code < 300) {
        answered = 1;
        break;
      }
      if (code >= 400 && code < 500 && code != 429) {
        fprintf(stderr, "[HTTP] Client error. Will not retry.\n");
        answered = 1;
        break;
      }
    } else {
      fprintf(stderr, "[HTTP] POST failed, error: %s (%d)\n", error_text(code), code);
    }
    if (retries < MAX_RETRIES) {
      long sleep_ms = (long)INITIAL_BACKOFF_MS << retries;
      fprintf(stderr, "Retrying in %.2f seconds...\n", sleep_ms / 1000.0);
      struct timespec pause = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
      nanosleep(&pause, NULL);
    } else {
      fprintf(stderr, "Failed to send data after %d attempts.\n", MAX_RETRIES + 1);
    }
  }
  mbedtls_ctr_drbg_free(&drbg);
  mbedtls_entropy_free(&entropy);
  return answered ? 0 : 1;
}
