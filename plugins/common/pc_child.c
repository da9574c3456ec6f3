/*
 * Child processes of the gVisor and Kata backends (runsc, ctr): fresh
 * descriptors only, every other fd closed, default signal dispositions,
 * own process group; watched with a pidfd on the loop: never a blocking
 * waitpid on the loop thread.
 *
 * On the loop they are forked (_Fork, then async-signal-safe calls only
 * until execve), not posix_spawn'd: glibc's posix_spawn is a vfork, which
 * holds the caller until the child has exec'd, and on a busy machine the
 * child waits for a CPU first (50 ms of a stalled loop measured beside a
 * sandbox boot, docs/performance.md).  A fork returns at once; its cost is
 * the page tables of eaid's small heap.  A binary that cannot be run is
 * refused before the fork (access X_OK, the usual failure); an execve that
 * fails after it ends the child with 127 and a line on its stderr.  The
 * blocking variant for workers (eai_pc_run_sync) keeps posix_spawn.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "eai_pc.h"

#define PC_CAPTURE_MAX 8192

extern char **environ;

struct eai_pc_child {
    const void *owner;
    struct eai_pc_child *next;     /* every live child of this plugin */
    pid_t pid;
    int pidfd;
    int cap_fd;
    struct event *ev_exit;
    struct event *ev_cap;
    struct event *ev_timeout;
    eai_pc_child_done_fn cb;
    void *arg;
    char out[PC_CAPTURE_MAX + 1];
    size_t outlen;
};

static struct eai_pc_child *g_children; /* loop thread only */

static void child_unlink(struct eai_pc_child *c)
{
    for (struct eai_pc_child **pp = &g_children; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            return;
        }
    }
}

static int pc_pidfd_open(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

static pid_t spawn_fds(char *const argv[], int fd_in, int fd_out, int fd_err)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    pid_t pid = -1;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return -1;
    if (posix_spawnattr_init(&at) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        return -1;
    }
    int fds[3] = {fd_in, fd_out, fd_err};
    int ok = 1;
    for (int i = 0; i < 3 && ok; i++) {
        if (fds[i] >= 0)
            ok = posix_spawn_file_actions_adddup2(&fa, fds[i], i) == 0;
        else
            ok = posix_spawn_file_actions_addopen(&fa, i, "/dev/null", i == 0 ? O_RDONLY : O_WRONLY, 0) == 0;
    }
    /* Nothing of the server leaks into runsc or ctr, even an fd without CLOEXEC. */
    ok = ok && posix_spawn_file_actions_addclosefrom_np(&fa, 3) == 0;
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    ok = ok && posix_spawnattr_setsigdefault(&at, &all) == 0 && posix_spawnattr_setsigmask(&at, &none) == 0 &&
         posix_spawnattr_setpgroup(&at, 0) == 0 &&
         posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP) == 0;
    if (ok) {
        int rc = posix_spawn(&pid, argv[0], &fa, &at, argv, environ);
        if (rc != 0) {
            errno = rc;
            pid = -1;
        }
    }
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

/* In the forked child: "eai: cannot execute <argv0>: errno <n>" on fd 2. */
static void child_exec_failed(const char *path, int err)
{
    char num[16];
    int n = 0;
    do
        num[sizeof(num) - 1 - n++] = (char)('0' + err % 10);
    while ((err /= 10) && n < (int)sizeof(num) - 1);
    struct iovec iov[] = {{(void *)"eai: cannot execute ", 20},
                          {(void *)path, strlen(path)},
                          {(void *)": errno ", 8},
                          {num + sizeof(num) - n, (size_t)n},
                          {(void *)"\n", 1}};
    ssize_t w = writev(2, iov, 5);
    (void)w;
}

/* The forked child, up to execve: async-signal-safe calls only (the parent
 * has other threads, whose locks the child may hold copies of).  Signals
 * arrive blocked (fork_fds). */
