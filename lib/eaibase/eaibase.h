/*
 * eaibase: the few helpers every part of eai-sandbox needs and none can
 * take from another (core, plugins/common and the plugins, the static
 * gVisor launcher, the CLI): whole files and directories, writes that
 * finish, a JSON object's string member, clocks and RFC 3339 times.
 *
 * A static, position-independent library with hidden visibility: linked
 * into a plugin's .so it exports nothing.  Its parts are separate objects,
 * so what does not use jansson (the launcher) does not pull it in:
 *   eaib_file.c  eai_read_file, eai_mkdir_p, eai_write_all, eai_rm_tree (libc only)
 *   eaib_time.c  eai_now_ms, eai_now_ns, eai_monotonic_ns, eai_monotonic_ms, eai_time_rfc3339,
 *                eai_time_parse_rfc3339 (libc only)
 *   eaib_json.c  eai_jstr (jansson)
 * Only what is truly shared lives here; core's own helpers stay in
 * core/base (docs/architecture.md, "Layers").
 */
#ifndef EAIBASE_H
#define EAIBASE_H

#include <stddef.h>
#include <stdint.h>

/* ---- files and I/O (eaib_file.c) */

/* The whole of a regular file (NUL-terminated, not a link), at most max
 * bytes; its length into *len (len may be NULL).  NULL with errno set
 * (EINVAL: not a regular file, or larger than max). */
char *eai_read_file(const char *path, size_t max, size_t *len);
/* mkdir -p: every missing directory of path with mode.  0 or -1 (errno). */
int eai_mkdir_p(const char *path, unsigned mode);
/* Write all n bytes to fd, retrying short writes and EINTR.  0 or -1. */
int eai_write_all(int fd, const void *data, size_t n);
/* rm -r: path and, for a directory, all below it (links not followed, no
 * other filesystem crossed).  A missing path is 0.  0 or -1 (errno). */
int eai_rm_tree(const char *path);

/* ---- clocks and times (eaib_time.c) */

int64_t eai_now_ms(void);        /* wall clock, ms since the epoch */
int64_t eai_now_ns(void);        /* wall clock, ns since the epoch (span times) */
int64_t eai_monotonic_ns(void);  /* CLOCK_MONOTONIC */
int64_t eai_monotonic_ms(void);  /* CLOCK_MONOTONIC, in ms */
/* "2026-01-02T03:04:05.678Z" (UTC, millisecond precision; times before
 * 1970 floor, not truncate). */
void eai_time_rfc3339(int64_t ms, char out[32]);
/* RFC 3339 to epoch ms: YYYY-MM-DDThh:mm:ss (T or t), an optional
 * fraction (ms kept), then Z/z or +hh:mm/-hh:mm; digits only where the
 * grammar has them (no sign, no space).  0, or -1 (ms untouched). */
int eai_time_parse_rfc3339(const char *s, int64_t *ms);

/* ---- JSON (eaib_json.c) */

struct json_t;
/* The string member k of object o, or NULL (absent, not a string, o NULL). */
const char *eai_jstr(const struct json_t *o, const char *k);

#endif
