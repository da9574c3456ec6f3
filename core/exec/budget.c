/* The node budget executions and sessions share (budget.h,
 * docs/admission.md). */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "exec/budget.h"
#include "base/errors.h"
#include "base/log.h"
#include "config/config.h"
#include "obs/metrics.h"

#define BUDGET_COMPONENT "budget"

/* One tenant holding something (the list stays as short as the tenants
 * with a live sandbox on this node). */
struct holder {
    struct holder *next;
    char *tenant;                  /* owned: any length a tenant id has */
    int64_t memory, cpu;
    int n;                         /* reservations held */
};

struct eai_budget {
    int64_t memory_total, cpu_total;
    int64_t memory_used, cpu_used;
    int share_permille;
    json_t *shares;                /* tenant -> its own per mille (node.tenant_shares); set at start only */
    struct holder *holders;
    int nholders;
    void (*listener)(void *arg);
    void *listener_arg;
};

struct eai_budget *eai_budget_new(int64_t memory_bytes, int64_t cpu_millis, int share_permille)
{
    if (memory_bytes <= 0 || cpu_millis <= 0 || share_permille < 1 || share_permille > 1000)
        return NULL;
    struct eai_budget *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->memory_total = memory_bytes;
    b->cpu_total = cpu_millis;
    b->share_permille = share_permille;
    return b;
}

void eai_budget_free(struct eai_budget *b)
{
    if (!b)
        return;
    struct holder *h = b->holders, *next;
    for (; h; h = next) {
        next = h->next;
        free(h->tenant);
        free(h);
    }
    json_decref(b->shares);
    free(b);
}

/* ------------------------------------------------------------ host defaults */

/* The first integer after key in a /proc-style file, or -1. */
static int64_t read_kb_line(const char *path, const char *key)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char line[256];
    int64_t v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) == 0) {
            long long x;
            if (sscanf(line + kl, " %lld", &x) == 1)
                v = (int64_t)x;
            break;
        }
    }
    fclose(f);
    return v;
}

/* This process's cgroup v2 directory, or "" (not under cgroup v2). */
static void own_cgroup(char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "0::", 3) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(out, len, "/sys/fs/cgroup%s", strcmp(line + 3, "/") == 0 ? "" : line + 3);
            break;
        }
    }
    fclose(f);
}

void eai_budget_host_defaults(int64_t *memory_bytes, int64_t *cpu_millis)
{
    int64_t kb = read_kb_line("/proc/meminfo", "MemTotal:");
    int64_t mem = kb > 0 ? kb * 1024 : (int64_t)4 << 30;
    int64_t cpu;
    cpu_set_t set;
    CPU_ZERO(&set);
    int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    cpu = (n > 0 ? n : 1) * 1000LL;
    char cg[900], path[1024], buf[128];
    own_cgroup(cg, sizeof cg);
    if (cg[0]) {
        /* a container's limits are lower than the host's: they are the node */
        snprintf(path, sizeof path, "%s/memory.max", cg);
        FILE *f = fopen(path, "re");
        if (f) {
            long long x;
            if (fgets(buf, sizeof buf, f) && sscanf(buf, "%lld", &x) == 1 && x > 0 && x < mem)
                mem = x;
            fclose(f);
        }
        snprintf(path, sizeof path, "%s/cpu.max", cg);
        f = fopen(path, "re");
        if (f) {
            long long q, p;
            if (fgets(buf, sizeof buf, f) && sscanf(buf, "%lld %lld", &q, &p) == 2 && q > 0 && p > 0 &&
                q * 1000 / p < cpu)
                cpu = q * 1000 / p > 0 ? q * 1000 / p : 1;
            fclose(f);
        }
    }
    *memory_bytes = mem / 10 * 8; /* 80%: the rest for eaid, runsc and the kernel */
    /* CPU limits are ceilings (CFS quota), not reservations: an idle
     * sandbox uses none and a busy node only runs slower, where memory
     * past the host's is the OOM killer.  So CPU is overcommitted by
     * default, memory never (docs/admission.md). */
    *cpu_millis = cpu * EAI_BUDGET_CPU_OVERCOMMIT;
}

