/* The request API handlers use: accessors, replies, event streams, the
 * body as JSON or YAML (http/request.h).  Loop thread only. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>

#include "http/request_int.h"
#include "base/errors.h"
#include "base/log.h"
#include "obs/metrics.h"
#include "base/util.h"
#include "schema/yamljson.h"

#define SRV_COMPONENT "http"

void eai_req_mark_gone(struct eai_req *r, int evreq_dead)
{
    r->gone = 1;
    r->conn = NULL;
    if (evreq_dead)
        r->evreq = NULL;
    if (r->on_gone) {
        void (*fn)(void *) = r->on_gone;
        r->on_gone = NULL;
        fn(r->on_gone_arg);
    }
}


static void req_free(struct eai_req *r)
{
    if (!r)
        return;
    eai_route_params_clear(&r->params);
    if (r->query_ok)
        evhttp_clear_headers(&r->query);
    free(r->path);
    free(r->body);
    if (r->owner && r->owner->freed)
        r->owner->freed(r->owner_arg, r);
    free(r);
}

/* Per route (the last slot: unmatched requests), the series of its first
 * few status codes and of its duration, resolved once: a request's
 * metrics cost no label formatting and no lookup (loop thread only). */
#define RM_CODES 4
#define RM_SLOTS 128 /* open addressing by route (the table has ~30); a full table: formatted */
struct route_metrics {
    const struct eai_route *route; /* NULL: the slot is free */
    int code[RM_CODES];
    struct eai_metric_ref total[RM_CODES];
    struct eai_metric_ref dur;
};
static struct route_metrics *g_rm;
static struct route_metrics g_rm_unmatched;

static struct route_metrics *route_metrics_of(const struct eai_route *route)
{
    if (!route)
        return &g_rm_unmatched;
    if (!g_rm && !(g_rm = calloc(RM_SLOTS, sizeof *g_rm)))
        return NULL;
    unsigned i = (unsigned)(((uintptr_t)route >> 4) * 0x9E3779B1u) % RM_SLOTS;
    for (unsigned n = 0; n < RM_SLOTS; n++, i = (i + 1) % RM_SLOTS) {
        if (g_rm[i].route == route)
            return &g_rm[i];
        if (!g_rm[i].route) {
            g_rm[i].route = route;
            return &g_rm[i];
        }
    }
    return NULL;
}

static void req_count(const char *route, struct route_metrics *rm, int status, double secs)
{
    char labels[160];
    struct eai_metric_ref *tr = NULL;
    for (int i = 0; rm && i < RM_CODES && !tr; i++) {
        if (rm->code[i] == status || rm->code[i] == 0) {
            rm->code[i] = status;
            tr = &rm->total[i];
        }
    }
    if (!tr || eai_metrics_ref_add(tr, 1) < 0) {
        snprintf(labels, sizeof(labels), "route=\"%s\",code=\"%d\"", route, status);
        if (!tr || eai_metrics_ref(tr, "eai_http_requests_total", labels, 0) < 0 || eai_metrics_ref_add(tr, 1) < 0)
            eai_metrics_add("eai_http_requests_total", labels, 1);
    }
    if (!rm || eai_metrics_ref_observe(&rm->dur, secs) < 0) {
        snprintf(labels, sizeof(labels), "route=\"%s\"", route);
        if (!rm || eai_metrics_ref(&rm->dur, "eai_http_request_duration_seconds", labels, 2) < 0 ||
            eai_metrics_ref_observe(&rm->dur, secs) < 0)
            eai_metrics_observe("eai_http_request_duration_seconds", labels, secs);
    }
}

static void req_finish_metrics(struct eai_req *r)
{
    const char *route = r->route ? r->route->name : "unmatched";
    double secs = (double)(eai_monotonic_ns() - r->start_ns) / 1e9;
    req_count(route, route_metrics_of(r->route), r->status, secs);
    if (r->span) {
        eai_span_set_int(r->span, "http.status_code", r->status);
        eai_span_end(r->span, r->status >= 500);
        r->span = NULL;
    }
    eai_log_req(SRV_COMPONENT, EAI_LOG_DEBUG, r->request_id, "%s %s -> %d (%.1f ms)%s", r->method,
                r->path ? r->path : "?", r->status, secs * 1000, r->gone ? " (client gone)" : "");
}

