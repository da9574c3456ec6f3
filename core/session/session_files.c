/* The file routes of a session: PUT / GET / DELETE
 * /v1/sandbox/sessions/{id}/files/{*path} and the listing GET .../files
 * (session_int.h, docs/sessions.md).  The backend's session_file op runs
 * on a worker; the paths follow the rules of execution files (under /tmp). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session/session_int.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "exec/exec_validate.h"
#include "http/park.h"
#include "http/req_audit.h"

struct file_job {
    struct eai_app *app;
    struct eai_sessions *reg;      /* files_inflight: counted down once the backend returned */
    int counted_down;
    const struct eai_isolation_ops *ops;
    void *self;
    char id[48];
    char *path;
    enum eai_iso_file_op op;
    unsigned char *data;           /* PUT: the body (copied); GET: the file */
    size_t len;
    int64_t max;
    json_t *list;
    int rc;
    struct eai_error *err;
};

static void file_work(void *arg)
{
    struct file_job *j = arg;
    unsigned char *out = NULL;
    size_t outlen = 0;
    j->rc = j->ops->session_file(j->self, j->id, j->op, j->path, j->data, j->len, j->max, &out, &outlen,
                                 &j->list, &j->err);
    if (j->op == EAI_ISO_FILE_GET) {
        j->data = out;
        j->len = outlen;
    }
    j->counted_down = 1;
    j->reg->files_inflight--;
}

static void file_answer(struct eai_req *r, void *arg)
{
    struct file_job *j = arg;
    if (!r)
        return;
    if (j->rc < 0) {
        enum eai_code code = j->err ? j->err->code : EAI_E_INTERNAL;
        if (code == EAI_E_NOT_FOUND) { /* a missing file (or a directory through a link the sandbox made) */
            eai_reply_not_found(r, EAI_MISSING_SESSION_FILE);
            return;
        }
        json_t *d = j->err && j->err->message
                        ? json_pack("[{s:s, s:s}]", "path", j->path, "message", j->err->message)
                        : NULL;
        eai_reply_error(r, code, d);
        return;
    }
    switch (j->op) {
    case EAI_ISO_FILE_GET:
        eai_reply_raw(r, 200, "application/octet-stream", j->data ? (const char *)j->data : "", j->len);
        break;
    case EAI_ISO_FILE_LIST:
        eai_reply_json(r, 200, json_pack("{s:s, s:O}", "path", j->path, "items", j->list ? j->list : json_array()));
        break;
    default:
        eai_reply_json(r, 200, json_pack("{s:s, s:I}", "path", j->path, "size",
                                         (json_int_t)(j->op == EAI_ISO_FILE_PUT ? j->len : 0)));
    }
}

static void file_free(void *arg)
{
    struct file_job *j = arg;
    if (j->reg && !j->counted_down)
        j->reg->files_inflight--; /* never ran */
    free(j->path);
    free(j->data);
    json_decref(j->list);
    eai_error_free(j->err);
    free(j);
}

static const struct eai_park_ops file_ops = {
    .what = "session_file", .work = file_work, .answer = file_answer, .free = file_free,
};

