/*
 * Delivery loops: usage outbox -> FinOps plugin or ledger, audit events ->
 * audit sink, chain anchors.  See core/obs/delivery.h.
 *
 * One cycle of each loop at a time.  A cycle hops between a worker thread
 * (storage) and the loop thread (plugin calls, timers); the worker side
 * only touches its job struct, the loop side owns struct eai_dlv.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "obs/audit_verify.h"
#include "obs/callback_send.h"
#include "config/config.h"
#include "obs/delivery.h"
#include "base/errors.h"
#include "plugin/loader.h"
#include "plugin/open.h"
#include "base/log.h"
#include "obs/metrics.h"
#include "base/util.h"
#include "base/worker.h"

#define EAI_DLV_TICK_MS 250
#define EAI_DLV_IDLE_MS 1000
#define EAI_DLV_OUTBOX_FETCH 500
#define EAI_DLV_OUTBOX_PARALLEL 16
#define EAI_DLV_AUDIT_BATCH 256
#define EAI_DLV_AUDIT_TENANTS 16
#define EAI_DLV_AUDIT_SINK_MS 1000
#define EAI_DLV_ANCHOR_MS 5000       /* with the audit_heads op */
#define EAI_DLV_ANCHOR_SCAN_MS 60000 /* without it: lists every event */
#define EAI_DLV_CURSOR_PREFIX "audit_sink_cursor:"

enum { ROW_UNSENT = 0, ROW_INFLIGHT, ROW_OK, ROW_FAILED };

struct eai_dlv {
    struct eai_app *app;
    struct event *timer;
    int stopping;
    int refs;                          /* callbacks still to come */
    struct eai_plugin_inst own_finops; /* created here: destroyed here */
    struct eai_plugin_inst own_audit;
    struct eai_cb_sender *cbs;         /* completion callbacks: rows of the same outbox */

    /* outbox */
    int ob_busy, ob_failures, ob_logged;
    int64_t ob_next_ms;
    json_t *ob_rows;
    unsigned char *ob_state;
    size_t ob_n, ob_sent, ob_inflight;
    int ob_stop_sending;
    char ob_error[160];

    /* audit sink and anchors */
    int au_busy, au_failures;
    int64_t au_next_ms, au_anchor_next_ms;
    json_t *au_cursors;                /* tenant -> last shipped seq */
    json_t *au_batches;                /* [{tenant_id, events, last}] */
    unsigned char *au_ok;
    size_t au_pending;
};

static void dlv_unref(struct eai_dlv *d);


int64_t eai_delivery_backoff_ms(int n)
{
    if (n <= 0)
        return 0;
    int64_t ms = 250;
    for (int i = 1; i < n && ms < EAI_DELIVERY_BACKOFF_CAP_MS; i++)
        ms *= 2;
    return ms < EAI_DELIVERY_BACKOFF_CAP_MS ? ms : EAI_DELIVERY_BACKOFF_CAP_MS;
}

static int64_t jittered(int64_t ms)
{
    unsigned r = 0;
    eai_random_bytes(&r, sizeof(r));
    return ms + (int64_t)(r % (unsigned)(ms / 5 + 1)); /* up to +20 % */
}


static void log_err(const char *what, struct eai_error *e)
{
    eai_log("delivery", EAI_LOG_WARN, "%s: %s", what, e && e->message ? e->message : "unknown error");
    eai_error_free(e);
}

/* ================================================================ outbox */

struct ob_job {
    struct eai_dlv *d;
    const struct eai_storage_ops *ops;
    void *store;
    int ledger;                /* no FinOps plugin: deliver to the ledger */
    json_t *rows;              /* fetched rows */
    json_t *acks;              /* [[id, delivered]] for the ack job */
    size_t delivered, failed;
    struct eai_error *err;
};

static void ob_cycle(struct eai_dlv *d);

