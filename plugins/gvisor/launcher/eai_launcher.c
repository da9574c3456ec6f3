/*
 * eai-launcher: the first process of a pooled gVisor sandbox
 * (docs/gvisor.md, "The launcher").  A static program with no needs in the
 * image: the plugin embeds it and binds it read-only at /.eai/launcher.
 *
 * `runsc run` starts it as the sandbox's init with stdin one end of a host
 * socketpair (the control socket) and stdout/stderr the host's pipes, which
 * become the program's.  It runs exactly one command:
 *
 *   0. with arguments (`/.eai/launcher python3 -c pass`), runs them first as
 *      a warm-up, twice at once, in /, with no input or output, for at most
 *      WARMUP_S seconds: the sandbox's caches then hold the runtime's files,
 *      which a fresh sandbox would read through its gofer on the critical
 *      path, and its first process starts cost the next one less (two at
 *      once measured ~8 ms faster than one; a warm-up that fails is
 *      ignored);
 *   1. writes "ready\n" on stdout: the warm pool's boot signal;
 *   2. reads one line of a fixed length from the control socket (so that
 *      nothing after it is consumed): the path of the launch file the host
 *      wrote into /tmp (its own tmpfs);
 *   3. reads that file and unlinks it:
 *        "EAI-LAUNCH-1" NUL  cwd NUL  argc NUL  argv... NUL  envc NUL
 *        env... NUL  input NUL          (input: "1" the program has stdin
 *                                        data, "0" none)
 *   4. starts the program in cwd with that argv (argv[0] looked up in the
 *      env's PATH, as runsc does) and env, stdout and stderr inherited,
 *      stdin a pipe: fed by a relay child with what follows the line on the
 *      control socket up to its EOF (the host's end shut for writing), or
 *      closed at once when there is no input; never the control socket;
 *   5. waits for it, kills and reaps every other process of the sandbox
 *      (the program's detached children: nothing writes into /tmp once it
 *      has ended) and writes "exit <code>\n" on the control socket (code:
 *      its exit status, or 128 + the signal that killed it, as runsc
 *      reports), then exits, which ends the sandbox.
 *
 * A failure before the program runs is "fail <text>\n" (the host reports
 * sandbox_failed); a program that cannot be executed is exit 127 (not found)
 * or 126 (not executable), as a shell would say, with one line on stderr.
 * The launcher is not dumpable, so the program cannot reach the control
 * socket through ptrace or /proc/1/fd.  Nothing here decides what the host
 * decides: the timeout, OOM, usage and output caps are read on the host.
 * Never a second command.
 *
 * `--session NAME` and `--run NAME PROG...` are a session's supervisor and
 * its executions instead (eai_launcher_session.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "eai_launcher.h"

#define CTL 0                        /* the control socket */
#define MAX_LAUNCH (4 << 20)         /* bytes of the launch file */
#define WARMUP_S 10
#define WARMUP_COPIES 2              /* the warm-up runs twice at once */
#define REAP_PASSES 200              /* kill(-1) + reap rounds at the end (~40 ms at most) */
#define LINE_PREFIX "/tmp/.eai-launch-"
#define LINE_LEN 34                  /* LINE_PREFIX, 16 hex digits, "\n" */

