/*
 * eai-launcher's session modes (eai_launcher_session.c), dispatched from
 * main (eai_launcher.c) by the first argument.
 */
#ifndef EAI_LAUNCHER_H
#define EAI_LAUNCHER_H

/* `--session NAME`: a session sandbox's init, the supervisor.  Returns
 * only on a failure at start (125). */
int eai_launcher_session(int argc, char **argv);
/* `--run NAME PROG ARGS...`: one execution in the session; returns its exit
 * code (125: the supervisor refused or could not be reached). */
int eai_launcher_run(int argc, char **argv);

#endif