struct eai_budget *eai_budget_from_config(const struct eai_config *cfg, struct eai_error **err)
{
    int64_t mem = cfg ? cfg->node_memory_budget : 0, cpu = cfg ? cfg->node_cpu_budget : 0;
    int share = cfg && cfg->node_tenant_share > 0 ? cfg->node_tenant_share : 500;
    int64_t hm = 0, hc = 0;
    eai_budget_host_defaults(&hm, &hc);
    if (mem > 0 && mem > hm / 8 * 10)
        eai_log(BUDGET_COMPONENT, EAI_LOG_WARN,
                "node.memory_budget (%" PRId64 " bytes) is more than this host's memory (%" PRId64
                " bytes): sandboxes may be OOM-killed, or eaid",
                mem, hm / 8 * 10);
    struct eai_budget *b = eai_budget_new(mem > 0 ? mem : hm, cpu > 0 ? cpu : hc, share);
    if (!b) {
        eai_error_set(err, EAI_E_INTERNAL, "out of memory making the node budget");
        return NULL;
    }
    const char *t;
    const json_t *x;
    json_object_foreach(cfg ? cfg->node_tenant_shares : NULL, t, x) {
        if (eai_budget_set_tenant_share(b, t, (int)json_integer_value(x)) < 0) {
            eai_budget_free(b);
            eai_error_set(err, EAI_E_INTERNAL, "out of memory making the node budget");
            return NULL;
        }
    }
    eai_log(BUDGET_COMPONENT, EAI_LOG_INFO,
            "node budget: memory %" PRId64 " bytes%s, cpu %" PRId64 "m%s, a tenant at most %d.%d%%",
            b->memory_total, mem > 0 ? "" : " (80% of the host's)", b->cpu_total,
            cpu > 0 ? "" : " (8x the host's CPUs)", share / 10, share % 10);
    if (b->shares)
        eai_log(BUDGET_COMPONENT, EAI_LOG_INFO, "node budget: %zu tenant(s) with their own share (node.tenant_shares)",
                json_object_size(b->shares));
    eai_budget_gauges(b);
    return b;
}

/* ------------------------------------------------------------ accounting */

static struct holder *find(const struct eai_budget *b, const char *tenant)
{
    for (struct holder *h = b->holders; h; h = h->next)
        if (strcmp(h->tenant, tenant) == 0)
            return h;
    return NULL;
}

int eai_budget_set_tenant_share(struct eai_budget *b, const char *tenant, int share_permille)
{
    if (!b || !tenant || !tenant[0] || share_permille < 1 || share_permille > 1000)
        return -1;
    if (!b->shares && !(b->shares = json_object()))
        return -1;
    return json_object_set_new(b->shares, tenant, json_integer(share_permille));
}

static int64_t share_of(const struct eai_budget *b, const char *tenant)
{
    const json_t *x = tenant && b->shares ? json_object_get(b->shares, tenant) : NULL;
    return x ? json_integer_value(x) : b->share_permille;
}

int64_t eai_budget_tenant_memory_cap(const struct eai_budget *b, const char *tenant)
{
    if (!b)
        return 0;
    int64_t pm = share_of(b, tenant);
    return b->memory_total / 1000 * pm + b->memory_total % 1000 * pm / 1000;
}

int64_t eai_budget_tenant_cpu_cap(const struct eai_budget *b, const char *tenant)
{
    return b ? b->cpu_total * share_of(b, tenant) / 1000 : 0;
}

int eai_budget_counts_backend(const char *backend)
{
    return backend && strcmp(backend, "k8s") != 0;
}

int eai_budget_exceeds_share(const struct eai_budget *b, const char *tenant, int64_t memory, int64_t cpu)
{
    return b && (memory > eai_budget_tenant_memory_cap(b, tenant) || cpu > eai_budget_tenant_cpu_cap(b, tenant));
}