static void ob_fetch_work(void *arg)
{
    struct ob_job *j = arg;
    if (j->ops->outbox_fetch(j->store, EAI_DLV_OUTBOX_FETCH, &j->rows, &j->err) < 0) {
        j->rows = NULL;
        return;
    }
    if (!j->ledger)
        return;
    size_t i;
    json_t *row;
    json_array_foreach(j->rows, i, row) {
        const char *id = eai_jstr(row, "id"), *tenant = eai_jstr(row, "tenant_id");
        json_t *ev = json_object_get(row, "event");
        if (eai_cb_is_callback(ev))
            continue;  /* the callback sender's (callback_send.c) */
        if (!id || !tenant || !json_is_object(ev)) {
            j->failed++;
            continue;
        }
        if (!eai_jstr(ev, "tenant_id"))
            json_object_set_new(ev, "tenant_id", json_string(tenant));
        int r = j->ops->ledger_insert(j->store, tenant, ev, &j->err);
        if (r < 0 || j->ops->outbox_ack(j->store, id, 1, &j->err) < 0) {
            j->failed++;
            break;  /* storage trouble: retry the rest later */
        }
        j->delivered++;
    }
}

static void ob_finish_cycle(struct eai_dlv *d, size_t fetched, size_t delivered, size_t failed)
{
    int64_t now = eai_now_ms();
    d->ob_busy = 0;
    if (failed) {
        d->ob_failures++;
        d->ob_next_ms = now + jittered(eai_delivery_backoff_ms(d->ob_failures));
        eai_metrics_add("eai_outbox_delivery_failures_total", NULL, (double)failed);
    } else {
        if (d->ob_failures)
            eai_log("delivery", EAI_LOG_INFO, "usage events flow again after %d failed attempts",
                    d->ob_failures);
        d->ob_failures = 0;
        d->ob_logged = 0;
        /* something moved: look again at once, else poll at the idle pace */
        d->ob_next_ms = delivered ? now : now + EAI_DLV_IDLE_MS;
    }
    double backlog = (double)(fetched - delivered);
    eai_metrics_set("eai_outbox_backlog", NULL, backlog < 0 ? 0 : backlog);
}

static void ob_ack_work(void *arg)
{
    struct ob_job *j = arg;
    size_t i;
    json_t *a;
    json_array_foreach(j->acks, i, a) {
        const char *id = json_string_value(json_array_get(a, 0));
        int delivered = json_is_true(json_array_get(a, 1));
        struct eai_error *e = NULL;
        if (j->ops->outbox_ack(j->store, id, delivered, &e) < 0) {
            if (!j->err)
                j->err = e;
            else
                eai_error_free(e);
        }
    }
}

static void ob_ack_done(void *arg)
{
    struct ob_job *j = arg;
    struct eai_dlv *d = j->d;
    if (j->err)
        log_err("outbox ack", j->err);
    if (!d->stopping) {
        if (j->delivered)
            eai_metrics_add("eai_outbox_delivered_total", "target=\"finops\"", (double)j->delivered);
        ob_finish_cycle(d, d->ob_n, j->delivered, j->failed);
    }
    json_decref(d->ob_rows);
    d->ob_rows = NULL;
    free(d->ob_state);
    d->ob_state = NULL;
    json_decref(j->acks);
    free(j);
    dlv_unref(d);
}

static void ob_send_more(struct eai_dlv *d);

/* All sends finished: ack on a worker what was delivered (and count the failures). */
static void ob_acks(struct eai_dlv *d)
{
    struct ob_job *j = calloc(1, sizeof(*j));
    json_t *acks = json_array();
    if (!j || !acks) {
        free(j);
        json_decref(acks);
        d->ob_busy = 0;
        return;
    }
    j->d = d;
    j->ops = d->app->store;
    j->store = d->app->storage.self;
    j->acks = acks;
    for (size_t i = 0; i < d->ob_n; i++) {
        const char *id = eai_jstr(json_array_get(d->ob_rows, i), "id");
        if (!id || (d->ob_state[i] != ROW_OK && d->ob_state[i] != ROW_FAILED))
            continue;
        json_array_append_new(acks, json_pack("[s,b]", id, d->ob_state[i] == ROW_OK));
        if (d->ob_state[i] == ROW_OK)
            j->delivered++;
        else
            j->failed++;
    }
    d->refs++;
    if (d->stopping || eai_work_submit(ob_ack_work, ob_ack_done, j) != 0) {
        /* no worker: unacked rows are delivered again later (idempotent) */
        j->err = NULL;
        json_array_clear(j->acks);
        j->failed = j->failed + j->delivered;
        j->delivered = 0;
        ob_ack_done(j);
    }
}