/* Append one entry to evhttp's output header list without
 * evhttp_add_header's checks (struct evkeyval is public: keyvalq_struct.h;
 * evhttp frees key, value and entry with free).  For values of ours only:
 * the caller makes sure no byte of value is CR or LF unless it is a
 * complete header line break of its own. */
static int header_put(struct evkeyvalq *h, const char *key, const char *value, size_t vlen)
{
    struct evkeyval *kv = malloc(sizeof *kv);
    char *k = strdup(key), *v = malloc(vlen + 1);
    if (!kv || !k || !v) {
        free(kv);
        free(k);
        free(v);
        return -1;
    }
    memcpy(v, value, vlen);
    v[vlen] = '\0';
    kv->key = k;
    kv->value = v;
    TAILQ_INSERT_TAIL(h, kv, next);
    return 0;
}

/* Date, formatted once a second (evhttp would format it for every reply);
 * NULL when it cannot be (evhttp then adds its own). */
static const char *date_now(size_t *dlen)
{
    static __thread time_t last;
    static __thread char date[64];
    static __thread size_t len;
    time_t now = time(NULL);
    if (now != last || !len) {
        struct tm tm;
        if (!gmtime_r(&now, &tm))
            return NULL;
        len = evutil_date_rfc1123(date, sizeof date, &tm);
        if (len == 0 || len >= sizeof date) {
            len = 0;
            return NULL;
        }
        last = now;
    }
    *dlen = len;
    return date;
}

/* Date (when date), Content-Type (when ctype), X-Request-Id,
 * Content-Language, Vary and traceparent as one entry of evhttp's list
 * ("Wed, 02 Dec 2026 ... GMT\r\nContent-Type: application/json\r\n
 * X-Request-Id: id\r\n..."): evhttp writes each entry as "%s: %s\r\n" (a
 * printf) and frees each with three frees, so the six lines cost one
 * printf and three allocations instead of six and eighteen (the GET of a
 * finished execution, docs/performance.md).  The bytes on the wire are the
 * same header lines.  The entry is named after its first line, Date when
 * there is one: evhttp looks up Date (and Content-Length, written apart)
 * before adding its own; it adds no Content-Type (the server sets no
 * default: req_send names one for every reply with a body).  The request
 * id is the client's only when it passed eai_http_request_id_ok (no CR, LF
 * or other control byte); checked again here, as the content type, with
 * one evhttp_add_header a line as the fallback. */
static void add_common_headers(struct eai_req *r, struct evkeyvalq *h, const char *ctype, const char *date,
                               size_t dl)
{
    const char *lang = r->lang ? r->lang : "en";
    size_t il = strlen(r->request_id), ll = strlen(lang);
    char tp[56];
    if (r->span)
        eai_traceparent_format(eai_span_trace_id(r->span), eai_span_id(r->span), r->trace.flags, tp);
    static const char l1[] = "\r\nContent-Language: ", l2[] = "\r\nVary: Accept-Language", l3[] = "\r\ntraceparent: ";
    static const char l0[] = "\r\nX-Request-Id: ", lc[] = "\r\nContent-Type: ";
    char block[512]; /* 63 + 128 + 128 + 16 + the fixed text + a traceparent (55) */
    size_t cl = ctype ? strlen(ctype) : 0;
    if (il <= 128 && ll <= 16 && cl <= 128 && dl < 64 && !strpbrk(r->request_id, "\r\n") &&
        !strpbrk(lang, "\r\n") && !(ctype && strpbrk(ctype, "\r\n")) && !(date && memchr(date, '\n', dl))) {
        size_t n = 0;
        const char *name = "X-Request-Id";
#define PUT(p, l) (memcpy(block + n, (p), (l)), n += (l))
        if (date) {
            PUT(date, dl);
            name = "Date";
        }
        if (ctype) {
            if (date)
                PUT(lc, sizeof lc - 1);
            else
                name = "Content-Type";
            PUT(ctype, cl);
        }
        if (date || ctype)
            PUT(l0, sizeof l0 - 1);
        PUT(r->request_id, il);
        PUT(l1, sizeof l1 - 1);
        PUT(lang, ll);
        PUT(l2, sizeof l2 - 1);
        if (r->span) {
            PUT(l3, sizeof l3 - 1);
            PUT(tp, strlen(tp));
        }
#undef PUT
        if (header_put(h, name, block, n) == 0)
            return;
    }
    if (date)
        header_put(h, "Date", date, dl);
    if (ctype)
        evhttp_add_header(h, "Content-Type", ctype);
    evhttp_add_header(h, "X-Request-Id", r->request_id);
    evhttp_add_header(h, "Content-Language", lang);
    evhttp_add_header(h, "Vary", "Accept-Language");
    if (r->span)
        evhttp_add_header(h, "traceparent", tp);
}

