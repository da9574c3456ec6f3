/* The local runner's insides, shared by pc_runner.c (the lifecycle) and
 * pc_runner_api.c (start, cancel, unpark, shutdown).  Not for drivers:
 * they see eai_pc.h only. */
#ifndef EAI_PC_RUNNER_INT_H
#define EAI_PC_RUNNER_INT_H

#include "eai_pc.h"

enum pc_run_state { PC_PARKED = 0, PC_PREPARING, PC_RUNNING, PC_SETTLING, PC_FINISHING, PC_STATE_MAX };

struct eai_pc_runner {
    const struct eai_host *host;
    const struct eai_pc_driver_ops *ops;
    void *drv;
    const char *work_dir, *cg_parent;
    unsigned uid;
    int cg_v2;
    int *inflight;
    const int *destroying;
    unsigned long seq;
    struct eai_pc_run *runs;     /* every live run */
};

static inline int destroying(const struct eai_pc_runner *r)
{
    return *r->destroying;
}

/* A worker step or a child of the run holds the driver. */
static inline void hold(struct eai_pc_runner *r)
{
    ++*r->inflight;
}

void eai_pc_run_unlink(struct eai_pc_run *e);
void eai_pc_run_free(struct eai_pc_run *e);
/* PREPARING: ops->prepare on a worker, then spawn. */
void eai_pc_run_launch(struct eai_pc_run *e);
/* End a run that never ran, from the loop, after start() returned. */
void eai_pc_run_end_soon(struct eai_pc_run *e, int code, const char *msg);
/* FINISHING: end_work, collect, teardown on a worker, then on_exit. */
void eai_pc_run_finish(struct eai_pc_run *e);
/* Timeout or cancel: walk the driver's stop steps. */
void eai_pc_run_stop(struct eai_pc_run *e);

#endif
