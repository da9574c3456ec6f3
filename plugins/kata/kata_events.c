/*
 * containerd's event stream for the Kata backend: one long-lived
 * `ctr --address A events` child per instance, its stdout read on the loop
 * and split into lines such as
 *
 *   2026-11-29 10:06:49.72 +0000 UTC eai /tasks/oom {"container_id":"eai-..."}
 *
 * Only our namespace's /containers/create, /tasks/start, /tasks/oom,
 * /tasks/exit (of the init process) and /containers/delete are passed on.
 * When the child dies it is restarted after KT_EVENTS_RESTART_MS.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "kata.h"

#define KT_LINE_MAX 65536

struct kt_events {
    struct kt *k;
    struct eai_pc_child *child;
    int fd;
    struct event *ev_read;
    struct event *ev_restart;
    char *line;
    size_t len;
    int overlong;                /* dropping the rest of a too long line */
};

int kt_event_parse(const char *line, const char *ns, char *topic, size_t topiclen, char *cid, size_t cidlen,
                   int *exit_status)
{
    /* <date> <time> <zone> <zone name> <namespace> <topic> <json> */
    const char *brace = strchr(line, '{');
    if (!brace)
        return -1;
    const char *p = brace;
    while (p > line && p[-1] == ' ')
        p--;
    const char *tend = p;
    while (p > line && p[-1] != ' ')
        p--;
    const char *tstart = p;
    if (tend <= tstart || *tstart != '/' || (size_t)(tend - tstart) >= topiclen)
        return -1;
    while (p > line && p[-1] == ' ')
        p--;
    const char *nend = p;
    while (p > line && p[-1] != ' ')
        p--;
    size_t nslen = strlen(ns);
    if ((size_t)(nend - p) != nslen || strncmp(p, ns, nslen) != 0)
        return -1;
    memcpy(topic, tstart, (size_t)(tend - tstart));
    topic[tend - tstart] = '\0';
    json_t *j = json_loads(brace, JSON_DISABLE_EOF_CHECK, NULL);
    if (!j)
        return -1;
    const char *c = json_string_value(json_object_get(j, "container_id"));
    if (!c)
        c = json_string_value(json_object_get(j, "id"));
    int rc = -1;
    if (c && strlen(c) < cidlen) {
        /* An exec'd process's exit carries its own id: not the task's end. */
        const char *id = json_string_value(json_object_get(j, "id"));
        if (!strcmp(topic, "/tasks/exit") && id && strcmp(id, c) != 0) {
            json_decref(j);
            return -1;
        }
        snprintf(cid, cidlen, "%s", c);
        json_t *st = json_object_get(j, "exit_status");
        *exit_status = json_is_integer(st) ? (int)json_integer_value(st) : 0;
        rc = 0;
    }
    json_decref(j);
    return rc;
}

static void handle_line(struct kt_events *ev, const char *line)
{
    char topic[64], cid[128];
    int status = 0;
    if (kt_event_parse(line, ev->k->ns, topic, sizeof(topic), cid, sizeof(cid), &status) < 0)
        return;
    if (strncmp(cid, KT_CID_PREFIX, strlen(KT_CID_PREFIX)) != 0)
        return;
    kt_on_event(ev->k, topic, cid, status);
}

static void read_close(struct kt_events *ev)
{
    if (ev->ev_read) {
        event_free(ev->ev_read);
        ev->ev_read = NULL;
    }
    if (ev->fd >= 0) {
        close(ev->fd);
        ev->fd = -1;
    }
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    struct kt_events *ev = arg;
    char buf[16384];
    for (int i = 0; i < 16 && ev->fd >= 0; i++) {
        ssize_t r = read(ev->fd, buf, sizeof(buf));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EAGAIN)
            return;
        if (r <= 0) {
            read_close(ev);
            return;
        }
        for (ssize_t j = 0; j < r; j++) {
            if (buf[j] == '\n') {
                if (!ev->overlong) {
                    ev->line[ev->len] = '\0';
                    handle_line(ev, ev->line);
                }
                ev->len = 0;
                ev->overlong = 0;
            } else if (ev->len + 1 < KT_LINE_MAX) {
                ev->line[ev->len++] = buf[j];
            } else {
                ev->overlong = 1;
            }
        }
    }
}

