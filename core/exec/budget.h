/*
 * The node budget (issue 36 item 6; docs/admission.md): one amount of
 * memory and CPU per node that executions and sessions share, and each
 * tenant's share of it.  An execution reserves its limits while it runs
 * (from its start on a backend to its end), a session while it is not
 * paused (from its create to its end; a pause gives them back, a resume
 * takes them again).
 *
 * Pure accounting: no I/O, no locks, loop thread only (the scheduler and
 * the sessions call it from the loop).  The caller decides what a refusal
 * means: the scheduler keeps an execution waiting, a session route answers
 * 429 with Retry-After.
 */
#ifndef EAI_EXEC_BUDGET_H
#define EAI_EXEC_BUDGET_H

#include <stdint.h>

struct eai_budget;
struct eai_config;
struct eai_error;

/* What eai_budget_check / eai_budget_take found. */
enum eai_budget_fit {
    EAI_BUDGET_FITS = 0,
    EAI_BUDGET_NODE_FULL,      /* the node has not that much free now */
    EAI_BUDGET_TENANT_FULL,    /* the tenant's share has not that much free now */
    EAI_BUDGET_TOO_LARGE,      /* more than a tenant's whole share: never fits */
    EAI_BUDGET_FIT_MAX
};

/* A budget of memory_bytes and cpu_millis (both > 0), of which one tenant
 * may hold at most share_permille / 1000 (1..1000).  NULL when out of
 * memory. */
struct eai_budget *eai_budget_new(int64_t memory_bytes, int64_t cpu_millis, int share_permille);
void eai_budget_free(struct eai_budget *b);

/* The node's budget from the configuration (node.memory_budget,
 * node.cpu_budget, node.tenant_share; 0: the host's, see
 * eai_budget_host_defaults), logged once.  NULL and *err when out of
 * memory. */
struct eai_budget *eai_budget_from_config(const struct eai_config *cfg, struct eai_error **err);
/* The defaults from the host: 80% of the memory (MemTotal, or the
 * cgroup's memory.max when lower) and EAI_BUDGET_CPU_OVERCOMMIT x 1000
 * millicores per CPU this process may run on (or of its cgroup's cpu.max
 * when lower).  Read once at start (before the loop runs). */
#define EAI_BUDGET_CPU_OVERCOMMIT 8
void eai_budget_host_defaults(int64_t *memory_bytes, int64_t *cpu_millis);

/* 1 when the sandboxes of backend run on this host and so count against
 * its budget: every backend but k8s (its pods run on the cluster's nodes,
 * under the cluster's own admission). */
int eai_budget_counts_backend(const char *backend);
/* A tenant's own share (per mille, 1..1000) instead of the default one
 * (node.tenant_shares).  At start only, before the budget is shared with
 * other threads.  0, or -1 (bad value, out of memory). */
int eai_budget_set_tenant_share(struct eai_budget *b, const char *tenant, int share_permille);
/* 1 when memory/cpu alone exceed tenant's whole share (they can never
 * fit).  Reads only what never changes after start: safe on any thread
 * (the create job refuses such an execution on its worker). */
int eai_budget_exceeds_share(const struct eai_budget *b, const char *tenant, int64_t memory, int64_t cpu);
/* Would memory/cpu of tenant fit now?  Takes nothing. */
enum eai_budget_fit eai_budget_check(const struct eai_budget *b, const char *tenant, int64_t memory, int64_t cpu);
/* Reserve when it fits (EAI_BUDGET_FITS), else nothing is taken. */
enum eai_budget_fit eai_budget_take(struct eai_budget *b, const char *tenant, int64_t memory, int64_t cpu);
/* Reserve whatever the budget says (a sandbox that already runs: an
 * execution reattached after a restart).  0, or -1 when out of memory. */
int eai_budget_force(struct eai_budget *b, const char *tenant, int64_t memory, int64_t cpu);
/* Give back what take or force reserved; then tell the listener. */
void eai_budget_give(struct eai_budget *b, const char *tenant, int64_t memory, int64_t cpu);

/* Called (on the loop) after every give: the scheduler starts what waits. */
void eai_budget_set_listener(struct eai_budget *b, void (*fn)(void *arg), void *arg);

/* Totals and reservations, for metrics, logs and tests. */
int64_t eai_budget_memory_total(const struct eai_budget *b);
int64_t eai_budget_cpu_total(const struct eai_budget *b);
int64_t eai_budget_memory_used(const struct eai_budget *b);
int64_t eai_budget_cpu_used(const struct eai_budget *b);
/* A tenant's reservations (0 when it holds none). */
void eai_budget_tenant_used(const struct eai_budget *b, const char *tenant, int64_t *memory, int64_t *cpu);
/* The most tenant may hold (its own share, or the default one; tenant may
 * be NULL: the default).  Any thread. */
int64_t eai_budget_tenant_memory_cap(const struct eai_budget *b, const char *tenant);
int64_t eai_budget_tenant_cpu_cap(const struct eai_budget *b, const char *tenant);
/* Tenants holding something. */
int eai_budget_tenants(const struct eai_budget *b);

/* The error of a refusal (node_budget_exhausted, tenant_share_exhausted:
 * 429; budget_exceeds_share: 422) with a detail naming what was asked and
 * what is free (details[0], path /limits). */
struct eai_error *eai_budget_refusal(const struct eai_budget *b, enum eai_budget_fit fit, const char *tenant,
                                     int64_t memory, int64_t cpu);
/* The Retry-After of a 429 refusal, in seconds. */
#define EAI_BUDGET_RETRY_AFTER_S 5

/* Publish the gauges (eai_node_budget_*). */
void eai_budget_gauges(const struct eai_budget *b);

#endif
