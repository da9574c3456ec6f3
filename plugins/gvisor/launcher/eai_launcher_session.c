/*
 * eai-launcher's two session modes (docs/sessions.md "Inside (gVisor)",
 * docs/gvisor.md "The session supervisor"): a session's programs are the
 * children of the sandbox's own init, never of `runsc exec`, because gVisor
 * since 2024 kills at `runsc restore` every process `runsc exec` started and
 * their children (runsc/boot/restore.go, "the caller is no longer
 * connected"): a session's background processes would not outlive a pause.
 *
 *   launcher --session NAME     the session's init (pid 1), the supervisor:
 *       listens on the abstract unix stream socket "@NAME", writes "ready\n"
 *       on stdout, then puts /dev/null on its stdin, stdout and stderr (it
 *       holds no host descriptor any more: nothing of `runsc run`'s stdio
 *       has to come back at a restore, whichever runsc) and serves clients
 *       until the sandbox ends.  It reaps every process reparented to it
 *       and kills none of them.
 *
 *   launcher --run NAME PROG ARGS...   one execution (`runsc exec` of it):
 *       makes three pipes of the sandbox's own and connects to "@NAME",
 *       sends one request with the program's ends of them attached
 *       (SCM_RIGHTS: its stdin's read end, its stdout's and stderr's write
 *       ends):
 *           be32 length, then "EAI-RUN-1" NUL cwd NUL argc NUL argv... NUL
 *           envc NUL env... NUL      (its own cwd and environment)
 *       and relays its own stdin (runsc exec's, the host's pipe) to the
 *       program's and the program's stdout and stderr to its own.  The
 *       program never holds a host descriptor, nor does what it leaves in
 *       the background: Debian's runsc cannot restore a sandbox in which a
 *       process holds one that came with `runsc exec` (measured: the restore
 *       fails), the runsc of 2026 leaves such a descriptor dead.
 *       The supervisor starts PROG as its own child in a session of its own
 *       (setsid), in cwd, with that argv (PROG looked up in the env's PATH)
 *       and env, and those three descriptors as its 0, 1, 2.  It answers
 *       "started <pid>\n", then "exit <code>\n" (its exit status, or 128 +
 *       the signal that killed it, as runsc reports) once it has reaped it;
 *       the client copies what the program's pipes hold then (until empty,
 *       not until EOF: a background process may hold them) and exits with
 *       that code, so runsc exec reports what it always did.  A request it
 *       refuses is answered "fail <text>\n" (the client says it on stderr
 *       and exits 125); a program that cannot be executed is 127 (or 126)
 *       with one line on its stderr, as a shell says.
 *
 *       The client dying (the host's timeout or cancel: `runsc kill --pid`
 *       of the client, or anything else) before the answer makes the
 *       supervisor SIGKILL the program, its pid only: what it left in the
 *       background stays, as with `runsc kill --pid` of the program before.
 *
 * Bounds: at most MAX_CLIENTS connections at once (more wait in the listen
 * backlog), a request at most MAX_REQ bytes and complete within REQ_S
 * seconds of the connection, exactly three descriptors with it, nothing
 * after it: anything else is refused and the connection closed.  The
 * supervisor never blocks on a client (non-blocking sockets; an answer that
 * does not fit closes the connection).  Any process of the sandbox can
 * connect (they all run as the same user): it can then start programs and
 * have them killed, which it could do itself.  No client ever holds the
 * listening socket or another client's connection (close-on-exec).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "eai_launcher.h"

#define MAX_CLIENTS 64
#define MAX_REQ (4 << 20)            /* bytes of one request (GV_LAUNCH_MAX) */
#define MAX_ARGS 65536
#define REQ_S 10                     /* a request arrives whole within this */
#define MAGIC "EAI-RUN-1"

/* ------------------------------------------------------------ common */

int eai_launcher_name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    return n > 0 && n <= 64 &&
           strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

