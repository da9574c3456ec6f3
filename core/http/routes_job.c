/* Worker jobs of the routes besides executions (routes_job.h). */
#include <stdio.h>
#include <stdlib.h>

#include "http/routes_job.h"
#include "base/errors.h"
#include "http/park.h"

static void job_work(void *arg)
{
    struct misc_job *j = arg;
    j->work(j);
}

static void job_answer(struct eai_req *r, void *arg)
{
    struct misc_job *j = arg;
    j->r = r;
    if (r)
        j->done(j);
}

static void job_free(void *arg)
{
    struct misc_job *j = arg;
    json_decref(j->in);
    json_decref(j->audit);
    json_decref(j->out);
    eai_error_free(j->err);
    if (j->ctx_free)
        j->ctx_free(j->ctx);
    free(j);
}

static const struct eai_park_ops misc_park_ops = {
    .what = "storage", .work = job_work, .answer = job_answer, .free = job_free,
};

struct misc_job *eai_misc_job_new(struct eai_app *app, struct eai_req *r, misc_work_fn w, misc_done_fn d)
{
    struct misc_job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->app = app;
    j->r = r;
    j->work = w;
    j->done = d;
    if (r && eai_req_tenant(r))
        snprintf(j->tenant, sizeof(j->tenant), "%s", eai_req_tenant(r));
    return j;
}

/* Park j->r while j runs on a worker (http/park.h answers a full queue). */
void eai_misc_job_submit(struct misc_job *j)
{
    if (!j->app->store) {
        struct eai_req *r = j->r;
        job_free(j);
        if (r)
            eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
        return;
    }
    eai_park(NULL, j->r, &misc_park_ops, j);
}

void eai_misc_reply_storage_error(struct misc_job *j)
{
    eai_park_reply_storage(j->r, "storage", j->err);
}

