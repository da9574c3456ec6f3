/* Helpers shared by the observability tests (header-only, static). */
#ifndef EAI_TESTS_OBS_COMMON_H
#define EAI_TESTS_OBS_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include <eai/storage.h>

#include "base/errors.h"
#include "plugin/host.h"
#include "store/store_sqlite.h"
#include "base/util.h"

extern char **environ;

static inline void obs_die(const char *what, struct eai_error *e)
{
    fprintf(stderr, "FATAL %s: %s\n", what, e && e->message ? e->message : "?");
    exit(2);
}

static inline char *obs_tmpdir(void)
{
    char tmpl[] = "/tmp/eai-obs-XXXXXX";
    char *d = mkdtemp(tmpl);
    if (!d)
        obs_die("mkdtemp", NULL);
    return strdup(d);
}

static inline void obs_rmrf(const char *dir)
{
    char cmd[512];
    if (dir && strncmp(dir, "/tmp/eai-obs-", 13) == 0) {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot remove %s\n", dir);
    }
}

/* A built-in SQLite store at <dir>/eai.db. */
static inline void *obs_store_new(const struct eai_host *host, const char *dir, const struct eai_storage_ops **ops)
{
    const struct eai_plugin_descriptor *d = eai_builtin_storage_sqlite();
    char path[512];
    snprintf(path, sizeof(path), "%s/eai.db", dir);
    json_t *conf = json_pack("{s:s}", "path", path);
    struct eai_error *e = NULL;
    void *st = d->create(host, conf, &e);
    json_decref(conf);
    if (!st)
        obs_die("sqlite create", e);
    *ops = d->ops;
    if ((*ops)->migrate(st, NULL, &e) < 0)
        obs_die("migrate", e);
    return st;
}

static inline void obs_store_free(void *st) { eai_builtin_storage_sqlite()->destroy(st); }

static inline char *obs_tenant(const struct eai_storage_ops *ops, void *st, const char *name)
{
    json_t *t = NULL;
    struct eai_error *e = NULL;
    if (ops->tenant_create(st, name, &t, &e) < 0)
        obs_die("tenant_create", e);
    char *id = strdup(json_string_value(json_object_get(t, "id")));
    json_decref(t);
    return id;
}

/* A free loopback TCP port (bound then released). */
static inline int obs_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) < 0)
        obs_die("free port", NULL);
    close(fd);
    return ntohs(a.sin_port);
}

static inline const char *obs_source_dir(void)
{
    const char *s = getenv("EAI_SOURCE_DIR");
    return s && *s ? s : EAI_SOURCE_DIR;
}

/* Start tests/obs/receiver.py; returns its pid, *port filled once listening. */
static inline pid_t obs_receiver_start(const char *mode, int port, const char *out, const char *dir, int *port_out)
{
    char script[512], portbuf[16], portfile[512];
    snprintf(script, sizeof(script), "%s/tests/obs/receiver.py", obs_source_dir());
    snprintf(portbuf, sizeof(portbuf), "%d", port);
    snprintf(portfile, sizeof(portfile), "%s/port-%s-%d", dir, mode, (int)eai_now_ms() % 100000);
    unlink(portfile);
    char *argv[] = {"python3", script, "--mode", (char *)mode, "--port", portbuf,
                    "--port-file", portfile, "--out", (char *)out, NULL};
    pid_t pid;
    if (posix_spawnp(&pid, "python3", NULL, NULL, argv, environ) != 0)
        obs_die("spawn receiver", NULL);
    for (int i = 0; i < 200; i++) {
        FILE *f = fopen(portfile, "r");
        if (f) {
            int p = 0;
            if (fscanf(f, "%d", &p) == 1 && p > 0) {
                fclose(f);
                if (port_out)
                    *port_out = p;
                return pid;
            }
            fclose(f);
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            obs_die("receiver exited early", NULL);
        usleep(25000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    obs_die("receiver did not start", NULL);
    return -1;
}

static inline void obs_receiver_stop(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGTERM);
    for (int i = 0; i < 100; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return;
        usleep(20000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* The receiver's records (array of objects), never NULL. */
static inline json_t *obs_records(const char *out)
{
    json_t *arr = json_array();
    FILE *f = fopen(out, "r");
    if (!f)
        return arr;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *r = json_loads(line, 0, NULL);
        if (r)
            json_array_append_new(arr, r);
    }
    free(line);
    fclose(f);
    return arr;
}

/* Run the loop until done(arg) or ms pass; 1 when done. */
static inline int obs_loop_until(struct event_base *base, int (*done)(void *), void *arg, int ms)
{
    int64_t end = eai_now_ms() + ms;
    while (eai_now_ms() < end) {
        if (done(arg))
            return 1;
        struct timeval tv = {0, 20000};
        event_base_loopexit(base, &tv);
        event_base_dispatch(base);
    }
    return done(arg);
}

#endif