struct ob_send {
    struct eai_dlv *d;
    size_t i;
};

static void ob_deliver_done(void *arg, int ok, const char *error)
{
    struct ob_send *s = arg;
    struct eai_dlv *d = s->d;
    size_t i = s->i;
    free(s);
    if (d->ob_state && i < d->ob_n) {
        d->ob_state[i] = ok ? ROW_OK : ROW_FAILED;
        d->ob_inflight--;
        if (!ok) {
            d->ob_stop_sending = 1;  /* the target is down: keep the rest for later */
            snprintf(d->ob_error, sizeof(d->ob_error), "%s", error ? error : "unknown error");
        }
        ob_send_more(d);
    }
    dlv_unref(d);
}

static void ob_send_more(struct eai_dlv *d)
{
    const struct eai_finops_ops *ops = d->app->finops.desc ? d->app->finops.desc->ops : NULL;
    while (!d->stopping && ops && !d->ob_stop_sending && d->ob_sent < d->ob_n &&
           d->ob_inflight < EAI_DLV_OUTBOX_PARALLEL) {
        size_t i = d->ob_sent++;
        json_t *row = json_array_get(d->ob_rows, i);
        json_t *ev = json_object_get(row, "event");
        if (eai_cb_is_callback(ev)) {
            d->ob_state[i] = ROW_UNSENT;  /* the callback sender's */
            continue;
        }
        struct ob_send *s = calloc(1, sizeof(*s));
        if (!json_is_object(ev) || !s) {
            free(s);
            d->ob_state[i] = ROW_UNSENT;
            continue;
        }
        if (!eai_jstr(ev, "id") && eai_jstr(row, "id"))
            json_object_set_new(ev, "id", json_string(eai_jstr(row, "id")));
        if (!eai_jstr(ev, "tenant_id") && eai_jstr(row, "tenant_id"))
            json_object_set_new(ev, "tenant_id", json_string(eai_jstr(row, "tenant_id")));
        s->d = d;
        s->i = i;
        d->ob_state[i] = ROW_INFLIGHT;
        d->ob_inflight++;
        d->refs++;
        if (ops->deliver(d->app->finops.self, ev, ob_deliver_done, s) != 0)
            ob_deliver_done(s, 0, "the FinOps plugin refused the event");
    }
    if (d->ob_inflight == 0 && (d->ob_sent >= d->ob_n || d->ob_stop_sending || d->stopping || !ops)) {
        if (d->ob_state == NULL)
            return;
        if (d->ob_stop_sending && !d->ob_logged) {
            eai_log("delivery", EAI_LOG_WARN, "usage event delivery failed (will retry): %s", d->ob_error);
            d->ob_logged = 1;
        }
        ob_acks(d);
    }
}

static void ob_fetch_done(void *arg)
{
    struct ob_job *j = arg;
    struct eai_dlv *d = j->d;
    size_t n = json_array_size(j->rows);
    if (d->stopping) {
        json_decref(j->rows);
        eai_error_free(j->err);
        free(j);
        dlv_unref(d);
        return;
    }
    if (j->rows)
        eai_cb_sender_offer(d->cbs, j->rows);
    if (!j->rows) {
        log_err("outbox fetch", j->err);
        j->err = NULL;
        ob_finish_cycle(d, 0, 0, 1);
    } else if (j->ledger) {
        if (j->err)
            log_err("ledger delivery", j->err);
        j->err = NULL;
        if (j->delivered)
            eai_metrics_add("eai_outbox_delivered_total", "target=\"ledger\"", (double)j->delivered);
        ob_finish_cycle(d, n, j->delivered, j->failed);
    } else if (n == 0) {
        ob_finish_cycle(d, 0, 0, 0);
    } else {
        eai_metrics_set("eai_outbox_backlog", NULL, (double)n);
        d->ob_state = calloc(n, 1);
        if (!d->ob_state) {
            ob_finish_cycle(d, n, 0, 1);
        } else {
            d->ob_rows = j->rows;
            j->rows = NULL;
            d->ob_n = n;
            d->ob_sent = d->ob_inflight = 0;
            d->ob_stop_sending = 0;
            /* still busy: ob_acks ends the cycle */
            json_decref(j->rows);
            free(j);
            ob_send_more(d);
            dlv_unref(d);
            return;
        }
    }
    json_decref(j->rows);
    free(j);
    dlv_unref(d);
}