/* release (may be NULL): data is referenced, not copied, and released
 * once written (or now, when it cannot be). */
static void req_send(struct eai_req *r, int status, const char *ctype, const void *data, size_t len,
                     const char *const *headers, evbuffer_ref_cleanup_cb release, void *rarg)
{
    if (r->replied) {
        eai_log_req(SRV_COMPONENT, EAI_LOG_ERROR, r->request_id, "second reply to one request ignored");
        if (release)
            release(data, len, rarg);
        return;
    }
    r->replied = 1;
    r->status = status;
    if (r->owner && r->owner->replied)
        r->owner->replied(r->owner_arg, r);
    if (!r->evreq) { /* freed with its connection */
        if (release)
            release(data, len, rarg);
        req_finish_metrics(r);
        req_free(r);
        return;
    }
    /* the body goes straight into the request's own output buffer */
    struct evbuffer *buf = evhttp_request_get_output_buffer(r->evreq);
    struct evkeyvalq *h = evhttp_request_get_output_headers(r->evreq);
    int has_length = 0;
    /* what evhttp_response_needs_body says: a body, so a Content-Type
     * (application/json unless named: evhttp's default before); HEAD gets
     * the GET's headers and no body */
    int head = strcmp(r->method, "HEAD") == 0;
    int statused = status >= 200 && status != 204 && status != 304;
    int bodied = statused && !head;
    if (h) {
        size_t dl = 0;
        const char *date = date_now(&dl);
        add_common_headers(r, h, ctype ? ctype : bodied ? "application/json" : NULL, date, dl);
        for (int i = 0; headers && headers[i]; i++) {
            const char *colon = strchr(headers[i], ':');
            if (!colon)
                continue;
            char name[128];
            size_t nl = (size_t)(colon - headers[i]);
            if (nl >= sizeof(name))
                continue;
            memcpy(name, headers[i], nl);
            name[nl] = '\0';
            const char *v = colon + 1;
            while (*v == ' ')
                v++;
            if (strcasecmp(name, "Content-Length") == 0)
                has_length = 1;
            evhttp_add_header(h, name, v);
        }
        if (status == 413 || (r->owner && r->owner->closing && r->owner->closing(r->owner_arg)))
            evhttp_add_header(h, "Connection", "close");
    }
    /* HEAD: nothing in the output buffer (evhttp sends whatever is there,
     * which a keep-alive client would take for the next response) */
    size_t body_len = data ? len : 0;
    if (head) {
        if (release)
            release(data, len, rarg);
    } else if (release) {
        if (!buf || !data || !len || evbuffer_add_reference(buf, data, len, release, rarg) < 0) {
            if (buf && data && len)
                evbuffer_add(buf, data, len);
            release(data, len, rarg);
        }
    } else if (buf && data && len) {
        evbuffer_add(buf, data, len);
    }
    /* Content-Length by hand (evhttp would printf it and check it as a
     * client's value): the body's, for HEAD the GET's; bodiless statuses
     * are left to evhttp */
    if (h && statused && (head || buf) && !has_length) { /* only headers[] may have set it: the list was ours */
        char cl[24], *e = cl + sizeof cl, *p = e;
        size_t v = head ? body_len : evbuffer_get_length(buf);
        do {
            *--p = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        header_put(h, "Content-Length", p, (size_t)(e - p));
    }
    req_finish_metrics(r);
    evhttp_send_reply(r->evreq, status, eai_http_reason(status), NULL);
    req_free(r);
}

void eai_reply_raw(struct eai_req *r, int status, const char *content_type, const void *data, size_t len)
{
    req_send(r, status, content_type, data, len, NULL, NULL, NULL);
}

void eai_reply_ref(struct eai_req *r, int status, const char *content_type, const void *data, size_t len,
                   void (*release)(const void *data, size_t len, void *arg), void *arg)
{
    req_send(r, status, content_type, data, len, NULL, release, arg);
}

void eai_reply_json_headers(struct eai_req *r, int status, json_t *body, const char *const *headers)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) {
        /* out of memory or no body: a minimal envelope by hand */
        static const char oom[] = "{\"error\":{\"code\":\"internal\",\"message\":\"Internal error\","
                                  "\"message_i18n\":{\"en\":\"Internal error\",\"fr\":\"Erreur interne\"},"
                                  "\"request_id\":\"\",\"details\":[]}}";
        req_send(r, 500, "application/json", oom, sizeof(oom) - 1, NULL, NULL, NULL);
        return;
    }
    size_t n = strlen(text);
    text[n] = '\0';
    char *withnl = realloc(text, n + 2);
    if (withnl) {
        text = withnl;
        text[n++] = '\n';
        text[n] = '\0';
    }
    req_send(r, status, "application/json", text, n, headers, NULL, NULL);
    free(text);
}

