/* Kata isolation backend (containerd + io.containerd.kata.v2): internal
 * declarations (docs/kata.md). */
#ifndef EAI_KATA_H
#define EAI_KATA_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include <eai/isolation.h>

#include "eai_pc.h"

struct event;

#define KT_COMPONENT "kata"
#define KT_CID_PREFIX "eai-"
#define KT_CTR_TIMEOUT_MS 15000      /* version, kill, delete, ls */
#define KT_PROBE_TIMEOUT_MS 120000   /* one trivial container (a Kata VM boot) */
#define KT_EVENT_WAIT_MS 10000       /* after ctr run ends: wait for its events (ends early when they come) */
#define KT_HARD_KILL_MS 5000         /* SIGKILL sent, run still alive: kill ctr */
#define KT_REPROBE_MS 30000          /* retry a failed probe */
#define KT_EVENTS_RESTART_MS 1000    /* `ctr events` died: restart it */

/* --------------------------------------------------------------- children */

/* ctr children: eai_pc_child_spawn(k->host->base, k, ...) (plugins/common). */

/* --------------------------------------------------------------- instance */

struct kt_events;

/* What the events stream told us about one container. */
struct kt_seen {
    int created, started, oom, exited, deleted;
    int exit_status;
};

struct kt {
    const struct eai_host *host;
    char ctr[PATH_MAX];
    char address[PATH_MAX];
    char ns[64];
    char runtime[128];
    char shim[PATH_MAX];         /* resolved shim binary, or its bare name */
    char work_dir[PATH_MAX];
    char cg_parent[64];          /* "eai-kata/<16 hex>" */
    int cg_v2;
    unsigned uid;
    int probe_enabled;
    int64_t kill_grace_ms;       /* SIGTERM -> SIGKILL */

    int probe_state;             /* 0 pending, 1 ready, -1 failed */
    int sweeping;
    char version[128];
    char reason[256];
    struct event *reprobe_ev;

    /* The probe's trivial containers: "<probe_prefix><seq>", the prefix
     * random per instance so that our own sweep never touches them. */
    char probe_prefix[48];
    char probe_cid[96];
    struct kt_seen probe_seen;
    int probe_waiting;           /* ctr run ended, waiting for its exit event */
    int probe_retried;           /* one quick retry when only the event was missing */
    struct event *probe_wait_ev;
    void *probe_ctx;

    struct kt_events *events;    /* `ctr events` child */

    struct eai_pc_runner *runner; /* every live execution (plugins/common) */
    unsigned long seq;
    int inflight;                /* work items and children referencing us */
    int destroying;
};

int kt_ready(const struct kt *k);   /* 1 when jobs may start now */
void kt_release(void *self);        /* drop one inflight; frees when destroying */
/* 0 when the shim binary for k->runtime is on PATH (fills k->shim). */
int kt_shim_check(struct kt *k, char *why, size_t whylen);
/* argv prefix for ctr: {ctr, --address, A, --namespace, N, --connect-timeout, 5s}. */
#define KT_CTR_ARGC 7
void kt_ctr_argv(struct kt *k, char *argv[KT_CTR_ARGC]);

/* kata_sweep.c: the isolation op `sweep`. */
void kt_sweep(void *self);

/* kata_events.c: one long-lived `ctr events` child, lines parsed on the loop. */
int kt_events_start(struct kt *k);
void kt_events_stop(struct kt *k);
int kt_events_running(const struct kt *k);
/* Called by the events reader for each event of our namespace. */
void kt_on_event(struct kt *k, const char *topic, const char *cid, int exit_status);
/* Parse one `ctr events` line.  0 and fields when it is an event of
 * namespace ns with a container id; -1 otherwise. */
int kt_event_parse(const char *line, const char *ns, char *topic, size_t topiclen, char *cid, size_t cidlen,
                   int *exit_status);

/* kata_exec.c: the runner driven by ctr; events of our containers. */
struct eai_pc_runner *kt_runner_new(struct kt *k);
void kt_exec_event(struct kt *k, const char *topic, const char *cid, int exit_status);

/* --------------------------------------------------------------- files */

/* Bundles: struct eai_pc_bundle (plugins/common/eai_pc.h). */

/* Worker: mkdir dir, mount the size-capped tmpfs, write input files,
 * config.json (the OCI spec handed to `ctr run --config`), create our
 * cgroup.  0 or -1 with msg. */
int kt_bundle_prepare(struct eai_pc_bundle *b, const struct eai_iso_job *job, char *msg, size_t msglen);

/* kata_cgroup.c: make <cgpath> (memory + cpuacct on v1).  0 or -1 with msg. */
int kt_cgroup_create(const struct eai_pc_bundle *b, char *msg, size_t msglen);

void kt_cgroup_stats(const struct eai_pc_bundle *b, struct eai_pc_stats *st);
/* Kill what is left below cgpath, remove it in every hierarchy.  0 or -1. */
int kt_cgroup_remove(const char *cgpath, int cg_v2);
/* rmdir <cg_parent> and its parent where they are empty (at destroy). */
void kt_cgroup_rmdir_parent(const char *cg_parent, int cg_v2);


#endif
