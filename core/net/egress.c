/* Egress engine (egress.h): grants and their network logs, the DNS and
 * gateway sockets, start and stop.  The DNS responder is egress_dns.c, the
 * gateway's connections egress_gw.c (egress_int.h: what they share). */
#include <arpa/inet.h>
#include <string.h>
#include <unistd.h>

#include "base/errors.h"
#include "base/util.h"
#include "net/egress_int.h"

/* ---------------------------------------------------------------- log */

json_t *eg_log_entry(struct eai_egress_grant *g, const char *kind, const char *name, unsigned port,
                     const char *decision, const char *reason)
{
    char when[32];
    eai_time_rfc3339(eai_now_ms(), when);
    json_t *e = json_pack("{s:s, s:s, s:s, s:s}", "time", when, "kind", kind, "decision", decision,
                          "name", name ? name : "");
    if (!e)
        return NULL;
    if (port)
        json_object_set_new(e, "port", json_integer(port));
    if (reason)
        json_object_set_new(e, "reason", json_string(reason));
    return e;
}

/* Keep e in the grant's bounded log and tell the hook.  e stays the
 * caller's reference. */
void eg_log_commit(struct eai_egress_grant *g, json_t *e)
{
    if (!e)
        return;
    if (json_array_size(g->log) < g->eg->cfg.log_max)
        json_array_append(g->log, e);
    else
        g->dropped++;
    if (g->eg->on_decision)
        g->eg->on_decision(g->eg->arg, g->exec_id, e);
}

struct eai_egress_grant *eg_grant_by_ip(struct eai_egress *eg, uint32_t ip)
{
    for (struct eai_egress_grant *g = eg->grants; g; g = g->next)
        if (g->ip == ip)
            return g;
    return NULL;
}

/* ---------------------------------------------------------------- grants */

struct eai_egress_grant *eai_egress_grant_add(struct eai_egress *eg, const char *exec_id, const char *tenant,
                                              const char *sandbox_ip, const char *const *entries, size_t n,
                                              struct eai_error **err)
{
    struct in_addr a;
    if (!sandbox_ip || inet_pton(AF_INET, sandbox_ip, &a) != 1) {
        eai_error_set(err, EAI_E_INTERNAL, "egress: sandbox address '%s' is not IPv4", sandbox_ip ? sandbox_ip : "");
        return NULL;
    }
    if (eg_grant_by_ip(eg, a.s_addr)) {
        eai_error_set(err, EAI_E_INTERNAL, "egress: %s already has a grant", sandbox_ip);
        return NULL;
    }
    struct eai_egress_grant *g = calloc(1, sizeof(*g));
    if (!g || !(g->rules = calloc(n ? n : 1, sizeof(*g->rules))) || !(g->log = json_array())) {
        if (g) {
            free(g->rules);
            free(g);
        }
        eai_error_set(err, EAI_E_INTERNAL, "egress: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (eai_egress_rule_parse(entries[i], &g->rules[i]) < 0) {
            eai_error_set(err, EAI_E_VALIDATION_FAILED, "egress: entry %zu '%.80s' is not host:port", i, entries[i]);
            json_decref(g->log);
            free(g->rules);
            free(g);
            return NULL;
        }
    }
    g->nrules = n;
    g->eg = eg;
    g->ip = a.s_addr;
    snprintf(g->exec_id, sizeof(g->exec_id), "%s", exec_id ? exec_id : "");
    snprintf(g->tenant, sizeof(g->tenant), "%s", tenant ? tenant : "");
    g->next = eg->grants;
    if (eg->grants)
        eg->grants->prev = g;
    eg->grants = g;
    return g;
}

int eai_egress_grant_set_rules(struct eai_egress_grant *g, const char *const *entries, size_t n,
                               struct eai_error **err)
{
    struct eai_egress_rule *rules = calloc(n ? n : 1, sizeof(*rules));
    if (!rules)
        return eai_error_set(err, EAI_E_INTERNAL, "egress: out of memory");
    for (size_t i = 0; i < n; i++) {
        if (eai_egress_rule_parse(entries[i], &rules[i]) < 0) {
            free(rules);
            return eai_error_set(err, EAI_E_VALIDATION_FAILED, "egress: entry %zu '%.80s' is not host:port", i,
                                 entries[i]);
        }
    }
    /* decisions read the rules by index on the loop, never keep a pointer:
     * the next DNS query and connection see the new list */
    free(g->rules);
    g->rules = rules;
    g->nrules = n;
    return 0;
}

json_t *eai_egress_grant_log(const struct eai_egress_grant *g)
{
    return json_pack("{s:O, s:I, s:i, s:I, s:I}", "entries", g->log, "dropped", (json_int_t)g->dropped,
                     "connections", g->total, "bytes_out", (json_int_t)g->bytes_out, "bytes_in",
                     (json_int_t)g->bytes_in);
}

void eai_egress_grant_remove(struct eai_egress_grant *g)
{
    if (!g)
        return;
    while (g->conns)
        eg_conn_free(g->conns, "ended", RST_CLIENT);
    struct eai_egress *eg = g->eg;
    if (g->prev)
        g->prev->next = g->next;
    else
        eg->grants = g->next;
    if (g->next)
        g->next->prev = g->prev;
    json_decref(g->log);
    free(g->synth);
    free(g->rules);
    free(g);
}

/* ---------------------------------------------------------------- engine */