enum eai_budget_fit eai_budget_check(const struct eai_budget *b, const char *tenant, int64_t memory, int64_t cpu)
{
    if (!b)
        return EAI_BUDGET_FITS; /* no budget (tests of other modules): nothing to hold back */
    if (memory < 0)
        memory = 0;
    if (cpu < 0)
        cpu = 0;
    int64_t mcap = eai_budget_tenant_memory_cap(b, tenant), ccap = eai_budget_tenant_cpu_cap(b, tenant);
    if (memory > mcap || cpu > ccap)
        return EAI_BUDGET_TOO_LARGE;
    const struct holder *h = tenant ? find(b, tenant) : NULL;
    int64_t tm = h ? h->memory : 0, tc = h ? h->cpu : 0;
    if (tm + memory > mcap || tc + cpu > ccap)
        return EAI_BUDGET_TENANT_FULL;
    if (b->memory_used + memory > b->memory_total || b->cpu_used + cpu > b->cpu_total)
        return EAI_BUDGET_NODE_FULL;
    return EAI_BUDGET_FITS;
}

int eai_budget_force(struct eai_budget *b, const char *tenant, int64_t memory, int64_t cpu)
{
    if (!b || !tenant)
        return 0;
    if (memory < 0)
        memory = 0;
    if (cpu < 0)
        cpu = 0;
    struct holder *h = find(b, tenant);
    if (!h) {
        h = calloc(1, sizeof *h);
        if (!h || !(h->tenant = strdup(tenant))) {
            free(h);
            return -1;
        }
        h->next = b->holders;
        b->holders = h;
        b->nholders++;
    }
    h->memory += memory;
    h->cpu += cpu;
    h->n++;
    b->memory_used += memory;
    b->cpu_used += cpu;
    eai_budget_gauges(b);
    return 0;
}

enum eai_budget_fit eai_budget_take(struct eai_budget *b, const char *tenant, int64_t memory, int64_t cpu)
{
    enum eai_budget_fit f = eai_budget_check(b, tenant, memory, cpu);
    if (f != EAI_BUDGET_FITS || !b)
        return f;
    /* out of memory for the holder: refused as if the node were full */
    return eai_budget_force(b, tenant, memory, cpu) == 0 ? EAI_BUDGET_FITS : EAI_BUDGET_NODE_FULL;
}

void eai_budget_give(struct eai_budget *b, const char *tenant, int64_t memory, int64_t cpu)
{
    if (!b || !tenant)
        return;
    if (memory < 0)
        memory = 0;
    if (cpu < 0)
        cpu = 0;
    struct holder **pp = &b->holders;
    while (*pp && strcmp((*pp)->tenant, tenant) != 0)
        pp = &(*pp)->next;
    struct holder *h = *pp;
    if (!h) {
        eai_log(BUDGET_COMPONENT, EAI_LOG_ERROR, "tenant %s gives back what it does not hold", tenant);
        return;
    }
    /* never below zero, whatever a caller's bug */
    int64_t m = memory < h->memory ? memory : h->memory, c = cpu < h->cpu ? cpu : h->cpu;
    h->memory -= m;
    h->cpu -= c;
    h->n--;
    b->memory_used -= m;
    b->cpu_used -= c;
    if (h->n <= 0) {
        if (h->memory || h->cpu)
            eai_log(BUDGET_COMPONENT, EAI_LOG_ERROR, "tenant %s: accounting drift (%" PRId64 " bytes, %" PRId64 "m)",
                    tenant, h->memory, h->cpu);
        b->memory_used -= h->memory;
        b->cpu_used -= h->cpu;
        *pp = h->next;
        free(h->tenant);
        free(h);
        b->nholders--;
    }
    eai_budget_gauges(b);
    if (b->listener)
        b->listener(b->listener_arg);
}

void eai_budget_set_listener(struct eai_budget *b, void (*fn)(void *arg), void *arg)
{
    if (!b)
        return;
    b->listener = fn;
    b->listener_arg = arg;
}