void eai_reply_json(struct eai_req *r, int status, json_t *body)
{
    eai_reply_json_headers(r, status, body, NULL);
}

void eai_reply_error(struct eai_req *r, enum eai_code code, json_t *details)
{
    json_t *env = eai_http_error_envelope(code, r->lang, r->request_id, details);
    const char *retry[] = {"Retry-After: 1", NULL};
    const char *bearer[] = {"WWW-Authenticate: Bearer", NULL}; /* RFC 6750 section 3 */
    const struct eai_code_info *ci = eai_code_info(code);
    eai_reply_json_headers(r, ci->http_status, env,
                           code == EAI_E_UNAUTHENTICATED ? bearer :
                           (code == EAI_E_RATE_LIMITED || code == EAI_E_SANDBOX_UNAVAILABLE ||
                            code == EAI_E_STORAGE_UNAVAILABLE || code == EAI_E_SHUTTING_DOWN) ? retry : NULL);
}

void eai_reply_not_found(struct eai_req *r, enum eai_missing what)
{
    static const char *const en[] = {
        "Execution not found", "File not found: this execution has no such collected file",
        "Manifest not found", "No such route: docs/api.md lists the routes", "Contract not found",
        "No in-process ledger: usage events go to the FinOps service configured by finops.url (EAI_FINOPS_URL)",
        "Session not found", "File not found in the session's /tmp",
        "Run not found: this tenant has no execution or session with this run_id",
        "Agent not found: this tenant has no execution with this agent_id",
        "Snapshot not found",
        "Volume not found", "File not found in the volume",
    };
    static const char *const fr[] = {
        "Exécution introuvable", "Fichier introuvable : cette exécution n'a pas recueilli ce fichier",
        "Manifeste introuvable", "Route inconnue : docs/api.md donne la liste des routes", "Contrat introuvable",
        "Pas de registre interne : les événements d'usage vont au service FinOps configuré par finops.url (EAI_FINOPS_URL)",
        "Session introuvable", "Fichier introuvable dans le /tmp de la session",
        "Run introuvable : ce tenant n'a ni exécution ni session portant ce run_id",
        "Agent introuvable : ce tenant n'a aucune exécution portant cet agent_id",
        "Instantané introuvable",
        "Volume introuvable", "Fichier introuvable dans le volume",
    };
    size_t k = (size_t)what < sizeof en / sizeof en[0] ? (size_t)what : 0;
    json_t *env = eai_http_error_envelope(EAI_E_NOT_FOUND, r->lang, r->request_id, NULL);
    json_t *e = json_object_get(env, "error");
    json_object_set_new(e, "message", json_string(r->lang && strcmp(r->lang, "fr") == 0 ? fr[k] : en[k]));
    json_object_set_new(e, "message_i18n", json_pack("{s:s, s:s}", "en", en[k], "fr", fr[k]));
    eai_reply_json_headers(r, 404, env, NULL);
}

