/*
 * Inside the sessions module (session.h), shared by its files:
 *   session.c         the registry, lifetimes (tick), the backend's
 *                     callbacks, the end (usage + audit), views;
 *   session_routes.c  create, get, list, delete, executions;
 *   session_files.c   the file routes;
 *   session_handoff.c parked sessions any replica resumes.
 */
#ifndef EAI_CORE_SESSION_INT_H
#define EAI_CORE_SESSION_INT_H

#include <limits.h>
#include <stdint.h>
#include <jansson.h>
#include <eai/isolation.h>

#include "app.h"
#include "session/session.h"

#define SES_COMPONENT "sessions"
#define SES_TICK_MS 1000             /* idle and TTL checks */
#define SES_KEEP_ENDED_MS (3600 * 1000) /* an ended session stays readable this long */
#define SES_KEEP_ENDED_MAX 1000      /* and at most this many ended ones */
#define SES_KEEP_ENDED_TENANT 100    /* of one tenant: another's churn never evicts them */
#define SES_FILE_MAX (8LL << 20)     /* one file through the file API (files.max_total_bytes) */
#define SES_CLAIM_WAIT_MAX 16        /* calls waiting while a parked session is restored here */
#define SES_PARKED_OWNER "parked"    /* the owner of a parked session's record: no node */

struct eai_parked;
struct eai_park_set;
struct event;

enum ses_state { SES_STARTING = 0, SES_RUNNING, SES_ENDING, SES_ENDED, SES_FAILED, SES_PAUSING, SES_PAUSED,
                 SES_RESUMING,
                 SES_INTERRUPTED /* its sandbox died with the eaid that ran it (read back from storage) */ };

struct eai_session {
    struct eai_session *next;
    struct eai_sessions *reg;        /* the registry (valid until eai_sessions_free) */
    char id[48];                     /* "ses_<uuid>" */
    char tenant[64];
    char actor[64];                  /* the key that created it (audit of its end) */
    char request_id[128];
    enum ses_state state;
    char end_reason[24];             /* deleted, idle_timeout, ttl, oom_killed, crashed, interrupted, boot_failed */
    char message[256];
    const struct eai_profile *prof; /* NULL for a session read back from storage whose profile
                                       this node does not have (ended, never run here) */
    char profile[128], backend[64]; /* its profile's and backend's names (views, billing) */
    char image[256];
    char project_id[129], agent_id[129], run_id[129]; /* "" when not given */
    json_t *limits;                  /* canonical {cpu, memory, pids, disk} */
    json_t *env;                     /* merged into every execution's env */
    int64_t cpu_millis, memory_bytes, pids, disk_bytes;
    int64_t idle_timeout_s, ttl_s;
    int max_concurrent;
    int resume_asked;                /* resume once the pause is done */
    char paused_by[8];               /* "user" (POST .../pause), "idle" (idle_timeout_s with auto_pause),
                                        "drain" (eaid stopped): a call resumes all but "user" ones unless
                                        auto_resume */
    int drain_wait;                  /* paused by the shutdown: its on_paused is awaited */
    /* granted egress (docs/sessions.md "Egress") */
    json_t *egress;                  /* its allow list now (array of "host:port"), NULL: no network */
    struct eai_egress_lease *lease;  /* its namespace and grant while it lives */
    json_t *volumes;                 /* its volumes [{id, name, path, read_only}] (docs/volumes.md), or NULL */
    struct eai_vol_att *vol_att;     /* held while its sandbox lives (vol/volume.h) */
    int leasing;                     /* the namespace is being made (boot follows) */
    json_t *net_summary;             /* the network log's summary, once ended */
    int auto_resume;                 /* a call on a paused session resumes it */
    int auto_pause;                  /* idle_timeout_s pauses it (default) instead of ending it */
    int64_t paused_ttl_s;            /* a paused session ends this long after its pause */
    int64_t rate_start_ms;           /* pause/resume rate: the current minute's start */
    int rate_n;                      /* and the calls in it */
    int64_t paused_ms;               /* when it was paused (0: not) */
    double paused_s;                 /* seconds spent paused (not billed for memory) */
    int64_t created_ms, ready_ms, ended_ms, last_used_ms;
    int64_t executions;
    double cpu_seconds, peak_mb;
    int interrupted;                 /* ended by the shutdown before the backend's numbers came:
                                        its usage is partial */
    int stop_end;                    /* destroyed by the shutdown: its on_end is awaited */
    int backend_live;                /* the backend owes on_end (or on_ready) */
    int64_t rev;                     /* writes of its record (session_store.c): the next is rev + 1 */
    int64_t persisted_ms;            /* when its record was last queued for writing */
    struct eai_parked *hold;         /* the create or delete request waiting */
    int hold_is_delete;
    int hold_is_pause;               /* the hold waits for on_paused / on_resumed */
    /* snapshots and forks (session_snap.c) */
    int snapshotting;                /* a snapshot of it is being taken */
    char from_snapshot[48];          /* a fork: the snapshot it was restored from ("": none) */
    char *restore_from;              /* a fork: the snapshot's directory, until it is ready */
    struct ses_fork *fork;           /* a fork: its request's group, until it is ready or failed */
    int fork_idx;                    /* its place in the group */
    int need_netns;                  /* a fork of a snapshot with network: a namespace even with no egress */
    /* parked for any replica (session_handoff.c, docs/sessions.md "Any replica") */
    int parking;                     /* 1: its saved state is being copied to the handoff directory,
                                        2: its local sandbox is being removed, 3: its record written */
    int claiming;                    /* claimed from the handoff directory: being restored here */
    int64_t park_bytes;              /* the size of its handoff directory */
    double cpu_before;               /* cpu seconds its earlier nodes billed (a claimed session) */
    char handoff_dir[PATH_MAX];      /* a claimed session's directory, until it runs */
    struct {
        struct eai_parked *hold;
        void (*route)(struct eai_app *, struct eai_req *);
    } claim_wait[SES_CLAIM_WAIT_MAX]; /* calls waiting for the claim's restore */
    int nclaim_wait;
    int budget_held;                 /* its limits are reserved in the node budget (exec/budget.h) */
};

