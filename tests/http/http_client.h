/* A small blocking HTTP client for the tests (libcurl easy API) and the
 * eaid process helpers. */
#ifndef EAI_TESTS_HTTP_CLIENT_H
#define EAI_TESTS_HTTP_CLIENT_H

#include <stddef.h>
#include <sys/types.h>
#include <jansson.h>

struct th_resp {
    long status;
    char *body;
    size_t len;
    char *headers;      /* raw header block(s) */
    json_t *json;       /* parsed body or NULL */
    double seconds;
};

/* Whole-request timeout of th_request (0: 60 s). */
extern long th_timeout_ms;

/* headers: NULL-terminated "Name: value"; body may be NULL.
 * upload_bytes > 0: send that many zero bytes as the body instead. */
int th_request(const char *method, const char *url, const char *const *headers, const char *body,
               size_t body_len, size_t upload_bytes, struct th_resp *out);
void th_resp_free(struct th_resp *r);
/* Value of the last header `name` (case-insensitive) in a static buffer or NULL. */
const char *th_header(const struct th_resp *r, const char *name);
/* error.code of an envelope, or "" */
const char *th_code(const struct th_resp *r);

int th_free_port(void);
/* Run `eaid ARGS...` (NULL-terminated), capture stdout (malloc'd). Returns exit code. */
int th_eaid(const char *eaid, char **out, const char *const *args);
/* Start `eaid serve` with the current environment; log to logfile. */
pid_t th_serve(const char *eaid, const char *config, const char *logfile);
/* Wait until GET url answers (any status) or timeout_ms; 0 or -1. */
int th_wait_up(const char *url, int timeout_ms);
/* SIGTERM, wait up to timeout_ms (then SIGKILL); exit status or -1. */
int th_stop(pid_t pid, int timeout_ms);

#endif
