/*
 * The telemetry backend's wiring (docs/observability.md): which telemetry
 * plugin exports spans (and metrics), its start and stop, and the periodic
 * hand-over of the metrics exposition to a plugin with export_metrics.
 * The OTLP exporter itself is a plugin, plugins/otlp (eai-telemetry-otlp.so),
 * loaded when telemetry.otlp_endpoint is set; without one spans go to the
 * debug log and metrics stay on /metrics (the in-process fallback).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "app.h"
#include "config/config.h"
#include "base/errors.h"
#include "base/log.h"
#include "obs/metrics.h"
#include "obs/telemetry.h"
#include "plugin/loader.h"
#include "plugin/open.h"

/* ------------------------------------------------------------ metrics export */

/* A telemetry plugin with export_metrics (ABI 1.1) gets the Prometheus
 * exposition periodically, one call at a time.  Rendering is in memory. */
#define EAI_METRICS_EXPORT_FIRST_MS 1000
#define EAI_METRICS_EXPORT_MS 15000        /* OTEL_METRIC_EXPORT_INTERVAL (ms) changes it */
#define EAI_METRICS_EXPORT_MIN_MS 1000
#define EAI_METRICS_EXPORT_MAX_MS 3600000
static struct {
    struct event *timer;
    long interval_ms;
    const struct eai_telemetry_ops *ops;
    void *self;
    int inflight;
    unsigned gen;              /* a done() of an earlier start is ignored */
} g_mx;

static void metrics_export_done(void *arg, int ok, const char *error)
{
    if ((unsigned)(uintptr_t)arg != g_mx.gen)
        return;
    g_mx.inflight = 0;
    if (!ok)
        eai_log("telemetry", EAI_LOG_WARN, "metrics export failed: %s", error ? error : "?");
}

static void metrics_export_tick(evutil_socket_t fd, short what, void *arg)
{
    struct timeval tv = {g_mx.interval_ms / 1000, (g_mx.interval_ms % 1000) * 1000};
    evtimer_add(g_mx.timer, &tv);
    if (g_mx.inflight || !g_mx.ops || !g_mx.ops->export_metrics)
        return;
    char *text = eai_metrics_render();
    if (!text)
        return;
    g_mx.inflight = 1;
    if (g_mx.ops->export_metrics(g_mx.self, text, strlen(text), metrics_export_done,
                                 (void *)(uintptr_t)g_mx.gen) != 0)
        g_mx.inflight = 0;
    free(text);
}

static int metrics_export_start(struct event_base *base, const struct eai_telemetry_ops *ops, void *self)
{
    if (!ops->export_metrics) /* a 1.0 plugin, or one that exports spans only */
        return 0;
    /* the OpenTelemetry SDKs' variable, in milliseconds, bounded */
    const char *iv = getenv("OTEL_METRIC_EXPORT_INTERVAL");
    char *end = NULL;
    long ms = iv && *iv ? strtol(iv, &end, 10) : EAI_METRICS_EXPORT_MS;
    if (iv && *iv && (*end || ms < EAI_METRICS_EXPORT_MIN_MS || ms > EAI_METRICS_EXPORT_MAX_MS)) {
        eai_log("telemetry", EAI_LOG_WARN, "OTEL_METRIC_EXPORT_INTERVAL '%.32s' is not %d..%d ms: %d ms", iv,
                EAI_METRICS_EXPORT_MIN_MS, EAI_METRICS_EXPORT_MAX_MS, EAI_METRICS_EXPORT_MS);
        ms = EAI_METRICS_EXPORT_MS;
    }
    g_mx.interval_ms = ms;
    g_mx.gen++;
    g_mx.ops = ops;
    g_mx.self = self;
    g_mx.inflight = 0;
    g_mx.timer = evtimer_new(base, metrics_export_tick, NULL);
    struct timeval tv = {0, EAI_METRICS_EXPORT_FIRST_MS * 1000};
    if (!g_mx.timer || evtimer_add(g_mx.timer, &tv) < 0)
        return -1;
    return 0;
}

static void metrics_export_stop(void)
{
    if (g_mx.timer)
        event_free(g_mx.timer);
    g_mx.timer = NULL;
    g_mx.ops = NULL;
    g_mx.self = NULL;
    g_mx.gen++;
}

/* ------------------------------------------------------------ app wiring */

int eai_telemetry_conf(const struct eai_config *cfg, const char **name, json_t **conf, struct eai_error **err)
{
    const char *ep = cfg ? cfg->otlp_endpoint : NULL;
    if (ep && !*ep)
        ep = NULL;
    *name = cfg && cfg->telemetry_backend ? cfg->telemetry_backend : ep ? "otlp" : EAI_CFG_TELEMETRY_FALLBACK;
    *conf = NULL;
    if (strcmp(*name, EAI_CFG_TELEMETRY_FALLBACK) == 0)
        return 0;
    /* by name: eai-telemetry-<name>.so ("otlp": plugins/otlp) */
    json_t *c = cfg && cfg->telemetry_conf ? json_deep_copy(cfg->telemetry_conf) : json_object();
    if (!c || (ep && json_object_set_new(c, "endpoint", json_string(ep)) < 0)) {
        json_decref(c);
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    }
    *conf = c;
    return 0;
}

int eai_telemetry_start(struct eai_app *app, struct eai_error **err)
{
    const struct eai_config *cfg = app->cfg;
    if (!app->telemetry.desc) {
        const char *name;
        json_t *conf;
        if (eai_telemetry_conf(cfg, &name, &conf, err) < 0)
            return -1;
        if (!conf) {
            eai_log("trace", EAI_LOG_INFO,
                    "telemetry backend 'log': finished spans go to the log at debug level");
            return 0;
        }
        struct eai_error *e = NULL;
        int rc = eai_plugin_open(cfg && cfg->plugin_dir ? cfg->plugin_dir : eai_plugin_dir(), app->host,
                                 EAI_KIND_TELEMETRY, name, conf, cfg ? cfg->source : NULL, "/telemetry", "backend",
                                 &app->telemetry, &e);
        json_decref(conf);
        if (rc < 0) {
            eai_error_prefix(e, "%s", EAI_TELEMETRY_WHAT);
            eai_error_propagate(err, e);
            return -1;
        }
    }
    const struct eai_telemetry_ops *ops = app->telemetry.desc->ops;
    if (eai_trace_exporter_start(app->base, ops, app->telemetry.self) < 0) {
        return eai_error_set(err, EAI_E_INTERNAL, "cannot start the span export timer");
    }
    if (metrics_export_start(app->base, ops, app->telemetry.self) < 0) {
        eai_trace_exporter_stop();
        return eai_error_set(err, EAI_E_INTERNAL, "cannot start the metrics export timer");
    }
    /* the endpoint itself is not logged: it may carry credentials */
    eai_log("trace", EAI_LOG_INFO, "exporting spans%s with telemetry plugin '%s'",
            ops->export_metrics ? " and metrics" : "", app->telemetry.desc->name);
    return 0;
}

void eai_telemetry_stop(struct eai_app *app)
{
    metrics_export_stop();
    eai_trace_exporter_stop();
    eai_plugin_close(&app->telemetry);
}