static void ob_cycle(struct eai_dlv *d)
{
    if (d->stopping || d->ob_busy || eai_now_ms() < d->ob_next_ms || !d->app->store)
        return;
    struct ob_job *j = calloc(1, sizeof(*j));
    if (!j)
        return;
    j->d = d;
    j->ops = d->app->store;
    j->store = d->app->storage.self;
    j->ledger = d->app->finops.desc == NULL;
    d->ob_busy = 1;
    d->refs++;
    if (eai_work_submit(ob_fetch_work, ob_fetch_done, j) != 0) {
        d->ob_busy = 0;
        d->refs--;
        d->ob_next_ms = eai_now_ms() + EAI_DLV_IDLE_MS;
        free(j);
    }
}

/* ================================================================ audit */

struct au_job {
    struct eai_dlv *d;
    const struct eai_storage_ops *ops;
    void *store;
    int sink;                  /* ship events (else anchors only) */
    int anchors;               /* update anchors this time */
    json_t *cursors;           /* borrowed from d while busy */
    json_t *batches;           /* [{tenant_id, events, last}] */
    double backlog;
    int mismatches;
    struct eai_error *err;
};

static int64_t cursor_get(struct au_job *j, const char *tenant)
{
    json_t *c = json_object_get(j->cursors, tenant);
    if (json_is_integer(c))
        return (int64_t)json_integer_value(c);
    char key[128], *val = NULL;
    snprintf(key, sizeof(key), "%s%s", EAI_DLV_CURSOR_PREFIX, tenant);
    struct eai_error *e = NULL;
    if (j->ops->kv_get(j->store, key, &val, &e) < 0) {
        eai_error_free(e);
        return -1;
    }
    long long v = val ? atoll(val) : 0;
    free(val);
    json_object_set_new(j->cursors, tenant, json_integer(v));
    return v;
}

static void au_work(void *arg)
{
    struct au_job *j = arg;
    json_t *heads = NULL;
    if (eai_audit_heads(j->ops, j->store, &heads, &j->err) < 0)
        return;
    if (j->anchors) {
        int m = eai_audit_anchor_update(j->ops, j->store, heads, &j->err);
        if (m > 0)
            j->mismatches = m;
    }
    if (j->sink) {
        j->batches = json_array();
        size_t i;
        json_t *h;
        json_array_foreach(heads, i, h) {
            const char *t = eai_jstr(h, "tenant_id");
            int64_t head = (int64_t)json_integer_value(json_object_get(h, "seq"));
            int64_t cur = t ? cursor_get(j, t) : -1;
            if (cur < 0 || head <= cur)
                continue;
            j->backlog += (double)(head - cur);
            if (!j->batches || json_array_size(j->batches) >= EAI_DLV_AUDIT_TENANTS)
                continue;
            json_t *evs = NULL;
            struct eai_error *e = NULL;
            if (j->ops->audit_list(j->store, t, cur, EAI_DLV_AUDIT_BATCH, &evs, &e) < 0) {
                eai_error_free(e);
                continue;
            }
            size_t n = json_array_size(evs);
            if (n == 0) {
                json_decref(evs);
                continue;
            }
            json_t *last = json_object_get(json_array_get(evs, n - 1), "seq");
            json_array_append_new(j->batches, json_pack("{s:s, s:o, s:O}", "tenant_id", t,
                                                        "events", evs, "last", last));
        }
    }
    json_decref(heads);
}

