/*
 * eai-launcher --run NAME PROG ARGS...: one execution of a session, the
 * client of the session's supervisor (the protocol and why: the head of
 * eai_launcher_session.c).  `runsc exec` starts it with the execution's
 * stdio, env and cwd; it has the supervisor start PROG with pipes of the
 * sandbox's own, relays them, and exits with PROG's exit code.
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

#define MAX_REQ (4 << 20)            /* bytes of one request (as the supervisor) */
#define MAGIC "EAI-RUN-1"

/* ------------------------------------------------------------ the client */

static int put(char **buf, size_t *len, size_t *cap, const char *s)
{
    size_t n = strlen(s) + 1;
    if (*len + n > MAX_REQ)
        return -1;
    if (*len + n > *cap) {
        size_t c = *cap ? *cap * 2 : 4096;
        while (c < *len + n)
            c *= 2;
        char *nb = realloc(*buf, c);
        if (!nb)
            return -1;
        *buf = nb;
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    return 0;
}

static int client_fail(const char *what)
{
    dprintf(2, "eai-launcher: %s\n", what);
    return 125;
}

/* Write all of p to fd, waiting while it is full (runsc may have made ours
 * non-blocking). */
static int put_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EAGAIN) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            poll(&pf, 1, 1000);
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* What the program's pipe holds now, to our fd; EOF or nothing more: stop
 * (a background process still writing is not waited for, as the host reads
 * runsc's pipes until empty, not until EOF). */
static void drain(int from, int to)
{
    static char chunk[65536];
    for (int i = 0; from >= 0 && i < 256; i++) {
        ssize_t r = read(from, chunk, sizeof(chunk));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || put_all(to, chunk, (size_t)r) < 0)
            return;
    }
}

/* Relay our stdin to the program's, its stdout and stderr to ours, until
 * the supervisor's answer: "started <pid>\n", then "exit <code>\n" or
 * "fail <text>\n". */
static int relay(int s, int in, int out, int err)
{
    fcntl(in, F_SETFL, O_NONBLOCK);
    fcntl(out, F_SETFL, O_NONBLOCK);
    fcntl(err, F_SETFL, O_NONBLOCK);
    static char inbuf[65536], chunk[65536];
    size_t inlen = 0, inoff = 0;
    int our_in = 0; /* -1 once our stdin has ended */
    char line[512];
    size_t n = 0;
    for (;;) {
        struct pollfd pf[5];
        int np = 0, i_ctl = np++, i_out = -1, i_err = -1, i_stdin = -1, i_in = -1;
        pf[i_ctl] = (struct pollfd){.fd = s, .events = POLLIN};
        if (out >= 0)
            pf[i_out = np++] = (struct pollfd){.fd = out, .events = POLLIN};
        if (err >= 0)
            pf[i_err = np++] = (struct pollfd){.fd = err, .events = POLLIN};
        if (our_in >= 0 && in >= 0 && inlen == 0)
            pf[i_stdin = np++] = (struct pollfd){.fd = 0, .events = POLLIN};
        if (in >= 0 && inlen > inoff)
            pf[i_in = np++] = (struct pollfd){.fd = in, .events = POLLOUT};
        if (poll(pf, (nfds_t)np, -1) < 0) {
            if (errno == EINTR)
                continue;
            return client_fail("poll");
        }
        int fd2[2] = {out, err}, idx[2] = {i_out, i_err};
        for (int k = 0; k < 2; k++) {
            if (idx[k] < 0 || !pf[idx[k]].revents)
                continue;
            ssize_t r = read(fd2[k], chunk, sizeof(chunk));
            if (r > 0) {
                put_all(k ? 2 : 1, chunk, (size_t)r);
            } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                close(fd2[k]);
                if (k)
                    err = -1;
                else
                    out = -1;
            }
        }
        if (i_stdin >= 0 && pf[i_stdin].revents) {
            ssize_t r = read(0, inbuf, sizeof(inbuf));
            if (r > 0) {
                inlen = (size_t)r;
                inoff = 0;
            } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                our_in = -1;
                close(in); /* EOF for the program */
                in = -1;
            }
        }
        if (i_in >= 0 && pf[i_in].revents) {
            ssize_t w = write(in, inbuf + inoff, inlen - inoff);
            if (w > 0)
                inoff += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                close(in); /* the program closed its stdin: the rest is dropped */
                in = -1;
            }
            if (inoff == inlen)
                inlen = inoff = 0;
        }
        if (!pf[i_ctl].revents)
            continue;
        ssize_t r = read(s, line + n, sizeof(line) - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return client_fail("the session's supervisor went away");
        n += (size_t)r;
        line[n] = '\0';
        char *nl;
        while ((nl = memchr(line, '\n', n))) {
            *nl = '\0';
            if (!strncmp(line, "exit ", 5)) {
                char *end = NULL;
                long code = strtol(line + 5, &end, 10);
                drain(out, 1);
                drain(err, 2);
                return end && !*end && code >= 0 && code <= 255 ? (int)code : client_fail("bad answer");
            }
            if (!strncmp(line, "fail ", 5))
                return client_fail(line + 5);
            if (strncmp(line, "started ", 8))
                return client_fail("bad answer");
            n -= (size_t)(nl + 1 - line);
            memmove(line, nl + 1, n);
        }
        if (n >= sizeof(line) - 1)
            return client_fail("bad answer");
    }
}

