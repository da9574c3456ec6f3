/* App-level metrics: zero series, build info, backend readiness, process_* (obs_app.h). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <eai/isolation.h>
#include <eai/plugin.h>

#include "config/config.h"
#include "obs/obs_app.h"
#include "obs/metrics.h"

static double g_start_time;

void eai_obs_app_metrics(struct eai_app *app)
{
    static const char *const statuses[] = {"succeeded", "failed", "timeout", "oom_killed", "cancelled", "error"};
    static const char *const refusals[] = {"validation_failed", "limit_exceeded", "egress_not_allowed",
                                           "unknown_profile", "unknown_image", "rate_limited",
                                           "sandbox_unavailable", "idempotency_conflict"};
    char l[256];
    g_start_time = (double)time(NULL);
    for (int i = 0; app && i < app->nprofiles; i++) {
        char *pe = eai_metrics_label_escape(app->profiles[i].name ? app->profiles[i].name : "");
        if (!pe)
            continue;
        for (size_t k = 0; k < sizeof statuses / sizeof statuses[0]; k++) {
            snprintf(l, sizeof l, "profile=\"%s\",status=\"%s\"", pe, statuses[k]);
            eai_metrics_add("eai_sandbox_executions_total", l, 0);
        }
        snprintf(l, sizeof l, "profile=\"%s\"", pe);
        eai_metrics_add("eai_sandbox_cpu_seconds_total", l, 0);
        eai_metrics_add("eai_sandbox_memory_megabyte_seconds_total", l, 0);
        free(pe);
    }
    for (size_t k = 0; k < sizeof refusals / sizeof refusals[0]; k++) {
        snprintf(l, sizeof l, "code=\"%s\"", refusals[k]);
        eai_metrics_add("eai_sandbox_refusals_total", l, 0);
    }
    eai_metrics_set("eai_callback_backlog", NULL, 0);
    eai_metrics_add("eai_callback_attempts_total", "result=\"delivered\"", 0);
    eai_metrics_add("eai_callback_attempts_total", "result=\"failed\"", 0);
    eai_metrics_add("eai_outbox_delivered_total", "target=\"finops\"", 0);
    eai_metrics_add("eai_outbox_delivered_total", "target=\"ledger\"", 0);
    eai_metrics_add("eai_outbox_delivery_failures_total", NULL, 0);
    eai_metrics_add("eai_audit_sink_delivered_total", NULL, 0);
    eai_metrics_add("eai_audit_sink_failures_total", NULL, 0);
    eai_metrics_add("eai_trace_spans_dropped_total", NULL, 0);
    eai_metrics_set("eai_sandbox_queued", NULL, 0);
    eai_metrics_set("eai_sandbox_running", NULL, 0);
    snprintf(l, sizeof l, "version=\"%s\",abi=\"%d.%d\",storage=\"%s\"", EAI_VERSION, EAI_ABI_MAJOR, EAI_ABI_MINOR,
             app && app->cfg && app->cfg->storage_backend ? app->cfg->storage_backend : "");
    eai_metrics_set("eai_build_info", l, 1);
    eai_obs_scrape(app);
}

static void process_metrics(void)
{
    long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    FILE *f = fopen("/proc/self/stat", "r");
    if (f) {
        char buf[1024];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
        /* after "(comm)": state is field 3; utime 14, stime 15, vsize 23, rss 24 */
        char *p = strrchr(buf, ')');
        unsigned long long ut = 0, st = 0, vsize = 0;
        long long rss = 0;
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
                               "%*u %llu %lld", &ut, &st, &vsize, &rss) == 4 && tick > 0) {
            eai_metrics_set("process_cpu_seconds_total", NULL, (double)(ut + st) / (double)tick);
            eai_metrics_set("process_virtual_memory_bytes", NULL, (double)vsize);
            eai_metrics_set("process_resident_memory_bytes", NULL, (double)rss * (double)(page > 0 ? page : 4096));
        }
    }
    int fds = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            fds += e->d_name[0] != '.';
        closedir(d);
        eai_metrics_set("process_open_fds", NULL, fds > 0 ? fds - 1 : 0); /* less the directory's own */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        eai_metrics_set("process_max_fds", NULL, rl.rlim_cur == RLIM_INFINITY ? 1e9 : (double)rl.rlim_cur);
    if (g_start_time > 0)
        eai_metrics_set("process_start_time_seconds", NULL, g_start_time);
}

/* eai_backend_info{backend, version}: 1 for the version (with what it
 * runs on, e.g. gVisor's platform) that a ready backend reports; a version
 * that changed (a new probe) leaves its old series at 0. */
static void backend_info(int i, const char *backend_label, struct eai_iso_probe *pr)
{
    static char last[16][400];
    if (i < 0 || i >= 16)
        return;
    pr->version[sizeof(pr->version) - 1] = '\0';
    char *v = pr->ready ? eai_metrics_label_escape(pr->version) : NULL;
    char l[400];
    if (v)
        snprintf(l, sizeof l, "%s,version=\"%s\"", backend_label, v);
    free(v);
    if (last[i][0] && (!pr->ready || strcmp(last[i], l) != 0)) {
        eai_metrics_set("eai_backend_info", last[i], 0);
        last[i][0] = '\0';
    }
    if (pr->ready) {
        eai_metrics_set("eai_backend_info", l, 1);
        snprintf(last[i], sizeof last[i], "%s", l);
    }
}

void eai_obs_scrape(struct eai_app *app)
{
    for (int i = 0; app && i < app->nisolation; i++) {
        const struct eai_plugin_inst *iso = &app->isolation[i];
        const struct eai_isolation_ops *ops = iso->desc ? iso->desc->ops : NULL;
        if (!iso->desc || !iso->desc->name)
            continue;
        struct eai_iso_probe pr;
        memset(&pr, 0, sizeof pr);
        pr.size = sizeof pr;
        if (ops && iso->self)
            ops->probe(iso->self, &pr);
        char *be = eai_metrics_label_escape(iso->desc->name);
        char l[160];
        snprintf(l, sizeof l, "backend=\"%s\"", be ? be : "");
        free(be);
        eai_metrics_set("eai_backend_ready", l, pr.ready ? 1 : 0);
        backend_info(i, l, &pr);
    }
    const char *name;
    json_t *why;
    json_object_foreach(app ? app->iso_failures : NULL, name, why) {
        (void)why;  /* configured, not loaded: never ready */
        char *be = eai_metrics_label_escape(name);
        char l[160];
        snprintf(l, sizeof l, "backend=\"%s\"", be ? be : "");
        free(be);
        eai_metrics_set("eai_backend_ready", l, 0);
    }
    process_metrics();
}