static void au_finish_cycle(struct eai_dlv *d, int failed, double backlog)
{
    int64_t now = eai_now_ms();
    d->au_busy = 0;
    if (failed) {
        d->au_failures++;
        d->au_next_ms = now + jittered(eai_delivery_backoff_ms(d->au_failures));
    } else {
        d->au_failures = 0;
        d->au_next_ms = now + EAI_DLV_AUDIT_SINK_MS;
    }
    eai_metrics_set("eai_audit_sink_backlog", NULL, backlog < 0 ? 0 : backlog);
}

static void au_commit_work(void *arg)
{
    struct au_job *j = arg;
    size_t i;
    json_t *b;
    json_array_foreach(j->batches, i, b) {
        if (!json_is_true(json_object_get(b, "ok")))
            continue;
        char key[128], val[32];
        snprintf(key, sizeof(key), "%s%s", EAI_DLV_CURSOR_PREFIX, eai_jstr(b, "tenant_id"));
        snprintf(val, sizeof(val), "%" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(b, "last")));
        struct eai_error *e = NULL;
        if (j->ops->kv_set(j->store, key, val, &e) < 0) {
            if (!j->err)
                j->err = e;
            else
                eai_error_free(e);
            json_object_set_new(b, "ok", json_false());
            continue;
        }
        json_object_set(j->cursors, eai_jstr(b, "tenant_id"), json_object_get(b, "last"));
    }
}

static void au_commit_done(void *arg)
{
    struct au_job *j = arg;
    struct eai_dlv *d = j->d;
    int failed = 0;
    double shipped = 0;
    size_t i;
    json_t *b;
    if (j->err)
        log_err("audit sink cursor", j->err);
    json_array_foreach(j->batches, i, b) {
        if (json_is_true(json_object_get(b, "ok")))
            shipped += (double)json_array_size(json_object_get(b, "events"));
        else
            failed = 1;
    }
    if (!d->stopping) {
        if (shipped)
            eai_metrics_add("eai_audit_sink_delivered_total", NULL, shipped);
        if (failed)
            eai_metrics_add("eai_audit_sink_failures_total", NULL, 1);
        au_finish_cycle(d, failed, j->backlog - shipped);
        if (shipped && !failed)
            d->au_next_ms = eai_now_ms();  /* more may be waiting */
    }
    json_decref(j->batches);
    free(j);
    dlv_unref(d);
}

struct au_send {
    struct au_job *j;
    json_t *batch;
};

static void au_sent_all(struct au_job *j)
{
    struct eai_dlv *d = j->d;
    d->refs++;
    if (d->stopping || eai_work_submit(au_commit_work, au_commit_done, j) != 0) {
        json_t *b;
        size_t i;
        json_array_foreach(j->batches, i, b) json_object_set_new(b, "ok", json_false());
        au_commit_done(j);
    }
}

static void au_deliver_done(void *arg, int ok, const char *error)
{
    struct au_send *s = arg;
    struct au_job *j = s->j;
    struct eai_dlv *d = j->d;
    json_object_set_new(s->batch, "ok", json_boolean(ok));
    if (!ok)
        eai_log("delivery", EAI_LOG_WARN, "audit sink delivery failed (will retry): %s",
                error ? error : "unknown error");
    free(s);
    if (--d->au_pending == 0)
        au_sent_all(j);
    dlv_unref(d);
}