static int bind_port(int type, uint32_t addr, uint16_t port, uint16_t *bound, evutil_socket_t *out)
{
    evutil_socket_t fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = addr;
    sin.sin_port = htons(port);
    socklen_t sl = sizeof(sin);
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || getsockname(fd, (struct sockaddr *)&sin, &sl) < 0 ||
        (type == SOCK_STREAM && listen(fd, 128) < 0)) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    *bound = ntohs(sin.sin_port);
    *out = fd;
    return 0;
}

struct eai_egress *eai_egress_new(struct event_base *base, const struct eai_egress_config *cfg,
                                  eai_egress_decision_fn on_decision, void *arg, struct eai_error **err)
{
    struct eai_egress_rule synth;
    char cidr[64];
    snprintf(cidr, sizeof(cidr), "%s:1", cfg->synthetic_cidr ? cfg->synthetic_cidr : "");
    if (eai_egress_rule_parse(cidr, &synth) < 0 || synth.kind != EAI_EGRESS_CIDR || synth.ip.family != 4 ||
        synth.prefix > 30) {
        eai_error_set(err, EAI_E_INTERNAL, "egress: synthetic range '%s' is not an IPv4 CIDR of /30 or wider",
                      cfg->synthetic_cidr ? cfg->synthetic_cidr : "");
        return NULL;
    }
    struct in_addr listen_a;
    if (inet_pton(AF_INET, cfg->listen_addr ? cfg->listen_addr : "0.0.0.0", &listen_a) != 1) {
        eai_error_set(err, EAI_E_INTERNAL, "egress: listen address '%s' is not IPv4", cfg->listen_addr);
        return NULL;
    }
    struct eai_egress *eg = calloc(1, sizeof(*eg));
    if (!eg) {
        eai_error_set(err, EAI_E_INTERNAL, "egress: out of memory");
        return NULL;
    }
    eg->base = base;
    eg->cfg = *cfg;
    if (!eg->cfg.log_max)
        eg->cfg.log_max = 256;
    eg->dns_fd = -1;
    eg->on_decision = on_decision;
    eg->arg = arg;
    uint32_t net;
    memcpy(&net, synth.ip.b, 4);
    eg->synth_net = ntohl(net);
    eg->synth_prefix = synth.prefix;
    evutil_socket_t gw_fd = -1;
    if (bind_port(SOCK_DGRAM, listen_a.s_addr, cfg->dns_port, &eg->dns_port, &eg->dns_fd) < 0 ||
        bind_port(SOCK_STREAM, listen_a.s_addr, cfg->gateway_port, &eg->gw_port, &gw_fd) < 0) {
        eai_error_set(err, EAI_E_INTERNAL, "egress: bind %s: %s", cfg->listen_addr, strerror(errno));
        goto fail;
    }
    eg->dns = evdns_add_server_port_with_base(base, eg->dns_fd, 0, eg_dns_cb, eg);
    if (eg->dns)
        eg->dns_fd = -1; /* the port owns it now (evdns_close_server_port closes it) */
    eg->listener = evconnlistener_new(base, eg_gw_accept, eg, LEV_OPT_CLOSE_ON_FREE, -1, gw_fd);
    if (!eg->listener)
        close(gw_fd);
    else
        evconnlistener_set_error_cb(eg->listener, eg_gw_accept_error);
    eg->accept_pause = evtimer_new(base, eg_accept_resume, eg);
    int flags = EVDNS_BASE_DISABLE_WHEN_INACTIVE;
    int have_resolver = cfg->resolver && *cfg->resolver;
    if (!have_resolver)
        flags |= EVDNS_BASE_INITIALIZE_NAMESERVERS; /* reads /etc/resolv.conf once, at start */
    eg->resolver = evdns_base_new(base, flags);
    if (!eg->dns || !eg->listener || !eg->resolver || !eg->accept_pause) {
        eai_error_set(err, EAI_E_INTERNAL, "egress: DNS port, gateway listener or resolver could not be set up");
        goto fail;
    }
    if (have_resolver && evdns_base_nameserver_ip_add(eg->resolver, cfg->resolver) != 0) {
        eai_error_set(err, EAI_E_INTERNAL, "egress: resolver '%s' is not ip[:port]", cfg->resolver);
        goto fail;
    }
    evdns_base_set_option(eg->resolver, "timeout:", "3");
    evdns_base_set_option(eg->resolver, "attempts:", "2");
    /* Names are asked as given: never with the host's search domains
     * (resolv.conf's search/domain), which would let "db" reach
     * db.corp.example of the host's network. */
    evdns_base_search_clear(eg->resolver);
    evdns_base_set_option(eg->resolver, "ndots:", "0");
    return eg;
fail:
    eai_egress_free(eg);
    return NULL;
}

void eai_egress_free(struct eai_egress *eg)
{
    if (!eg)
        return;
    while (eg->grants)
        eai_egress_grant_remove(eg->grants);
    if (eg->listener)
        evconnlistener_free(eg->listener);
    if (eg->accept_pause)
        event_free(eg->accept_pause);
    if (eg->dns)
        evdns_close_server_port(eg->dns);
    if (eg->dns_fd >= 0)
        close(eg->dns_fd);
    if (eg->resolver)
        evdns_base_free(eg->resolver, 1);
    free(eg);
}

uint16_t eai_egress_dns_port(const struct eai_egress *eg)
{
    return eg->dns_port;
}

uint16_t eai_egress_gateway_port(const struct eai_egress *eg)
{
    return eg->gw_port;
}

int eai_egress_open_connections(const struct eai_egress *eg)
{
    return eg ? eg->open : 0;
}

uint64_t eai_egress_accept_errors(const struct eai_egress *eg)
{
    return eg ? eg->accept_errors : 0;
}
