/*
 * eai: command-line client of the eai-sandbox API (docs/executions.md, "The
 * eai CLI").  libcurl + jansson only, no core code.
 *
 *   eai.c       main, global options, help, dispatch
 *   eai_http.c  requests, language, error envelopes, downloads
 *   eai_util.c  base64, UTF-8, SHA-256, local files, safe output paths
 *   eai_exec.c  `eai exec`
 *   eai_cmds.c  `eai get|logs|cancel|ls|files`
 *   eai_session.c `eai session create|ls|get|exec|put|cat|rm|close`
 *   eai_mcp.c   `eai mcp`: MCP over stdio, forwarded to /v1/mcp
 */
#ifndef EAI_CLI_H
#define EAI_CLI_H

#include "eaibase.h" /* eai_jstr, eai_read_file ... (lib/eaibase) */
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <curl/curl.h>
#include <jansson.h>

#define EAI_EXIT_USAGE 2
#define EAI_EXIT_PLATFORM 125
#define EAI_EXIT_TIMEOUT 124
#define EAI_EXIT_OOM 137
#define EAI_WAIT_S 30
#define EAI_MAX_LOCAL_FILE (64 << 20)
#define EAI_MAX_RESPONSE (256 << 20)  /* a JSON answer larger than this is refused */
#define EAI_MAX_DOWNLOAD (1LL << 32)  /* one downloaded file, 4 GiB */
#define EAI_LS_MAX_ALL 10000          /* eai ls --all stops after this many */

/* Options every command takes (before or after the command name). */
struct eai_opts {
    int json;          /* --json: machine-readable output on stdout */
    const char *lang;  /* --lang, else LC_ALL / LC_MESSAGES / LANG: "en" or "fr" */
    const char *url;   /* --url, else EAI_URL, else http://127.0.0.1:8080 */
};

extern volatile sig_atomic_t eai_interrupted;

/* ---- eai_http.c */
struct eai_http {
    CURL *curl;
    char *base;
    char *auth;
    char lang_hdr[40];
};

int eai_http_init(struct eai_http *h, const struct eai_opts *o);
void eai_http_free(struct eai_http *h);
/* One request.  *status = HTTP status (0 on transport error), body parsed
 * into *out (NULL when not JSON).  Returns 0 when a response came, -1 on a
 * transport error (already reported on stderr unless interrupted). */
int eai_http_call(struct eai_http *h, const char *method, const char *path, const char *body,
                  const char *extra_header, long *status, json_t **out, int abortable);
/* The same with a body of len bytes (binary: session files). */
int eai_http_call_len(struct eai_http *h, const char *method, const char *path, const char *body, size_t len,
                      const char *extra_header, long *status, json_t **out, int abortable);
/* GET path into the open file f (raw bytes, at most EAI_MAX_DOWNLOAD).
 * Returns 0 with *status set, -1 on a transport error.  A non-2xx body is
 * parsed into *err_body (error envelope) instead of written to f. */
int eai_http_download(struct eai_http *h, const char *path, FILE *f, long *status, json_t **err_body,
                      uint64_t *bytes);
/* Request headers (Authorization, accept, Accept-Language, extra); NULL on OOM. */
struct curl_slist *eai_http_headers(struct eai_http *h, const char *accept, const char *extra, int has_body);
/* Reset the handle for url with hdrs and a whole-transfer timeout (0: none). */
void eai_http_setup(struct eai_http *h, const char *url, struct curl_slist *hdrs, long timeout_s);
/* CURLOPT_XFERINFOFUNCTION that aborts once eai_interrupted is set. */
int eai_http_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d);

/* ---- eai_stream.c: live output of a running execution (its events) */
/* Follow GET .../events, writing stdout and stderr chunks as they come and
 * counting the bytes written per stream in printed[0] (stdout) and
 * printed[1] (stderr); a stream cut after some bytes is followed again.
 * 0 when the terminal status arrived, -1 when it could not be followed to
 * the end (refused, interrupted, unsupported): the caller then waits by
 * long-polls and prints the rest with eai_print_rest. */
int eai_follow_events(struct eai_http *h, const char *id, uint64_t printed[2]);
/* Print what the terminal record holds beyond printed[] per stream. */
void eai_print_rest(const json_t *rec, const uint64_t printed[2]);