int eai_launcher_run(int argc, char **argv)
{
    /* argv: --run NAME PROG ARGS... */
    if (argc < 4 || !eai_launcher_name_ok(argv[2]))
        return client_fail("usage: --run NAME PROG [ARGS...]");
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

    /* the request: 4 bytes of length first, filled in below */
    char *buf = NULL, cwd[4096], num[24];
    size_t len = 0, cap = 0;
    if (!getcwd(cwd, sizeof(cwd)))
        snprintf(cwd, sizeof(cwd), "/");
    int bad = put(&buf, &len, &cap, "len") < 0 || put(&buf, &len, &cap, MAGIC) < 0 || put(&buf, &len, &cap, cwd) < 0;
    snprintf(num, sizeof(num), "%d", argc - 3);
    bad = bad || put(&buf, &len, &cap, num) < 0;
    for (int i = 3; !bad && i < argc; i++)
        bad = put(&buf, &len, &cap, argv[i]) < 0;
    size_t envc = 0;
    while (environ && environ[envc])
        envc++;
    snprintf(num, sizeof(num), "%zu", envc);
    bad = bad || put(&buf, &len, &cap, num) < 0;
    for (size_t i = 0; !bad && i < envc; i++)
        bad = put(&buf, &len, &cap, environ[i]) < 0;
    if (bad)
        return client_fail("command and environment too large");
    uint32_t body = (uint32_t)(len - 4);
    buf[0] = (char)(body >> 24);
    buf[1] = (char)(body >> 16);
    buf[2] = (char)(body >> 8);
    buf[3] = (char)body;

    struct sockaddr_un sa;
    socklen_t salen = eai_launcher_addr(argv[2], &sa);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&sa, salen) < 0)
        return client_fail("cannot reach the session's supervisor");

    /* the program's stdin, stdout and stderr: pipes of the sandbox's own,
     * relayed here to and from ours (runsc exec's, the host's), so that
     * nothing the program leaves in the background holds a host descriptor
     * (Debian's runsc cannot restore a sandbox where one does) */
    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
        return client_fail("pipe");
    int fds[3] = {in[0], out[1], err[1]};
    union {
        char buf[CMSG_SPACE(sizeof(fds))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof(ctl));
    struct iovec iov = {buf, 4};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(fds));
    memcpy(CMSG_DATA(cm), fds, sizeof(fds));
    ssize_t w;
    while ((w = sendmsg(s, &mh, 0)) < 0 && errno == EINTR) {
    }
    if (w != 4 || eai_write_all(s, buf + 4, len - 4) < 0)
        return client_fail("the session's supervisor refused the request");
    free(buf);
    close(in[0]);
    close(out[1]);
    close(err[1]);
    return relay(s, in[1], out[0], err[0]);
}