/* A snapshot (session_snap.c, docs/sessions.md "Snapshots and forks"). */
enum snp_state { SNP_CREATING = 0, SNP_READY, SNP_DELETING, SNP_DELETED };
struct eai_snapshot {
    struct eai_snapshot *next;
    struct eai_app *app;
    char id[48];                     /* "snp_<uuid>" */
    char tenant[64];
    char session_id[48];             /* the session it was taken of */
    char actor[64], request_id[128];
    enum snp_state state;
    json_t *spec;                    /* what a fork gets: profile, image, limits, env, lifetimes, ids */
    int64_t size_bytes;              /* its directory on the data disk, once ready */
    int64_t bound_bytes;             /* while taken: the most it may hold (memory limit + /tmp size) */
    int64_t created_ms, expires_ms;
    int users;                       /* forks being restored from it now (not deletable meanwhile) */
    int forks;                       /* sessions forked from it so far (this process) */
    struct eai_parked *hold;         /* the create request, until taken */
};

/* One fork request (POST /v1/sandbox/sessions with from_snapshot): answered
 * once each of its sessions is ready or failed. */
#define SES_FORK_MAX 100
struct ses_fork {
    struct eai_parked *hold;
    struct eai_snapshot *snap;
    int single;                      /* no count given: answered as a plain create */
    int n, pending, building;
    json_t *items;                   /* the views, by index */
};

struct eai_sessions {
    struct eai_app *app;
    char node[64];                   /* this node's name in stored records (<data_dir>/node-name) */
    int stopping;                    /* eai_sessions_begin_stop ran: live sessions are being destroyed,
                                        their ends (with the backend's usage) still recorded */
    int stopped;                     /* eai_sessions_stop ran: callbacks only mark, never free */
    _Atomic int files_inflight;      /* file jobs that may still call the backend (worker) */
    struct eai_session *list;        /* newest first */
    struct eai_park_set *parks;
    struct event *tick;
    json_t *rates;                   /* tenant -> [minute start ms, pauses + resumes in it] */
    struct eai_snapshot *snaps;      /* this node's snapshots (session_snap.c) */
    int64_t parked_sweep_ms;         /* the last read of the parked records (session_handoff.c) */
    int64_t handoff_avail;           /* bytes free in handoff_dir: read at start and each minute, less
                                        what this node parked since (-1: unknown) */
};

struct eai_sessions *ses_reg(struct eai_app *app);
/* The session id of this tenant, or NULL (another tenant's: NULL too). */
struct eai_session *ses_find(struct eai_sessions *reg, const char *tenant, const char *id);
int ses_live(const struct eai_session *s);
int ses_live_count(const struct eai_sessions *reg, const char *tenant);
/* Boot the sandbox (backend session_create); 0 or -1 with *err. */
int ses_boot(struct eai_session *s, struct eai_error **err);
/* Pause admission (issue 36 item 3): the tenant's checkpoint quota
 * (sessions.checkpoint_quota_bytes; a paused session counts its memory
 * limit, the most its checkpoint holds) and the data disk's free-space floor
 * (sessions.min_free_bytes).  0, or -1 with *err (storage_quota_exceeded,
 * insufficient_storage 507). */