static void au_work_done(void *arg)
{
    struct au_job *j = arg;
    struct eai_dlv *d = j->d;
    if (j->err) {
        log_err("audit heads", j->err);
        j->err = NULL;
    }
    if (j->mismatches && !d->stopping)
        eai_log("delivery", EAI_LOG_ERROR,
                "audit chain of %d tenant(s) no longer holds its anchored event: run `eaid audit verify`",
                j->mismatches);
    size_t n = json_array_size(j->batches);
    const struct eai_audit_ops *ops = d->app->audit_sink.desc ? d->app->audit_sink.desc->ops : NULL;
    if (j->sink && !d->stopping)
        eai_metrics_set("eai_audit_sink_backlog", NULL, j->backlog);
    if (d->stopping || n == 0 || !ops) {
        if (!d->stopping)
            au_finish_cycle(d, 0, j->backlog);
        json_decref(j->batches);
        free(j);
        dlv_unref(d);
        return;
    }
    d->au_pending = n;
    size_t i;
    json_t *b;
    json_array_foreach(j->batches, i, b) {
        struct au_send *s = calloc(1, sizeof(*s));
        d->refs++;
        if (!s) {
            json_object_set_new(b, "ok", json_false());
            if (--d->au_pending == 0)
                au_sent_all(j);
            dlv_unref(d);
            continue;
        }
        s->j = j;
        s->batch = b;
        if (ops->deliver(d->app->audit_sink.self, json_object_get(b, "events"), au_deliver_done, s) != 0)
            au_deliver_done(s, 0, "the audit sink plugin refused the batch");
    }
    dlv_unref(d);
}

static void au_cycle(struct eai_dlv *d)
{
    int64_t now = eai_now_ms();
    int sink = d->app->audit_sink.desc != NULL;
    int anchors = now >= d->au_anchor_next_ms;
    if (d->stopping || d->au_busy || !d->app->store || (!anchors && (!sink || now < d->au_next_ms)))
        return;
    struct au_job *j = calloc(1, sizeof(*j));
    if (!j)
        return;
    const struct eai_storage_ops *ops = d->app->store;
    int fast = ops->audit_heads != NULL; /* ABI 1.1, NULL-filled for 1.0 backends */
    if (anchors)
        d->au_anchor_next_ms = now + (fast ? EAI_DLV_ANCHOR_MS : EAI_DLV_ANCHOR_SCAN_MS);
    j->d = d;
    j->ops = ops;
    j->store = d->app->storage.self;
    j->sink = sink && now >= d->au_next_ms;
    j->anchors = anchors;
    j->cursors = d->au_cursors;
    d->au_busy = 1;
    d->refs++;
    if (eai_work_submit(au_work, au_work_done, j) != 0) {
        d->au_busy = 0;
        d->refs--;
        free(j);
    }
}

/* ================================================================ lifecycle */

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct eai_dlv *d = arg;
    ob_cycle(d);
    au_cycle(d);
}

static void dlv_free(struct eai_dlv *d)
{
    eai_plugin_close(&d->own_finops);
    eai_plugin_close(&d->own_audit);
    json_decref(d->ob_rows);
    free(d->ob_state);
    json_decref(d->au_cursors);
    eai_cb_sender_stop(d->cbs);
    free(d);
}

static void dlv_unref(struct eai_dlv *d)
{
    if (--d->refs == 0 && d->stopping)
        dlv_free(d);
}

int eai_delivery_sink_conf(const struct eai_config *cfg, enum eai_plugin_kind kind, const char **name,
                           json_t **conf, struct eai_error **err)
{
    *name = NULL;
    *conf = NULL;
    if (!cfg)
        return 0;
    int audit = kind == EAI_KIND_AUDIT;
    const char *url = audit ? cfg->audit_url : cfg->finops_url;
    const char *n = audit ? cfg->audit_backend : cfg->finops_backend;
    const char *fallback = audit ? EAI_CFG_AUDIT_FALLBACK : EAI_CFG_FINOPS_FALLBACK;
    if (url && !*url)
        url = NULL;
    if (!n)
        n = url ? "http" : fallback;
    if (strcmp(n, fallback) == 0)
        return 0;
    const json_t *extra = audit ? cfg->audit_conf : cfg->finops_conf;
    json_t *c = extra ? json_deep_copy(extra) : json_object();
    if (!c || (url && json_object_set_new(c, "url", json_string(url)) < 0)) {
        json_decref(c);
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    }
    *name = n;
    *conf = c;
    return 0;
}

/* The backend of kind chosen by name in the config (audit.backend,
 * finops.backend): 0 with inst empty for the in-process fallback. */
