/* Egress DNS responder (egress_int.h): a grant's allowed names get
 * synthetic addresses the gateway maps back; anything else is refused. */
#include <arpa/inet.h>
#include <string.h>

#include "net/egress_int.h"

/* ---------------------------------------------------------------- DNS */

static uint32_t synth_addr(const struct eai_egress *eg, size_t idx)
{
    return htonl(eg->synth_net + 1 + (uint32_t)idx);
}

static size_t synth_cap(const struct eai_egress *eg)
{
    uint64_t size = 1ull << (32 - eg->synth_prefix);
    return size > SYNTH_MAX + 2 ? SYNTH_MAX : (size_t)(size - 2);
}

/* The synthetic address of name in g (added when new); 0 when full. */
static uint32_t synth_for(struct eai_egress_grant *g, const char *name)
{
    for (size_t i = 0; i < g->nsynth; i++)
        if (strcmp(g->synth[i].name, name) == 0)
            return synth_addr(g->eg, i);
    if (g->nsynth >= synth_cap(g->eg))
        return 0;
    struct synth *s = realloc(g->synth, (g->nsynth + 1) * sizeof(*s));
    if (!s)
        return 0;
    g->synth = s;
    snprintf(s[g->nsynth].name, sizeof(s[g->nsynth].name), "%s", name);
    return synth_addr(g->eg, g->nsynth++);
}

static const char *qtype_name(int t)
{
    switch (t) {
    case EVDNS_TYPE_A: return "A";
    case EVDNS_TYPE_AAAA: return "AAAA";
    case EVDNS_TYPE_CNAME: return "CNAME";
    case EVDNS_TYPE_MX: return "MX";
    case EVDNS_TYPE_TXT: return "TXT";
    case EVDNS_TYPE_PTR: return "PTR";
    case EVDNS_TYPE_NS: return "NS";
    default: return "other";
    }
}

void eg_dns_cb(struct evdns_server_request *req, void *arg)
{
    struct eai_egress *eg = arg;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (evdns_server_request_get_requesting_addr(req, (struct sockaddr *)&ss, sizeof(ss)) < 0 ||
        ss.ss_family != AF_INET) {
        evdns_server_request_respond(req, DNS_ERR_REFUSED);
        return;
    }
    struct eai_egress_grant *g = eg_grant_by_ip(eg, ((struct sockaddr_in *)&ss)->sin_addr.s_addr);
    if (!g) {
        evdns_server_request_respond(req, DNS_ERR_REFUSED); /* not a sandbox of ours */
        return;
    }
    if (req->nquestions != 1 || req->questions[0]->dns_question_class != EVDNS_CLASS_INET) {
        json_t *e = eg_log_entry(g, "dns", "", 0, "refused", "bad_query");
        eg_log_commit(g, e);
        json_decref(e);
        evdns_server_request_respond(req, DNS_ERR_REFUSED);
        return;
    }
    const struct evdns_server_question *q = req->questions[0];
    char name[EAI_EGRESS_NAME_MAX + 1];
    const char *reason = NULL;
    if (eai_egress_name_normalize(q->name, strlen(q->name), name, sizeof(name)) < 0) {
        name[0] = '\0';
        reason = "bad_name";
    } else if (eai_egress_name_match(g->rules, g->nrules, name, 0) < 0) {
        reason = "not_allowed";
    }
    json_t *e = eg_log_entry(g, "dns", name, 0, reason ? "refused" : "allowed", reason);
    if (e)
        json_object_set_new(e, "qtype", json_string(qtype_name(q->type)));
    int rcode = DNS_ERR_NONE;
    if (reason) {
        rcode = DNS_ERR_NOTEXIST; /* NXDOMAIN, never asked upstream */
    } else if (q->type == EVDNS_TYPE_A) {
        uint32_t a = synth_for(g, name);
        if (!a) {
            rcode = DNS_ERR_SERVERFAILED;
            json_object_set_new(e, "decision", json_string("refused"));
            json_object_set_new(e, "reason", json_string("name_cap"));
        } else {
            char txt[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &a, txt, sizeof(txt));
            json_object_set_new(e, "address", json_string(txt));
            evdns_server_request_add_a_reply(req, q->name, 1, &a, 5);
        }
    }
    /* AAAA and the rest of an allowed name: NOERROR without records, so a
     * client falls back to the A answer. */
    eg_log_commit(g, e);
    json_decref(e);
    evdns_server_request_respond(req, rcode);
}