int ses_pause_admit(const struct eai_session *s, struct eai_error **err);
/* A pause or resume asked by a call (not the idle timer or the stop): the
 * session's and its tenant's rate per minute.  1 ok (counted), 0 over with
 * *retry_after_s. */
int ses_rate_take(struct eai_session *s, int64_t *retry_after_s);
/* Start s: with granted egress, lease its namespace first, then boot
 * (the hold is answered when it is ready or failed); else boot at once.
 * 0, or -1 with *err (nothing started). */
int ses_start(struct eai_session *s, struct eai_error **err);
/* Take back a session its backend kept across a restart (paused). */
int ses_adopt(struct eai_session *s, struct eai_error **err);
/* The stop paused s (err NULL) or could not: kept by the backend for the
 * next process of this node and recorded paused, or ended interrupted. */
void ses_drain_keep(struct eai_session *s, const struct eai_error *err);
/* The backend can keep sessions across a restart (ABI 1.4). */
int ses_can_keep(const struct eai_session *s);
/* End a live session for reason (backend session_destroy; on_end follows). */
void ses_end(struct eai_session *s, const char *reason);
/* The node budget (docs/admission.md): a session holds its cpu and memory
 * limits from its create to its end, except while paused.  take: 0 (held,
 * or nothing to hold), or -1 with *err (node_budget_exhausted,
 * tenant_share_exhausted: 429 with Retry-After; budget_exceeds_share:
 * 422).  give: idempotent. */
int ses_budget_take(struct eai_session *s, struct eai_error **err);
void ses_budget_give(struct eai_session *s);
/* Pause / resume through the backend (the answer comes to the hold);
 * resume takes the budget back first (refused: -1 with its error). */
int ses_pause(struct eai_session *s, struct eai_error **err);
int ses_resume(struct eai_session *s, struct eai_error **err);
/* The public view of a session. */
json_t *ses_view(const struct eai_session *s);
const struct eai_isolation_ops *ses_ops(const struct eai_session *s);
const struct eai_isolation_ops *ses_profile_ops(const struct eai_profile *p);
void ses_audit(struct eai_app *app, const struct eai_session *s, const char *action, const char *decision,
               const char *reason);
/* ---- stored sessions (session_store.c; docs/sessions.md "Stored sessions") */
#define SES_HEARTBEAT_MS (60 * 1000) /* a live session's record is rewritten this often (seen_at) */
#define SES_SWEEP_MAX 1000           /* records of a previous life read at start, per pass */
/* The storage has the session ops (ABI 1.4): sessions are stored. */
int ses_store_on(const struct eai_app *app);
/* Queue a write of s's record (rev + 1) on a worker; no-op without storage. */
void ses_persist(struct eai_session *s);
/* This node's name (created once in the data directory) into reg->node,
 * and the sweep of the records this node left non-terminal in a previous
 * life (kill -9, power loss): each is recorded interrupted, with a partial
 * usage event and an audit event.  0 or -1 with *err. */
int ses_store_start(struct eai_sessions *reg, struct eai_error **err);
/* A session route found no session {id} of r's tenant in this node's
 * registry: with storage, look the record up on a worker; then route(app,
 * r) again when the session is in the registry meanwhile, else answer from
 * the record (GET: its stored view; an ended one: 409 session_ended, or
 * 200 its view for a DELETE; a live one of another node: 409 conflict), or
 * 404.  Without storage: 404 at once. */
void ses_route_stored(struct eai_app *app, struct eai_req *r, const char *action,
                      void (*route)(struct eai_app *, struct eai_req *));
/* GET /v1/sandbox/sessions read from storage (the registry's views over
 * the stored ones of the same id). */
void ses_list_stored(struct eai_app *app, struct eai_req *r);
/* The state names of the API. */
const char *ses_state_name(enum ses_state st);
/* The usage event of s's end and its audit event, written on a worker. */
void ses_record_end(struct eai_sessions *reg, struct eai_session *s);
void ses_free(struct eai_session *s);

/* The record of s as stored (rev + 1, owner: this node). */
json_t *ses_record(struct eai_session *s);
/* A session rebuilt from its record (not in any list yet), or NULL. */
struct eai_session *ses_of_record(struct eai_sessions *reg, const char *tenant, const json_t *doc);
/* ses_route_stored once more after a lost claim: never claims again. */
void ses_route_stored_again(struct eai_app *app, struct eai_req *r, const char *action,
                            void (*route)(struct eai_app *, struct eai_req *));