static int load_sink(struct eai_app *app, enum eai_plugin_kind kind, struct eai_plugin_inst *inst,
                     struct eai_error **err)
{
    const struct eai_config *cfg = app->cfg;
    const char *name;
    json_t *conf;
    if (eai_delivery_sink_conf(cfg, kind, &name, &conf, err) < 0)
        return -1;
    if (!conf)
        return 0;
    const char *dir = cfg->plugin_dir ? cfg->plugin_dir : eai_plugin_dir();
    int rc = eai_plugin_open(dir, app->host, kind, name, conf, cfg->source,
                             kind == EAI_KIND_AUDIT ? "/audit" : "/finops", "backend", inst, err);
    json_decref(conf);
    return rc;
}

int eai_delivery_start(struct eai_app *app, struct eai_error **err)
{
    if (app->delivery)
        return 0;
    struct eai_dlv *d = calloc(1, sizeof(*d));
    if (!d || !(d->au_cursors = json_object())) {
        free(d);
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    }
    d->app = app;
    if (!(d->cbs = eai_cb_sender_new(app, err))) {
        dlv_free(d);
        return -1;
    }
    if (!app->finops.desc) {
        if (load_sink(app, EAI_KIND_FINOPS, &d->own_finops, err) < 0) {
            if (err && *err)
                eai_error_prefix(*err, "%s", EAI_DELIVERY_FINOPS_WHAT);
            dlv_free(d);
            return -1;
        }
        if (d->own_finops.desc)
            app->finops = d->own_finops;
    }
    if (!app->audit_sink.desc) {
        if (load_sink(app, EAI_KIND_AUDIT, &d->own_audit, err) < 0) {
            if (err && *err)
                eai_error_prefix(*err, "%s", EAI_DELIVERY_AUDIT_WHAT);
            if (d->own_finops.desc)
                app->finops.desc = NULL, app->finops.self = NULL, app->finops.host = NULL;
            dlv_free(d);
            return -1;
        }
        if (d->own_audit.desc)
            app->audit_sink = d->own_audit;
    }
    d->timer = event_new(app->base, -1, EV_PERSIST, on_tick, d);
    struct timeval tv = {0, EAI_DLV_TICK_MS * 1000};
    if (!d->timer || event_add(d->timer, &tv) < 0) {
        if (d->timer)
            event_free(d->timer);
        if (d->own_finops.desc)
            app->finops.desc = NULL, app->finops.self = NULL;
        if (d->own_audit.desc)
            app->audit_sink.desc = NULL, app->audit_sink.self = NULL;
        dlv_free(d);
        return eai_error_set(err, EAI_E_INTERNAL, "cannot start the delivery timer");
    }
    eai_metrics_set("eai_outbox_backlog", NULL, 0);
    eai_metrics_set("eai_audit_sink_backlog", NULL, 0);
    eai_log("delivery", EAI_LOG_INFO, "usage events: %s (FinOps backend); audit events: %s (audit backend)",
            app->finops.desc ? app->finops.desc->name : "in-process ledger",
            app->audit_sink.desc ? app->audit_sink.desc->name : "kept in storage only");
    app->delivery = d;
    return 0;
}

void eai_delivery_kick(struct eai_app *app)
{
    struct eai_dlv *d = app ? app->delivery : NULL;
    if (!d || d->stopping)
        return;
    if (d->ob_failures == 0)
        d->ob_next_ms = 0;  /* in backoff: the retry timer decides */
    ob_cycle(d);
}

void eai_delivery_stop(struct eai_app *app)
{
    struct eai_dlv *d = app ? app->delivery : NULL;
    if (!d)
        return;
    app->delivery = NULL;
    d->stopping = 1;
    eai_cb_sender_stop(d->cbs);
    d->cbs = NULL;
    if (d->timer)
        event_free(d->timer);
    d->timer = NULL;
    if (d->own_finops.desc) {
        app->finops.desc = NULL;
        app->finops.self = NULL;
    }
    if (d->own_audit.desc) {
        app->audit_sink.desc = NULL;
        app->audit_sink.self = NULL;
    }
    if (d->refs == 0)
        dlv_free(d);
}