static void child_exec(char *const argv[], const int fds[3])
{
    for (int i = 0; i < 3; i++) {
        if (fds[i] == i) {
            if (fcntl(i, F_SETFD, 0) < 0)
                _exit(127);
        } else if (fds[i] >= 0) {
            if (dup2(fds[i], i) < 0)
                _exit(127);
        } else {
            int n = open("/dev/null", i == 0 ? O_RDONLY : O_WRONLY);
            if (n < 0 || (n != i && (dup2(n, i) < 0 || close(n) < 0)))
                _exit(127);
        }
    }
    /* Nothing of the server leaks into runsc or ctr, even an fd without CLOEXEC. */
    if (close_range(3, ~0U, 0) < 0)
        _exit(127);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        sigaction(s, &dfl, NULL); /* (SIGKILL, SIGSTOP and glibc's own refuse: fine) */
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(argv[0], argv, environ);
    child_exec_failed(argv[0], errno);
    _exit(127);
}

/* fork + exec for the loop thread (see the top of the file): the pid, or
 * -1 with errno (argv[0] not executable, no process). */
static pid_t fork_fds(char *const argv[], int fd_in, int fd_out, int fd_err)
{
    if (access(argv[0], X_OK) < 0)
        return -1;
    int fds[3] = {fd_in, fd_out, fd_err};
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* no handler of eaid's runs in the child */
    pid_t pid = _Fork();
    if (pid == 0)
        child_exec(argv, fds);
    int saved = errno;
    if (pid > 0)
        setpgid(pid, pid); /* (the child does it too: whichever runs first) */
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved;
    return pid;
}

static void child_free(struct eai_pc_child *c)
{
    if (c->ev_exit)
        event_free(c->ev_exit);
    if (c->ev_cap)
        event_free(c->ev_cap);
    if (c->ev_timeout)
        event_free(c->ev_timeout);
    if (c->pidfd >= 0)
        close(c->pidfd);
    if (c->cap_fd >= 0)
        close(c->cap_fd);
    free(c);
}

static void cap_drain(struct eai_pc_child *c)
{
    char buf[4096];
    for (int i = 0; i < 64; i++) { /* bounded: a chatty grandchild must not pin the loop */
        ssize_t r = read(c->cap_fd, buf, sizeof(buf));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0 || errno != EAGAIN) {
                event_del(c->ev_cap);
                close(c->cap_fd);
                c->cap_fd = -1;
            }
            return;
        }
        size_t room = PC_CAPTURE_MAX - c->outlen;
        size_t n = (size_t)r < room ? (size_t)r : room;
        memcpy(c->out + c->outlen, buf, n);
        c->outlen += n;
    }
}

static void on_cap(evutil_socket_t fd, short what, void *arg)
{
    cap_drain(arg);
}

static void child_finish(struct eai_pc_child *c, int status)
{
    child_unlink(c);
    if (c->cap_fd >= 0)
        cap_drain(c);
    c->out[c->outlen] = '\0';
    if (c->cb)
        c->cb(c->arg, status, c->out, c->outlen);
    child_free(c);
}