/* --- SSE */

void eai_stream_start(struct eai_req *r, const char *content_type)
{
    if (r->replied || r->streaming || !r->evreq)
        return;
    r->streaming = 1;
    r->status = 200;
    struct evkeyvalq *h = evhttp_request_get_output_headers(r->evreq);
    evhttp_add_header(h, "Content-Type", content_type ? content_type : "text/event-stream");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    /* the connection ends with the stream: the timeouts changed below are
     * never those of a next request */
    evhttp_add_header(h, "Connection", "close");
    add_common_headers(r, h, NULL, NULL, 0); /* evhttp adds Date */
    evhttp_send_reply_start(r->evreq, 200, "OK");
    /* evhttp keeps reading for close detection with request_timeout_s as
     * the read timeout, which would cut a live stream whose client (rightly)
     * sends nothing: no read timeout; a client that stops reading is still
     * dropped once a write has waited EAI_STREAM_WRITE_TIMEOUT_S. */
    struct evhttp_connection *evcon = evhttp_request_get_connection(r->evreq);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    if (bev) {
        struct timeval wt = {EAI_STREAM_WRITE_TIMEOUT_S, 0};
        bufferevent_set_timeouts(bev, NULL, &wt);
    }
}

void eai_stream_send(struct eai_req *r, const char *data, size_t len)
{
    if (!r->streaming || r->replied || r->gone || !r->evreq || !len)
        return;
    struct evbuffer *b = evbuffer_new();
    if (!b)
        return;
    evbuffer_add(b, data, len);
    evhttp_send_reply_chunk(r->evreq, b);
    evbuffer_free(b);
}

