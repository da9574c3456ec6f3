/*
 * eai-isolation-script.so: a test double for tests/hostile/test_stream_http.py
 * (label http, no sandbox runtime).  The command is a script run on the
 * loop's timers, one step an argument:
 *   o:TEXT   TEXT and a newline on stdout      e:TEXT   the same on stderr
 *   O:TEXT   TEXT on stdout, as N one-byte chunks (coalescing)
 *   s:MS     wait MS milliseconds              x:CODE   exit with CODE
 * The end of the script is exit 0; cancel ends it cancelled.  Never install it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <event2/event.h>
#include <eai/isolation.h>

struct run {
    const struct eai_host *host;
    const struct eai_iso_callbacks *cb;
    void *arg;
    char **argv;
    size_t n, pc;
    struct event *ev;
    int started, cancelled;
};

static void *sc_create(const struct eai_host *host, const json_t *config, struct eai_error **err)
{
    (void)config;
    (void)err;
    return (void *)host;
}

static void sc_destroy(void *self) { (void)self; }

static void sc_probe(void *self, struct eai_iso_probe *out)
{
    (void)self;
    out->ready = 1;
    out->caps = 0;
    strcpy(out->version, "script 1 (test double)");
    out->reason[0] = '\0';
}

static void run_free(struct run *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->argv[i]);
    free(r->argv);
    event_free(r->ev);
    free(r);
}

static void finish(struct run *r, enum eai_iso_outcome out, int code)
{
    struct eai_iso_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    res.outcome = out;
    res.exit_code = code;
    r->cb->on_exit(r->arg, &res);
    run_free(r);
}

static void step(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct run *r = arg;
    if (!r->started) {
        r->started = 1;
        r->cb->on_started(r->arg);
    }
    if (r->cancelled) {
        finish(r, EAI_OUT_CANCELLED, -1);
        return;
    }
    while (r->pc < r->n) {
        const char *a = r->argv[r->pc++];
        if ((a[0] == 'o' || a[0] == 'e') && a[1] == ':') {
            size_t len = strlen(a + 2);
            char *line = malloc(len + 1);
            if (line) {
                memcpy(line, a + 2, len);
                line[len] = '\n';
                r->cb->on_output(r->arg, a[0] == 'e' ? EAI_STREAM_STDERR : EAI_STREAM_STDOUT, line, len + 1);
                free(line);
            }
        } else if (a[0] == 'O' && a[1] == ':') {
            for (const char *p = a + 2; *p; p++)
                r->cb->on_output(r->arg, EAI_STREAM_STDOUT, p, 1);
        } else if (a[0] == 's' && a[1] == ':') {
            long ms = strtol(a + 2, NULL, 10);
            struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
            event_add(r->ev, &tv);
            return;
        } else if (a[0] == 'x' && a[1] == ':') {
            int code = atoi(a + 2);
            finish(r, EAI_OUT_EXITED, code);
            return;
        }
    }
    finish(r, EAI_OUT_EXITED, 0);
}

static int sc_start(void *self, const struct eai_iso_job *job, const struct eai_iso_callbacks *cb,
                    void *cb_arg, void **handle, struct eai_error **err)
{
    const struct eai_host *host = self;
    struct run *r = calloc(1, sizeof *r);
    size_t n = 0;
    while (job->argv && job->argv[n])
        n++;
    if (r)
        r->argv = calloc(n ? n : 1, sizeof *r->argv);
    if (!r || !r->argv || !(r->ev = evtimer_new(host->base, step, r))) {
        if (r)
            free(r->argv);
        free(r);
        *err = host->error_new(EAI_E_INTERNAL, 0, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        r->argv[r->n++] = strdup(job->argv[i]);
    r->host = host;
    r->cb = cb;
    r->arg = cb_arg;
    struct timeval now = {0, 0};
    event_add(r->ev, &now);
    *handle = r;
    return 0;
}

static void sc_cancel(void *self, void *handle)
{
    (void)self;
    struct run *r = handle;
    r->cancelled = 1;
    struct timeval now = {0, 0};
    event_del(r->ev);
    event_add(r->ev, &now);
}

static const struct eai_isolation_ops sc_ops = {
    .size = sizeof(struct eai_isolation_ops),
    .probe = sc_probe,
    .start = sc_start,
    .cancel = sc_cancel,
};

static const struct eai_config_key sc_keys[] = {{NULL, 0, 0, NULL, NULL}};

static const struct eai_plugin_descriptor sc_desc = {
    EAI_PLUGIN_DESCRIPTOR_HEADER, /* ABI version, size and build fingerprint */
    .name = "script",
    .kind = EAI_KIND_ISOLATION,
    .version = "1",
    .create = sc_create,
    .destroy = sc_destroy,
    .ops = &sc_ops,
    .config_keys = sc_keys,
};

EAI_PLUGIN_DECLARE(sc_desc)