static int spawn_events(struct kt_events *ev);

static void on_restart(evutil_socket_t fd, short what, void *arg)
{
    struct kt_events *ev = arg;
    if (!ev->k->destroying && !ev->child && spawn_events(ev) < 0) {
        struct timeval tv = {KT_EVENTS_RESTART_MS / 1000, (KT_EVENTS_RESTART_MS % 1000) * 1000};
        evtimer_add(ev->ev_restart, &tv);
    }
}

static void on_child_exit(void *arg, int status, const char *out, size_t outlen)
{
    struct kt_events *ev = arg;
    ev->child = NULL;
    on_read(-1, 0, ev); /* what it printed before dying */
    read_close(ev);
    ev->len = 0;
    struct kt *k = ev->k;
    if (k->destroying)
        return;
    k->host->log(k->host, KT_COMPONENT, EAI_LOG_WARN, "ctr events ended (status %d): restarting", status);
    struct timeval tv = {KT_EVENTS_RESTART_MS / 1000, (KT_EVENTS_RESTART_MS % 1000) * 1000};
    evtimer_add(ev->ev_restart, &tv);
}

static int spawn_events(struct kt_events *ev)
{
    struct kt *k = ev->k;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    int fl = fcntl(p[0], F_GETFL);
    if (fl < 0 || fcntl(p[0], F_SETFL, fl | O_NONBLOCK) < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    char *argv[KT_CTR_ARGC + 2];
    kt_ctr_argv(k, argv);
    argv[KT_CTR_ARGC] = "events";
    argv[KT_CTR_ARGC + 1] = NULL;
    ev->fd = p[0];
    ev->ev_read = event_new(k->host->base, ev->fd, EV_READ | EV_PERSIST, on_read, ev);
    if (!ev->ev_read || event_add(ev->ev_read, NULL) < 0) {
        close(p[1]);
        read_close(ev);
        return -1;
    }
    ev->child = eai_pc_child_spawn(k->host->base, k, argv, -1, p[1], -1, 0, 0, on_child_exit, ev);
    close(p[1]);
    if (!ev->child) {
        read_close(ev);
        return -1;
    }
    return 0;
}

int kt_events_start(struct kt *k)
{
    if (k->events)
        return k->events->child ? 0 : -1;
    struct kt_events *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return -1;
    ev->k = k;
    ev->fd = -1;
    ev->line = malloc(KT_LINE_MAX);
    ev->ev_restart = evtimer_new(k->host->base, on_restart, ev);
    if (!ev->line || !ev->ev_restart) {
        free(ev->line);
        if (ev->ev_restart)
            event_free(ev->ev_restart);
        free(ev);
        return -1;
    }
    k->events = ev;
    if (spawn_events(ev) < 0) {
        struct timeval tv = {KT_EVENTS_RESTART_MS / 1000, (KT_EVENTS_RESTART_MS % 1000) * 1000};
        evtimer_add(ev->ev_restart, &tv);
        return -1;
    }
    return 0;
}

int kt_events_running(const struct kt *k)
{
    return k->events && k->events->child;
}

/* Kill the child (it is reaped by its pidfd watcher, which no longer calls
 * back) and free the reader. */
void kt_events_stop(struct kt *k)
{
    struct kt_events *ev = k->events;
    if (!ev)
        return;
    k->events = NULL;
    if (ev->child) {
        pid_t pid = eai_pc_child_pid(ev->child);
        eai_pc_child_detach(ev->child);
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        ev->child = NULL;
    }
    read_close(ev);
    event_free(ev->ev_restart);
    free(ev->line);
    free(ev);
}
