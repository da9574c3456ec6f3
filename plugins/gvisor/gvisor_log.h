/*
 * runsc's own log (--log=<bundle>/runsc-*.main.log, docs/gvisor.md "runsc's
 * own words"): pure readers, no I/O, linked into the plugin, its unit test
 * (tests/gvisor/test_runsc_log.c) and its fuzz target (tests/fuzz).
 *
 * Every runsc process of a sandbox (run, gofer, sandbox, exec) appends its
 * errors to that one file as JSON objects {"msg", "level": "error",
 * "time"}, back to back: runsc 0.0~20221219 writes no newline between them
 * (`{...Error reading mounts file...}{...running container: ...}` when a
 * gofer dies during create).  What eaid reads is the file's last
 * GV_RUNTIME_LOG_MAX bytes, which may begin inside an object, and whose
 * last object may be cut short by a writer killed mid-write.
 */
#ifndef EAI_GVISOR_LOG_H
#define EAI_GVISOR_LOG_H

#include <stddef.h>

#include <jansson.h>

#define GV_LOG_ERRORS_MAX 64        /* error messages kept (the last ones) */
#define GV_LOG_SCAN_BUDGET (256 << 10) /* bytes read by failed parse attempts, at most */

/* The "msg" of every JSON object of text[0, len) whose "level" is "error",
 * oldest first, as an array of strings (the last GV_LOG_ERRORS_MAX when
 * there are more); empty when none; NULL out of memory.
 *
 * text is read as a stream of JSON values, whatever separates them (nothing,
 * newlines, spaces): a value is tried at each '{' and, once parsed, reading
 * goes on after it; a '{' where no value parses (the middle of an object the
 * tail began in, a truncated last object) is skipped for the next one.
 * Bounded: text is read once by the values found, and failed attempts read
 * at most GV_LOG_SCAN_BUDGET bytes plus one attempt (past that, what was
 * found so far is returned: runsc's own text never comes near it, 8 KiB of
 * objects opened and never closed does).  NUL bytes are allowed (no value
 * spans one). */
json_t *gv_log_errors(const char *text, size_t len);

/* runsc copies each error it logs to its stderr too (msg + "\n"), which is
 * the program's: how many bytes at the end of err[0, len) are those copies.
 * They are matched from the end of err backwards, each message of msgs (as
 * returned by gv_log_errors) at most once, the latest one that fits first;
 * a message without a copy (most of a gofer's or sandbox's: their stderr is
 * not the program's) is passed over, as is the order (several runsc
 * processes write).  What is stripped is exactly a sequence of "<msg>\n" of
 * msgs; 0 when the end of err is none. */
size_t gv_log_stderr_copies(const char *err, size_t len, const json_t *msgs);

#endif
