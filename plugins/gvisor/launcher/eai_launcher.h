/*
 * eai-launcher's session modes (eai_launcher_session.c), dispatched from
 * main (eai_launcher.c) by the first argument.
 */
#ifndef EAI_LAUNCHER_H
#define EAI_LAUNCHER_H

#include <stddef.h>

#include "eaibase.h" /* eai_read_file, eai_write_all (lib/eaibase, compiled in) */

/* `--session NAME`: a session sandbox's init, the supervisor.  Returns
 * only on a failure at start (125). */
int eai_launcher_session(int argc, char **argv);
/* `--run NAME PROG ARGS...`: one execution in the session; returns its exit
 * code (125: the supervisor refused or could not be reached). */
int eai_launcher_run(int argc, char **argv);

/* eai_launcher_session.c: shared by both modes. */
struct sockaddr_un;
int eai_launcher_name_ok(const char *name); /* 1: [A-Za-z0-9._-], 1 to 64 bytes */
/* The abstract address "@name"; its length. */
unsigned eai_launcher_addr(const char *name, struct sockaddr_un *sa);
/* NUL-separated strings of a launch file or request: the next one, or NULL;
 * a count then that many strings as a new NULL-terminated array (the caller
 * frees the array, the strings point into buf), or NULL. */
const char *eai_launcher_next_str(const char *buf, size_t len, size_t *off);
char **eai_launcher_next_list(const char *buf, size_t len, size_t *off, int at_least_one);
/* A request's body (after its length): "EAI-RUN-1" NUL cwd NUL argc NUL
 * argv... NUL envc NUL env... NUL, nothing after.  0 with *cwd and the
 * strings of *argv (at least one) and *envp pointing into req (the two
 * NULL-terminated arrays are the caller's to free), or -1.
 * tests/fuzz/fuzz_launcher_request.c. */
int eai_launcher_request_parse(const char *req, size_t len, const char **cwd, char ***argv, char ***envp);

#endif