/* ---- parked for any replica (session_handoff.c; docs/sessions.md "Any replica") */
/* sessions.handoff_dir checked and made at start.  0 or -1 with *err. */
int ses_handoff_start(struct eai_sessions *reg, struct eai_error **err);
/* s (just paused by its idle timer) may be parked: handoff_dir is set,
 * the backend copies paused sessions, no network. */
int ses_park_on(const struct eai_session *s);
/* Copy its saved state to the handoff directory, remove its sandbox,
 * write its record parked, drop it from the registry. */
void ses_park(struct eai_session *s);
/* on_end of a parking session's local sandbox: 1 when it was that. */
int ses_park_end(struct eai_session *s, const struct eai_iso_session_end *end);
/* A call on s while it is parked or claimed: answered 503 (parking) or
 * held until it runs (claiming), 1; else 0 (route it as usual). */
int ses_claim_wait(struct eai_session *s, struct eai_req *r, void (*route)(struct eai_app *, struct eai_req *));
/* Restore s from its handoff directory (backend session_create with
 * restore_from); ses_claim_ready follows from on_ready.  0 or -1. */
int ses_claim_boot(struct eai_session *s, struct eai_error **err);
/* on_ready of a claimed session: 1 when it was that (the waiting calls
 * routed or answered). */
int ses_claim_ready(struct eai_session *s, const struct eai_error *err);
/* A call found doc, a parked record: claim it for this node (r parked
 * meanwhile, then route(app, r)).  1 when under way, 0 when it cannot be
 * claimed here (the caller answers from the record). */
int ses_claim_stored(struct eai_app *app, struct eai_req *r, const char *tenant, const json_t *doc,
                     const char *action, void (*route)(struct eai_app *, struct eai_req *));
/* A record this node claimed (status resuming) but did not restore (it
 * stopped, or died, meanwhile): written back parked, for any replica. */
void ses_unclaim(struct eai_sessions *reg, const char *tenant, const json_t *doc);
/* Each minute: the parked records whose lifetime ran out are claimed and
 * ended (no node's timer holds them), and the handoff directory's free
 * space is read again (reg->handoff_avail). */
void ses_handoff_tick(struct eai_sessions *reg, int64_t now);
/* sessions.handoff_dir is set and sessions are stored: idle sessions park. */
int ses_handoff_on(const struct eai_app *app);
/* Worker side (it reads storage): how many of tenant's sessions are parked.
 * They count against sessions.max_per_tenant on every replica, since any
 * may resume them.  0 without handoff_dir; -1 with *err when storage does
 * not answer. */
int ses_parked_count(struct eai_app *app, const char *tenant, struct eai_error **err);

/* "ses_" + 36 lowercase hex / dash characters */
int ses_id_ok(const char *id);

/* ---- snapshots and forks (session_snap.c) */
int snp_id_ok(const char *id);
json_t *snp_view(const struct eai_snapshot *p);
/* POST .../{id}/snapshots of s (found for r's tenant): admission, the
 * backend's session_snapshot, the answer once taken. */
void ses_snapshot_create(struct eai_app *app, struct eai_req *r, struct eai_session *s);
/* Start-up: the records read back; the retention (tick); the end. */
int snp_start(struct eai_sessions *reg, struct eai_error **err);
/* Not in this node's registry: with the records in storage, answered from
 * there on a worker (kind 0 GET: the record's view; 1 DELETE, 2 fork: 409
 * on another node; else 404; list: the tenant's, every node's).  1 when r
 * was parked, 0 when the caller answers (no storage ops). */
int snp_route_stored(struct eai_app *app, struct eai_req *r, int kind, const char *id, const char *session_id,
                     int list);
void snp_tick(struct eai_sessions *reg, int64_t now);
void snp_free_all(struct eai_sessions *reg);
struct eai_snapshot *snp_lookup(struct eai_sessions *reg, const char *tenant, const char *id);
/* s (a new session) from p's spec; -1 when its profile is not on this node. */
int snp_fill_session(struct eai_app *app, const struct eai_snapshot *p, struct eai_session *s);
int snp_dir(struct eai_app *app, const struct eai_snapshot *p, char *out, size_t len);
/* A fork settled (ready or failed): its view into its group, which is
 * answered once all are (session_routes.c). */
void ses_fork_settled(struct eai_session *s);
/* The shutdown: s will not settle; its group answered 503 once none will. */
void ses_fork_abort(struct eai_session *s);

#endif