static void on_exit_ready(evutil_socket_t fd, short what, void *arg)
{
    struct eai_pc_child *c = arg;
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (waitid(P_PIDFD, (id_t)c->pidfd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
        return; /* spurious */
    int status;
    if (si.si_code == CLD_EXITED)
        status = (si.si_status & 0xff) << 8;
    else
        status = si.si_status & 0x7f; /* killed by signal */
    child_finish(c, status);
}

void eai_pc_child_reap_all(const void *owner)
{
    for (;;) {
        struct eai_pc_child *c = g_children;
        while (c && c->owner != owner)
            c = c->next;
        if (!c)
            return;
        kill(-c->pid, SIGKILL);
        kill(c->pid, SIGKILL);
        int status = 0;
        while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR) {
        }
        child_finish(c, status);
    }
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct eai_pc_child *c = arg;
    kill(-c->pid, SIGKILL);
    kill(c->pid, SIGKILL);
}

struct eai_pc_child *eai_pc_child_spawn(struct event_base *base, const void *owner, char *const argv[], int fd_in,
                                        int fd_out, int fd_err, int capture, int64_t timeout_ms,
                                        eai_pc_child_done_fn cb, void *arg)
{
    struct eai_pc_child *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->owner = owner;
    c->pidfd = -1;
    c->cap_fd = -1;
    c->cb = cb;
    c->arg = arg;
    int cap[2] = {-1, -1};
    if (capture) {
        if (pipe2(cap, O_CLOEXEC | O_NONBLOCK) < 0) {
            free(c);
            return NULL;
        }
        fd_out = fd_err = cap[1];
    }
    c->pid = fork_fds(argv, fd_in, fd_out, fd_err);
    int saved = errno;
    if (cap[1] >= 0)
        close(cap[1]);
    c->cap_fd = cap[0];
    if (c->pid < 0) {
        child_free(c);
        errno = saved;
        return NULL;
    }
    /* The child is ours and unreaped, so the pid cannot be reused yet. */
    c->pidfd = pc_pidfd_open(c->pid);
    c->ev_exit = c->pidfd >= 0 ? event_new(base, c->pidfd, EV_READ | EV_PERSIST, on_exit_ready, c) : NULL;
    if (c->cap_fd >= 0)
        c->ev_cap = event_new(base, c->cap_fd, EV_READ | EV_PERSIST, on_cap, c);
    if (timeout_ms > 0)
        c->ev_timeout = evtimer_new(base, on_timeout, c);
    if (!c->ev_exit || (c->cap_fd >= 0 && !c->ev_cap) || (timeout_ms > 0 && !c->ev_timeout) ||
        event_add(c->ev_exit, NULL) < 0 || (c->ev_cap && event_add(c->ev_cap, NULL) < 0)) {
        /* Cannot watch it: do not leave it running unwatched. */
        kill(-c->pid, SIGKILL);
        kill(c->pid, SIGKILL);
        while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR) {
        }
        child_free(c);
        errno = ENOMEM;
        return NULL;
    }
    if (c->ev_timeout) {
        struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
        event_add(c->ev_timeout, &tv);
    }
    c->next = g_children;
    g_children = c;
    return c;
}

pid_t eai_pc_child_pid(const struct eai_pc_child *c)
{
    return c->pid;
}

void eai_pc_child_detach(struct eai_pc_child *c)
{
    c->cb = NULL;
}

int eai_pc_run_sync(char *const argv[], int64_t timeout_ms, char *out, size_t outlen)
{
    int cap[2] = {-1, -1};
    if (out && outlen) {
        out[0] = '\0';
        if (pipe2(cap, O_CLOEXEC | O_NONBLOCK) < 0)
            return -1;
    }
    pid_t pid = spawn_fds(argv, -1, cap[1], cap[1]);
    if (cap[1] >= 0)
        close(cap[1]);
    if (pid < 0) {
        if (cap[0] >= 0)
            close(cap[0]);
        return -1;
    }
    int pidfd = pc_pidfd_open(pid);
    int64_t deadline = eai_monotonic_ms() + timeout_ms;
    size_t got = 0;
    int status = -1;
    for (;;) {
        struct pollfd p[2] = {{.fd = pidfd, .events = POLLIN}, {.fd = cap[0], .events = POLLIN}};
        int64_t left = deadline - eai_monotonic_ms();
        if (left <= 0) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            deadline = eai_monotonic_ms() + 60000;
            left = 1000;
        }
        int n = poll(p, 2, (int)(left > 1000 ? 1000 : left));
        if (n < 0 && errno != EINTR)
            break;
        if (cap[0] >= 0 && (p[1].revents & (POLLIN | POLLHUP))) {
            char buf[4096];
            ssize_t r = read(cap[0], buf, sizeof(buf));
            if (r > 0 && got + 1 < outlen) {
                size_t k = (size_t)r < outlen - 1 - got ? (size_t)r : outlen - 1 - got;
                memcpy(out + got, buf, k);
                got += k;
                out[got] = '\0';
            } else if (r == 0) {
                close(cap[0]);
                cap[0] = -1;
            }
        }
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            status = -1;
            break;
        }
    }
    if (pidfd >= 0)
        close(pidfd);
    if (cap[0] >= 0)
        close(cap[0]);
    return status;
}