unsigned eai_launcher_addr(const char *name, struct sockaddr_un *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    size_t n = strlen(name);
    memcpy(sa->sun_path + 1, name, n); /* abstract: sun_path[0] is NUL */
    return (unsigned)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* ------------------------------------------------------------ the supervisor */

enum cl_state { CL_FREE = 0, CL_READING, CL_RUNNING };

struct client {
    enum cl_state state;
    int fd;
    int io[3];                       /* the descriptors it sent, or -1 */
    unsigned char hdr[4];
    size_t hdr_got;
    char *req;
    size_t req_len, req_got;
    time_t since;
    pid_t pid;
};

static struct client clients[MAX_CLIENTS];
static volatile sig_atomic_t got_chld;

static void on_chld(int sig)
{
    (void)sig;
    got_chld = 1;
}

static void client_close(struct client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    for (int i = 0; i < 3; i++)
        if (c->io[i] >= 0)
            close(c->io[i]);
    free(c->req);
    memset(c, 0, sizeof(*c));
    c->fd = c->io[0] = c->io[1] = c->io[2] = -1;
}

/* One line to the client; it does not fit (a client that does not read):
 * the connection goes. */
static int answer(struct client *c, const char *what, const char *detail)
{
    char line[320];
    int n = snprintf(line, sizeof(line), "%s %s\n", what, detail);
    if (n >= (int)sizeof(line)) {
        n = (int)sizeof(line) - 1;
        line[n - 1] = '\n';
    }
    ssize_t w;
    while ((w = send(c->fd, line, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL)) < 0 && errno == EINTR) {
    }
    return w == n ? 0 : -1;
}

static void refuse(struct client *c, const char *why)
{
    answer(c, "fail", why);
    if (c->state == CL_RUNNING && c->pid > 0)
        kill(c->pid, SIGKILL);
    client_close(c);
}

const char *eai_launcher_next_str(const char *buf, size_t len, size_t *off)
{
    if (*off >= len)
        return NULL;
    const char *s = buf + *off;
    const char *nul = memchr(s, '\0', len - *off);
    if (!nul)
        return NULL;
    *off += (size_t)(nul - s) + 1;
    return s;
}

char **eai_launcher_next_list(const char *buf, size_t len, size_t *off, int at_least_one)
{
    const char *n = eai_launcher_next_str(buf, len, off);
    char *end = NULL;
    long count = n ? strtol(n, &end, 10) : -1;
    if (!n || !*n || *end || count < (at_least_one ? 1 : 0) || count > MAX_ARGS)
        return NULL;
    char **v = calloc((size_t)count + 1, sizeof(*v));
    for (long i = 0; v && i < count; i++) {
        if (!(v[i] = (char *)eai_launcher_next_str(buf, len, off))) {
            free(v);
            return NULL;
        }
    }
    return v;
}

int eai_launcher_request_parse(const char *req, size_t len, const char **cwd, char ***argv, char ***envp)
{
    size_t off = 0;
    const char *magic = eai_launcher_next_str(req, len, &off);
    const char *dir = eai_launcher_next_str(req, len, &off);
    char **prog = magic && !strcmp(magic, MAGIC) && dir ? eai_launcher_next_list(req, len, &off, 1) : NULL;
    char **env = prog ? eai_launcher_next_list(req, len, &off, 0) : NULL;
    if (!env || off != len) {
        free(prog);
        free(env);
        return -1;
    }
    *cwd = dir;
    *argv = prog;
    *envp = env;
    return 0;
}

/* The whole request is in: start its program. */
static void start(struct client *c)
{
    const char *cwd = NULL;
    char **prog = NULL, **envp = NULL;
    if (eai_launcher_request_parse(c->req, c->req_len, &cwd, &prog, &envp) < 0) {
        refuse(c, "bad request");
        return;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t dflt, none;
    sigemptyset(&none);
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGPIPE);
    sigaddset(&dflt, SIGCHLD);
    int e = posix_spawn_file_actions_init(&fa) || posix_spawnattr_init(&at);
    e = e || posix_spawn_file_actions_adddup2(&fa, c->io[0], 0) || posix_spawn_file_actions_adddup2(&fa, c->io[1], 1) ||
        posix_spawn_file_actions_adddup2(&fa, c->io[2], 2) || posix_spawn_file_actions_addchdir_np(&fa, cwd) ||
        posix_spawnattr_setsigdefault(&at, &dflt) || posix_spawnattr_setsigmask(&at, &none) ||
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    pid_t pid = 0;
    if (!e) {
        char **saved = environ;
        environ = envp; /* posix_spawnp looks prog[0] up in the program's PATH */
        e = posix_spawnp(&pid, prog[0], &fa, &at, prog, envp);
        environ = saved;
    } else {
        e = ENOMEM;
    }
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (e) {
        dprintf(c->io[2], "eai-launcher: %s: %s\n", prog[0], strerror(e));
        free(prog);
        free(envp);
        answer(c, "exit", e == ENOENT || e == ENOTDIR ? "127" : "126");
        client_close(c);
        return;
    }
    free(prog);
    free(envp);
    /* the program holds them now; we keep none of the host's */
    for (int i = 0; i < 3; i++) {
        close(c->io[i]);
        c->io[i] = -1;
    }
    free(c->req);
    c->req = NULL;
    c->state = CL_RUNNING;
    c->pid = pid;
    char num[24];
    snprintf(num, sizeof(num), "%d", (int)pid);
    if (answer(c, "started", num) < 0)
        refuse(c, "the client does not read");
}

/* Readable: more of the request, or (running) the client's end. */
static void client_read(struct client *c)
{
    if (c->state == CL_RUNNING) {
        char b;
        ssize_t r = recv(c->fd, &b, 1, MSG_DONTWAIT);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (r == 0 || r < 0) { /* gone: its program goes, its program's children stay */
            kill(c->pid, SIGKILL);
            client_close(c);
            return;
        }
        refuse(c, "nothing may follow the request");
        return;
    }
    char *dst = c->hdr_got < 4 ? (char *)c->hdr + c->hdr_got : c->req + c->req_got;
    size_t want = c->hdr_got < 4 ? 4 - c->hdr_got : c->req_len - c->req_got;
    union {
        char buf[CMSG_SPACE(3 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {dst, want};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
    ssize_t r = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (r <= 0) {
        client_close(c);
        return;
    }
    int bad = (mh.msg_flags & MSG_CTRUNC) != 0; /* more than three: the kernel closed the rest */
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int got[3] = {-1, -1, -1};
        memcpy(got, CMSG_DATA(cm), (nfd < 3 ? nfd : 3) * sizeof(int));
        if (!bad && nfd == 3 && c->io[0] < 0) {
            memcpy(c->io, got, sizeof(got));
            continue;
        }
        bad = 1;
        for (size_t i = 0; i < nfd && i < 3; i++)
            close(got[i]);
    }
    if (bad) {
        refuse(c, "descriptors: exactly three, once");
        return;
    }
    if (c->hdr_got < 4) {
        c->hdr_got += (size_t)r;
        if (c->hdr_got < 4)
            return;
        uint32_t n = (uint32_t)c->hdr[0] << 24 | (uint32_t)c->hdr[1] << 16 | (uint32_t)c->hdr[2] << 8 | c->hdr[3];
        if (n == 0 || n > MAX_REQ) {
            refuse(c, "request too large");
            return;
        }
        if (c->io[0] < 0) {
            refuse(c, "descriptors: exactly three, with the length");
            return;
        }
        c->req_len = n;
        c->req = malloc(n);
        if (!c->req) {
            refuse(c, "out of memory");
            return;
        }
        return;
    }
    c->req_got += (size_t)r;
    if (c->req_got == c->req_len)
        start(c);
}

static void reap(void)
{
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0 || (pid < 0 && errno == EINTR)) {
        if (pid <= 0)
            continue;
        for (int i = 0; i < MAX_CLIENTS; i++) {
            struct client *c = &clients[i];
            if (c->state != CL_RUNNING || c->pid != pid)
                continue;
            char code[16];
            snprintf(code, sizeof(code), "%d", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
            answer(c, "exit", code);
            client_close(c);
            break;
        }
        /* else an orphan reparented to us, or a program whose client went */
    }
}

int eai_launcher_session(int argc, char **argv)
{
    if (argc != 3 || !eai_launcher_name_ok(argv[2])) {
        dprintf(2, "eai-launcher: usage: --session NAME\n");
        return 125;
    }
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    for (int i = 0; i < MAX_CLIENTS; i++) {
        memset(&clients[i], 0, sizeof(clients[i]));
        clients[i].fd = clients[i].io[0] = clients[i].io[1] = clients[i].io[2] = -1;
    }
    sigset_t chld, none;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigemptyset(&none);
    sigprocmask(SIG_BLOCK, &chld, NULL); /* taken only inside ppoll */
    struct sigaction sa = {.sa_handler = on_chld};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);

    struct sockaddr_un addr;
    socklen_t alen = eai_launcher_addr(argv[2], &addr);
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (ls < 0 || bind(ls, (struct sockaddr *)&addr, alen) < 0 || listen(ls, 64) < 0) {
        dprintf(2, "eai-launcher: listen @%s: %s\n", argv[2], strerror(errno));
        return 125;
    }
    if (eai_write_all(1, "ready\n", 6) < 0)
        return 125;
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
        return 125;
    close(null);

    struct pollfd pfd[MAX_CLIENTS + 1];
    int who[MAX_CLIENTS + 1];
    for (;;) {
        int n = 0, busy = 0, reading = 0;
        time_t now = time(NULL);
        for (int i = 0; i < MAX_CLIENTS; i++) {
            struct client *c = &clients[i];
            if (c->state == CL_READING && now - c->since > REQ_S) {
                refuse(c, "request not complete in time");
                continue;
            }
            if (c->state == CL_FREE)
                continue;
            busy++;
            reading += c->state == CL_READING;
            pfd[n] = (struct pollfd){.fd = c->fd, .events = POLLIN};
            who[n++] = i;
        }
        if (busy < MAX_CLIENTS) { /* else new ones wait in the backlog */
            pfd[n] = (struct pollfd){.fd = ls, .events = POLLIN};
            who[n++] = -1;
        }
        /* woken each second only while a request is being read (its
         * deadline); an idle session's init sleeps */
        struct timespec ts = {1, 0};
        int r = ppoll(pfd, (nfds_t)n, reading ? &ts : NULL, &none);
        if (got_chld || r < 0) {
            got_chld = 0;
            reap();
        }
        if (r <= 0)
            continue;
        for (int k = 0; k < n; k++) {
            if (!pfd[k].revents)
                continue;
            if (who[k] >= 0) {
                if (clients[who[k]].state != CL_FREE && clients[who[k]].fd == pfd[k].fd)
                    client_read(&clients[who[k]]);
                continue;
            }
            for (int i = 0; i < MAX_CLIENTS; i++) {
                if (clients[i].state != CL_FREE)
                    continue;
                int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0)
                    break;
                clients[i].state = CL_READING;
                clients[i].fd = fd;
                clients[i].since = time(NULL);
                break;
            }
        }
        /* a child may have ended while we read: its answer follows the
         * program's start, never precedes it */
        reap();
    }
}