/* One line on stderr from an error envelope: "eai: WHAT: code: message
 * (HTTP n)" and its details (path: message), in the negotiated language. */
void eai_print_api_error(const char *what, long status, const json_t *body);
/* "en" or "fr" from --lang or the locale variables. */
const char *eai_lang(const struct eai_opts *o);
/* Append to a URL path: every byte outside unreserved characters and '/'
 * percent-encoded.  0, or -1 when out is too small. */
int eai_url_path_append(char *out, size_t n, const char *raw);
/* Append "?k=v" or "&k=v" with v percent-encoded; 0 or -1. */
int eai_url_query_append(char *out, size_t n, const char *k, const char *v);

/* ---- eai_util.c */
char *eai_b64_encode(const unsigned char *d, size_t n);
unsigned char *eai_b64_decode(const char *s, size_t *len);
int eai_utf8_valid(const unsigned char *p, size_t n);
unsigned char *eai_read_local(const char *path, size_t *len);
void eai_fwrite_all(FILE *f, const char *d, size_t n);
/* Write rec[key] (text or base64 per rec[key_encoding]) to f. */
void eai_print_stream(const json_t *rec, const char *key, FILE *f);
void eai_print_json(const json_t *v);
int eai_is_terminal(const char *status);
/* SHA-256 of a whole file (hex); 0 or -1. */
int eai_sha256_file(FILE *f, char hex[65]);
/* Open DIR/<rel> for writing through a temporary file (created with
 * O_NOFOLLOW under directories opened without following symlinks; missing
 * directories are created).  rel must be relative, without empty, "." or
 * ".." segments.  Returns a FILE* and fills *ctx; commit with
 * eai_out_commit (rename into place) or drop with eai_out_abort. */
struct eai_out {
    int dirfd;
    char tmp[64];
    char name[256];
};
FILE *eai_out_open(const char *dir, const char *rel, struct eai_out *ctx);
int eai_out_commit(FILE *f, struct eai_out *ctx);
void eai_out_abort(FILE *f, struct eai_out *ctx);
/* The path of a collected file relative to /tmp ("/tmp/out/a" -> "out/a"),
 * or NULL when it is not under /tmp or has a bad segment. */
const char *eai_rel_to_tmp(const char *path);

/* Download the collected files of rec into dir; prints one line per file on
 * stderr (not with --json).  Returns the number of failures. */
int eai_download_files(struct eai_http *h, const json_t *rec, const char *dir, int quiet);

/* eai_exec.c: long-poll until the execution is terminal; the record, or NULL
 * (reported).  Once eai_interrupted is set (exec's Ctrl-C) it cancels the
 * execution first. */
json_t *eai_wait_terminal(struct eai_http *h, const char *id);
/* Wait for the end of id and print it (exec, session exec): with json the
 * terminal record on stdout; else the program's stdout and stderr on ours,
 * as they come when follow (eai_follow_events), the rest from the record.
 * The record (the caller's, for the exit code), or NULL (reported). */
json_t *eai_wait_and_print(struct eai_http *h, const char *id, int json, int follow);
/* The exit code of a terminal record (0, the program's code, 124, 137, 125),
 * with a line on stderr for the abnormal ends. */
int eai_exit_for(const json_t *rec);

/* ---- commands */
int eai_cmd_exec(const struct eai_opts *o, int argc, char **argv);
int eai_cmd_get(const struct eai_opts *o, int argc, char **argv);
int eai_cmd_logs(const struct eai_opts *o, int argc, char **argv);
int eai_cmd_cancel(const struct eai_opts *o, int argc, char **argv);
int eai_cmd_ls(const struct eai_opts *o, int argc, char **argv);
int eai_cmd_files(const struct eai_opts *o, int argc, char **argv);
int eai_cmd_session(const struct eai_opts *o, int argc, char **argv);   /* eai_session.c */
int eai_cmd_volume(const struct eai_opts *o, int argc, char **argv);    /* eai_volume.c */
/* --volume NAME:/mnt/PATH[:ro] appended to body's "volumes"; 0 or -1 (said). */
int eai_volume_opt(json_t *body, const char *spec);
int eai_cmd_mcp(const struct eai_opts *o, int argc, char **argv);       /* eai_mcp.c: the stdio bridge of /v1/mcp */
void eai_usage(FILE *f);

#endif