int64_t eai_budget_memory_total(const struct eai_budget *b) { return b ? b->memory_total : 0; }
int64_t eai_budget_cpu_total(const struct eai_budget *b) { return b ? b->cpu_total : 0; }
int64_t eai_budget_memory_used(const struct eai_budget *b) { return b ? b->memory_used : 0; }
int64_t eai_budget_cpu_used(const struct eai_budget *b) { return b ? b->cpu_used : 0; }
int eai_budget_tenants(const struct eai_budget *b) { return b ? b->nholders : 0; }

void eai_budget_tenant_used(const struct eai_budget *b, const char *tenant, int64_t *memory, int64_t *cpu)
{
    const struct holder *h = b && tenant ? find(b, tenant) : NULL;
    *memory = h ? h->memory : 0;
    *cpu = h ? h->cpu : 0;
}

/* ------------------------------------------------------------ refusals, gauges */

struct eai_error *eai_budget_refusal(const struct eai_budget *b, enum eai_budget_fit fit, const char *tenant,
                                     int64_t memory, int64_t cpu)
{
    enum eai_code code = fit == EAI_BUDGET_TOO_LARGE     ? EAI_E_BUDGET_EXCEEDS_SHARE
                         : fit == EAI_BUDGET_TENANT_FULL ? EAI_E_TENANT_SHARE_EXHAUSTED
                                                         : EAI_E_NODE_BUDGET_EXHAUSTED;
    int64_t tm = 0, tc = 0;
    if (fit == EAI_BUDGET_TENANT_FULL) /* the others read nothing that changes (any thread) */
        eai_budget_tenant_used(b, tenant, &tm, &tc);
    char msg[300];
    if (fit == EAI_BUDGET_TOO_LARGE)
        snprintf(msg, sizeof msg,
                 "%" PRId64 " MiB and %" PRId64 "m CPU are more than the tenant may hold on a node"
                 " (%" PRId64 " MiB and %" PRId64 "m: node.tenant_share)",
                 memory >> 20, cpu, eai_budget_tenant_memory_cap(b, tenant) >> 20,
                 eai_budget_tenant_cpu_cap(b, tenant));
    else if (fit == EAI_BUDGET_TENANT_FULL)
        snprintf(msg, sizeof msg,
                 "%" PRId64 " MiB and %" PRId64 "m CPU do not fit in the tenant's share of the node"
                 " (%" PRId64 " MiB and %" PRId64 "m of it free: node.tenant_share)",
                 memory >> 20, cpu, (eai_budget_tenant_memory_cap(b, tenant) - tm) >> 20,
                 eai_budget_tenant_cpu_cap(b, tenant) - tc);
    else
        snprintf(msg, sizeof msg,
                 "%" PRId64 " MiB and %" PRId64 "m CPU do not fit in the node's budget"
                 " (%" PRId64 " MiB and %" PRId64 "m free: node.memory_budget, node.cpu_budget)",
                 memory >> 20, cpu, (eai_budget_memory_total(b) - eai_budget_memory_used(b)) >> 20,
                 eai_budget_cpu_total(b) - eai_budget_cpu_used(b));
    struct eai_error *e = eai_error_new(code, 0, "%s", msg);
    if (e)
        e->details = json_pack("[{s:s, s:s}]", "path", "/limits", "message", msg);
    return e;
}

void eai_budget_gauges(const struct eai_budget *b)
{
    if (!b)
        return;
    eai_metrics_set("eai_node_budget_memory_bytes", "kind=\"reserved\"", (double)b->memory_used);
    eai_metrics_set("eai_node_budget_memory_bytes", "kind=\"total\"", (double)b->memory_total);
    eai_metrics_set("eai_node_budget_cpu_millicores", "kind=\"reserved\"", (double)b->cpu_used);
    eai_metrics_set("eai_node_budget_cpu_millicores", "kind=\"total\"", (double)b->cpu_total);
    eai_metrics_set("eai_node_budget_tenants", NULL, (double)b->nholders);
}