static void file_route(struct eai_app *app, struct eai_req *r, enum eai_iso_file_op op, const char *action)
{
    struct eai_sessions *reg = ses_reg(app);
    const char *id = eai_req_param(r, "id");
    if (!reg) {
        eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE, NULL);
        return;
    }
    void (*route)(struct eai_app *, struct eai_req *) = op == EAI_ISO_FILE_PUT      ? eai_session_route_file_put
                                                        : op == EAI_ISO_FILE_GET    ? eai_session_route_file_get
                                                        : op == EAI_ISO_FILE_DELETE ? eai_session_route_file_delete
                                                                                    : eai_session_route_file_list;
    struct eai_session *s = ses_id_ok(id) ? ses_find(reg, eai_req_tenant(r), id) : NULL;
    if (!s && ses_id_ok(id) && ses_store_on(app)) {
        ses_route_stored(app, r, action, route);
        return;
    }
    if (!s) {
        json_t *ev = eai_req_audit_event(r, action, ses_id_ok(id) ? id : "", "deny", "not_found");
        if (ev)
            eai_req_audit_async(app, eai_req_tenant(r), ev);
        eai_reply_not_found(r, EAI_MISSING_SESSION);
        return;
    }
    if (ses_claim_wait(s, r, route)) /* being parked, or restored here (session_handoff.c) */
        return;
    /* a paused session's /tmp stays on the host: its files answer */
    if (!ses_live(s) || s->state == SES_ENDING || s->state == SES_STARTING) {
        eai_reply_error(r, EAI_E_SESSION_ENDED, NULL);
        return;
    }
    /* the path: {*path} of the route, or ?path= for the listing */
    const char *p = op == EAI_ISO_FILE_LIST ? eai_req_query(r, "path") : eai_req_param(r, "path");
    if (op == EAI_ISO_FILE_LIST && !p)
        p = "/tmp";
    size_t n = p ? strlen(p) + 2 : 0;
    char *path = n ? malloc(n) : NULL;
    if (path)
        snprintf(path, n, "%s%s", p[0] == '/' ? "" : "/", p);
    if (!path || !eai_exec_tmp_path_ok(path, strlen(path), op == EAI_ISO_FILE_LIST) ||
        eai_exec_path_max_segment(path) > EAI_EXEC_MAX_NAME_BYTES ||
        (op != EAI_ISO_FILE_LIST && strcmp(path, "/tmp") == 0)) {
        free(path);
        eai_reply_error(r, EAI_E_VALIDATION_FAILED,
                        json_pack("[{s:s, s:s}]", "path", "/path", "message",
                                  "must be a path under /tmp without '.', '..' or empty segments"));
        return;
    }
    struct file_job *j = calloc(1, sizeof *j);
    if (!j) {
        free(path);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    j->app = app;
    j->reg = reg;
    reg->files_inflight++;
    j->ops = ses_ops(s);
    j->self = s->prof->iso->self;
    j->op = op;
    j->path = path;
    j->max = app->cfg && app->cfg->files_max_total_bytes > 0 ? app->cfg->files_max_total_bytes : SES_FILE_MAX;
    snprintf(j->id, sizeof j->id, "%s", s->id);
    if (op == EAI_ISO_FILE_PUT) {
        size_t len = 0;
        const char *body = eai_req_body(r, &len);
        if ((int64_t)len > j->max) {
            file_free(j);
            eai_reply_error(r, EAI_E_PAYLOAD_TOO_LARGE, NULL);
            return;
        }
        j->data = malloc(len ? len : 1);
        if (!j->data) {
            file_free(j);
            eai_reply_error(r, EAI_E_INTERNAL, NULL);
            return;
        }
        if (len)
            memcpy(j->data, body, len);
        j->len = len;
    }
    /* a file call keeps the session from idling */
    s->last_used_ms = eai_now_ms();
    if (op != EAI_ISO_FILE_GET && op != EAI_ISO_FILE_LIST) {
        json_t *ev = eai_req_audit_event(r, action, s->id, "allow", NULL);
        if (ev) {
            json_object_set_new(ev, "reason", json_string(path));
            eai_req_audit_async(app, s->tenant, ev);
        }
    }
    eai_park(reg->parks, r, &file_ops, j);
}

void eai_session_route_file_put(struct eai_app *app, struct eai_req *r)
{
    file_route(app, r, EAI_ISO_FILE_PUT, "sandbox.session.file.put");
}

void eai_session_route_file_get(struct eai_app *app, struct eai_req *r)
{
    file_route(app, r, EAI_ISO_FILE_GET, "sandbox.session.file.get");
}

void eai_session_route_file_delete(struct eai_app *app, struct eai_req *r)
{
    file_route(app, r, EAI_ISO_FILE_DELETE, "sandbox.session.file.delete");
}

void eai_session_route_file_list(struct eai_app *app, struct eai_req *r)
{
    file_route(app, r, EAI_ISO_FILE_LIST, "sandbox.session.file.list");
}