size_t eai_stream_pending(const struct eai_req *r)
{
    struct evhttp_connection *c = r && r->evreq && !r->gone ? evhttp_request_get_connection(r->evreq) : NULL;
    struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
    return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

void eai_stream_end(struct eai_req *r)
{
    if (r->replied)
        return;
    if (!r->streaming) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    r->replied = 1;
    if (r->owner && r->owner->replied)
        r->owner->replied(r->owner_arg, r);
    req_finish_metrics(r);
    if (r->evreq)
        evhttp_send_reply_end(r->evreq);
    req_free(r);
}

/* --- accessors */

const char *eai_req_method(const struct eai_req *r) { return r->method; }
const char *eai_req_path(const struct eai_req *r) { return r->path; }
const char *eai_req_id(const struct eai_req *r) { return r->request_id; }
const char *eai_req_lang(const struct eai_req *r) { return r->lang; }
const char *eai_req_tenant(const struct eai_req *r) { return r->tenant[0] ? r->tenant : NULL; }
const char *eai_req_key_id(const struct eai_req *r) { return r->key_id[0] ? r->key_id : NULL; }
const struct eai_trace_ctx *eai_req_trace(const struct eai_req *r) { return &r->trace; }
struct eai_span *eai_req_span(const struct eai_req *r) { return r->span; }
int eai_req_gone(const struct eai_req *r) { return r->gone; }

void eai_req_on_gone(struct eai_req *r, void (*fn)(void *), void *arg)
{
    r->on_gone = fn;
    r->on_gone_arg = arg;
}

const char *eai_req_param(const struct eai_req *r, const char *name)
{
    for (int i = 0; i < r->params.n; i++)
        if (strcmp(r->params.name[i], name) == 0)
            return r->params.value[i];
    return NULL;
}

const char *eai_req_query(const struct eai_req *r, const char *name)
{
    if (!r->query_ok)
        return NULL;
    return evhttp_find_header((struct evkeyvalq *)&r->query, name);
}

const char *eai_req_header(const struct eai_req *r, const char *name)
{
    if (!r->evreq)
        return NULL;
    return evhttp_find_header(evhttp_request_get_input_headers(r->evreq), name);
}

const char *eai_req_body(const struct eai_req *r, size_t *len)
{
    if (len)
        *len = r->body_len;
    return r->body ? r->body : "";
}

/* --- body as JSON / YAML */

static int media_is(const char *ct, const char *type)
{
    size_t n = strlen(type);
    return strncasecmp(ct, type, n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

json_t *eai_req_body_json(struct eai_req *r, int yaml_ok)
{
    const char *ct = eai_req_header(r, "Content-Type");
    int yaml = 0;
    if (ct && *ct) {
        while (*ct == ' ')
            ct++;
        const char *semi = strchr(ct, ';');
        size_t tl = semi ? (size_t)(semi - ct) : strlen(ct);
        int plus_json = tl > 5 && strncasecmp(ct + tl - 5, "+json", 5) == 0;
        if (media_is(ct, "application/yaml") || media_is(ct, "application/x-yaml") ||
            media_is(ct, "text/yaml") || media_is(ct, "text/x-yaml")) {
            if (!yaml_ok) {
                eai_reply_error(r, EAI_E_UNSUPPORTED_MEDIA_TYPE,
                                json_pack("[{s:s, s:s}]", "path", "", "message", "this route takes application/json"));
                return NULL;
            }
            yaml = 1;
        } else if (!(media_is(ct, "application/json") || plus_json || media_is(ct, "text/json") ||
                     media_is(ct, "text/plain") || media_is(ct, "application/x-www-form-urlencoded") ||
                     media_is(ct, "*/*"))) {
            eai_reply_error(r, EAI_E_UNSUPPORTED_MEDIA_TYPE,
                            json_pack("[{s:s, s:s}]", "path", "", "message",
                                      yaml_ok ? "send application/json or application/yaml"
                                              : "send application/json"));
            return NULL;
        }
    }
    if (yaml) {
        struct eai_error *e = NULL;
        json_t *v = eai_yaml_to_json(r->body ? r->body : "", r->body_len, &e);
        if (!v) {
            json_t *details = e && e->details ? json_incref(e->details) : NULL;
            eai_error_free(e);
            eai_reply_error(r, EAI_E_INVALID_JSON, details);
        }
        return v;
    }
    json_error_t je;
    json_t *v = r->body_len ? json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &je) : NULL;
    if (!v) {
        char msg[300];
        if (r->body_len)
            snprintf(msg, sizeof(msg), "line %d, column %d: %s", je.line, je.column, je.text);
        else
            snprintf(msg, sizeof(msg), "the body is empty");
        eai_reply_error(r, EAI_E_INVALID_JSON, json_pack("[{s:s, s:s}]", "path", "", "message", msg));
    }
    return v;
}

int eai_req_apply_token_ids(struct eai_req *r, json_t *body, const char **field)
{
    const char *keys[] = {"project_id", "agent_id"};
    const char *vals[] = {r->jwt_project, r->jwt_agent};
    if (!json_is_object(body))
        return 0;
    for (int i = 0; i < 2; i++) {
        if (!vals[i][0])
            continue;
        const json_t *v = json_object_get(body, keys[i]);
        if (!v || json_is_null(v)) {
            json_object_set_new(body, keys[i], json_string(vals[i]));
        } else if (!json_is_string(v) || strcmp(json_string_value(v), vals[i]) != 0) {
            *field = keys[i];
            return -1;
        }
    }
    return 0;
}

void eai_req_token_ids_refusal(struct eai_req *r, const char *field)
{
    char path[32];
    snprintf(path, sizeof path, "/%s", field);
    eai_reply_error(r, EAI_E_FORBIDDEN, json_pack("[{s:s, s:s}]", "path", path, "message",
                                                  "differs from the claim of the gateway token"));
}