static void say(const char *what, const char *detail)
{
    char line[512];
    int n = snprintf(line, sizeof(line), "%s%s%s\n", what, detail ? " " : "", detail ? detail : "");
    if (n > (int)sizeof(line) - 1) {
        n = (int)sizeof(line) - 1;
        line[n - 1] = '\n';
    }
    for (int off = 0; off < n;) {
        ssize_t w = write(CTL, line + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        off += (int)w;
    }
}

static void fail(const char *what, int err)
{
    char d[300];
    snprintf(d, sizeof(d), "%s: %s", what, strerror(err));
    say("fail", d);
    _exit(125);
}

static void warm_up(char **argv)
{
    pid_t pids[WARMUP_COPIES];
    int live = 0;
    for (int c = 0; c < WARMUP_COPIES; c++) {
        pid_t pid = fork();
        if (pid == 0) {
            int null = open("/dev/null", O_RDWR);
            if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0 || chdir("/") < 0)
                _exit(125);
            execvp(argv[0], argv);
            _exit(127);
        }
        if (pid > 0)
            pids[live++] = pid;
    }
    for (int i = 0; i < WARMUP_S * 100 && live > 0; i++) {
        for (int c = 0; c < live;) {
            if (waitpid(pids[c], NULL, WNOHANG) != 0)
                pids[c] = pids[--live];
            else
                c++;
        }
        if (live > 0) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    for (int c = 0; c < live; c++) {
        kill(pids[c], SIGKILL);
        waitpid(pids[c], NULL, 0);
    }
}

/* The program has ended: so does every other process in the sandbox (its
 * detached children, the relay), killed and reaped before the answer, so
 * that nothing writes into /tmp while the host collects its files.  The
 * launcher is the sandbox's init: every orphan is its child.  Bounded: a
 * process forking while kill(-1) walks the list is caught by the next pass;
 * whatever still lives after REAP_PASSES is the host's (it kills the
 * sandbox's cgroup when it tears the sandbox down). */
static void end_the_rest(void)
{
    if (getpid() != 1)
        return; /* kill(-1) only as the init of a namespace of its own */
    for (int pass = 0; pass < REAP_PASSES; pass++) {
        int none = kill(-1, SIGKILL) < 0 && errno == ESRCH;
        pid_t w;
        while ((w = waitpid(-1, NULL, WNOHANG)) > 0 || (w < 0 && errno == EINTR)) {
        }
        if (none && w < 0 && errno == ECHILD)
            return;
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* `--unlink PATH`: the session files API's DELETE, run by `runsc exec` in
 * the session's sandbox (gvisor_session.c), so that gVisor's own kernel
 * unlinks the file and gives its space back at once; unlinked from the host
 * side, a file the sandbox has open (or once opened: gVisor caches it) kept
 * its blocks in the session's /tmp until the session ended (issue 36).
 * PATH was checked by the host (absolute, under /tmp, no "." or ".."
 * segment).  A link is removed, never followed at its end.  Exit 0, 2 no
 * such file, 3 a directory not empty, 1 anything else. */
static int unlink_tmp(const char *path)
{
    if (strncmp(path, "/tmp/", 5) != 0 || strstr(path, "/../") || strstr(path, "/./"))
        return 1;
    if (unlink(path) == 0)
        return 0;
    if ((errno == EISDIR || errno == EPERM) && rmdir(path) == 0)
        return 0;
    return errno == ENOENT || errno == ENOTDIR ? 2 : errno == ENOTEMPTY || errno == EEXIST ? 3 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--unlink"))
        return unlink_tmp(argv[2]);
    /* a session's supervisor and its clients (eai_launcher_session.c) */
    if (argc > 1 && !strcmp(argv[1], "--session"))
        return eai_launcher_session(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "--run"))
        return eai_launcher_run(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    /* not dumpable: the program (same uid) can neither ptrace the launcher
     * nor open its descriptors through /proc/1/fd (the control socket); an
     * exec'd program is dumpable again */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    if (argc > 1)
        warm_up(argv + 1);
    if (eai_write_all(1, "ready\n", 6) < 0)
        return 125;

    /* "/tmp/.eai-launch-<16 hex>\n" (gvisor_launcher.c): read whole, and
     * nothing past it (a stream read never returns more than asked) */
    char path[LINE_LEN + 1];
    for (size_t n = 0; n < LINE_LEN;) {
        ssize_t r = read(CTL, path + n, LINE_LEN - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 125; /* the host went away before a command */
        n += (size_t)r;
    }
    path[LINE_LEN] = '\0';
    if (strncmp(path, LINE_PREFIX, strlen(LINE_PREFIX)) != 0 || path[LINE_LEN - 1] != '\n' ||
        strspn(path + strlen(LINE_PREFIX), "0123456789abcdef") != LINE_LEN - 1 - strlen(LINE_PREFIX))
        fail("launch line", EINVAL);
    path[LINE_LEN - 1] = '\0';

    size_t len = 0, off = 0;
    char *buf = eai_read_file(path, MAX_LAUNCH, &len);
    if (!buf)
        fail(path, errno);
    unlink(path);
    const char *magic = eai_launcher_next_str(buf, len, &off);
    const char *cwd = eai_launcher_next_str(buf, len, &off);
    char **prog = magic && !strcmp(magic, "EAI-LAUNCH-1") && cwd ? eai_launcher_next_list(buf, len, &off, 1) : NULL;
    char **envp = prog ? eai_launcher_next_list(buf, len, &off, 0) : NULL;
    const char *input = envp ? eai_launcher_next_str(buf, len, &off) : NULL;
    if (!input || (strcmp(input, "0") && strcmp(input, "1")))
        fail("launch file", EINVAL);

    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        fail("pipe", errno);
    if (*input == '1') {
        /* the relay: control socket (to the host's EOF) -> stdin pipe */
        pid_t relay = fork();
        if (relay < 0)
            fail("fork", errno);
        if (relay == 0) {
            close(pipefd[0]);
            close(1); /* the program's output is not the relay's */
            close(2);
            static char chunk[65536];
            ssize_t r;
            while ((r = read(CTL, chunk, sizeof(chunk))) > 0 || (r < 0 && errno == EINTR))
                if (r > 0 && eai_write_all(pipefd[1], chunk, (size_t)r) < 0)
                    break; /* the program closed its stdin */
            _exit(0);
        }
    }
    close(pipefd[1]); /* the relay holds it, or none: EOF at once */

    /* posix_spawn (a vfork: no copy of our address space to make, which
     * under gVisor is a new host stub process) */
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t dflt;
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGPIPE);
    if (posix_spawn_file_actions_init(&fa) || posix_spawn_file_actions_adddup2(&fa, pipefd[0], 0) ||
        posix_spawn_file_actions_addchdir_np(&fa, cwd) || posix_spawnattr_init(&at) ||
        posix_spawnattr_setsigdefault(&at, &dflt) || posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF))
        fail("posix_spawn", ENOMEM);
    environ = envp; /* posix_spawnp looks prog[0] up in the program's PATH */
    pid_t pid;
    int e = posix_spawnp(&pid, prog[0], &fa, &at, prog, envp);
    close(pipefd[0]);
    if (e) {
        dprintf(2, "eai-launcher: %s: %s\n", prog[0], strerror(e));
        char code[16];
        snprintf(code, sizeof(code), "%d", e == ENOENT || e == ENOTDIR ? 127 : 126);
        say("exit", code);
        return 0;
    }

    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR)
            fail("waitpid", errno);
    }
    end_the_rest();
    char code[16];
    snprintf(code, sizeof(code), "%d", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    say("exit", code);
    return 0;
}
