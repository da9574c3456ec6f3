/* Test harness for the egress engine (core/net/egress.c): runs the real DNS
 * responder and gateway on a libevent loop, with the grants given on the
 * command line, until SIGTERM; then prints each grant's log.  Driven by
 * tests/net/test_egress.py, which builds the network namespaces around it.
 *
 *   egress_harness --resolver IP:PORT --synthetic CIDR --netns PREFIX --pool CIDR
 *                  [--no-splice] [--max-bytes N] [--first-flight-ms N] [--max-connections N]
 *                  [--max-connections-tenant N] [--max-connections-node N]
 *                  [--tenant T] --grant EXEC_ID ENTRY[,ENTRY...] ...   (--tenant: of the grants after it)
 *
 * With --netns it does what eaid does for each execution (core/net/netns.c):
 * sweeps the prefix's leftovers, installs the nftables table, makes one
 * network namespace per grant from the pool, and removes all of it at the
 * end.  stdout: "dns_port=N gateway_port=M", one line per grant
 * "grant EXEC_ID NETNS_PATH SANDBOX_IP HOST_IP", "ready"; then at SIGTERM one
 * JSON line per grant {"exec_id":..., "log":{...}}.  stderr: every decision
 * as a JSON line as the hook sees it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "base/errors.h"
#include "net/egress.h"
#include "net/netns.h"

#define MAX_GRANTS 8
#define MAX_ENTRIES 32

static void on_decision(void *arg, const char *exec_id, const json_t *entry)
{
    (void)arg;
    char *s = json_dumps(entry, JSON_COMPACT);
    fprintf(stderr, "decision %s %s\n", exec_id, s ? s : "?");
    free(s);
}

static void on_term(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    event_base_loopbreak(arg);
}

int main(int argc, char **argv)
{
    struct eai_egress_config cfg = {
        .listen_addr = "0.0.0.0", .synthetic_cidr = "198.51.100.0/24", .max_connections = 16,
        .max_connections_total = 200, .max_bytes = 512ll << 20, .idle_timeout_s = 20, .sniff_ms = 300,
        .first_flight_ms = 10000, .connect_timeout_s = 5, .log_max = 256,
    };
    struct { const char *id, *tenant; const char *entries[MAX_ENTRIES]; size_t n; struct eai_netns ns; } grants[MAX_GRANTS];
    const char *tenant = NULL; /* --tenant T: the tenant of the grants after it */
    size_t ngrants = 0;
    const char *prefix = NULL, *pool = "198.19.0.0/24";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--resolver") && i + 1 < argc) {
            cfg.resolver = argv[++i];
        } else if (!strcmp(argv[i], "--synthetic") && i + 1 < argc) {
            cfg.synthetic_cidr = argv[++i];
        } else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc) {
            cfg.max_bytes = atoll(argv[++i]);
        } else if (!strcmp(argv[i], "--first-flight-ms") && i + 1 < argc) {
            cfg.first_flight_ms = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--max-connections") && i + 1 < argc) {
            cfg.max_connections = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--max-connections-tenant") && i + 1 < argc) {
            cfg.max_connections_tenant = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--max-connections-node") && i + 1 < argc) {
            cfg.max_connections_node = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--tenant") && i + 1 < argc) {
            tenant = argv[++i];
        } else if (!strcmp(argv[i], "--no-splice")) {
            cfg.no_splice = 1; /* bufferevent copies instead of splice(2) */
        } else if (!strcmp(argv[i], "--netns") && i + 1 < argc) {
            prefix = argv[++i];
        } else if (!strcmp(argv[i], "--pool") && i + 1 < argc) {
            pool = argv[++i];
        } else if (!strcmp(argv[i], "--grant") && i + 2 < argc && ngrants < MAX_GRANTS) {
            grants[ngrants].id = argv[++i];
            grants[ngrants].tenant = tenant;
            grants[ngrants].n = 0;
            for (char *tok = strtok(argv[++i], ","); tok && grants[ngrants].n < MAX_ENTRIES; tok = strtok(NULL, ","))
                grants[ngrants].entries[grants[ngrants].n++] = tok;
            ngrants++;
        } else {
            fprintf(stderr, "usage: %s --resolver IP:PORT --synthetic CIDR --netns PREFIX --pool CIDR "
                            "--grant ID ENTRIES ...\n", argv[0]);
            return 2;
        }
    }
    if (!prefix) {
        fprintf(stderr, "egress_harness: --netns PREFIX is required\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    eai_netns_sweep(prefix);
    struct event_base *base = event_base_new();
    struct eai_error *err = NULL;
    struct eai_egress *eg = eai_egress_new(base, &cfg, on_decision, NULL, &err);
    if (!eg) {
        fprintf(stderr, "egress_harness: %s\n", err ? err->message : "?");
        return 1;
    }
    int rc = 0;
    struct eai_egress_grant *g[MAX_GRANTS];
    size_t made = 0;
    if (eai_nft_install(prefix, eai_egress_dns_port(eg), eai_egress_gateway_port(eg), &err) < 0)
        goto fail;
    printf("dns_port=%u gateway_port=%u\n", eai_egress_dns_port(eg), eai_egress_gateway_port(eg));
    for (; made < ngrants; made++) {
        char host_ip[16], sandbox_ip[16], tag[9];
        snprintf(tag, sizeof(tag), "%08zx", made + 1);
        if (eai_netns_slot_addrs(pool, (uint32_t)made, host_ip, sandbox_ip) < 0) {
            eai_error_set(&err, EAI_E_INTERNAL, "pool %s has no slot %zu", pool, made);
            goto fail;
        }
        if (eai_netns_create(prefix, tag, host_ip, sandbox_ip, &grants[made].ns, &err) < 0)
            goto fail;
        g[made] = eai_egress_grant_add(eg, grants[made].id, grants[made].tenant, sandbox_ip, grants[made].entries,
                                       grants[made].n, &err);
        if (!g[made]) {
            eai_netns_destroy(&grants[made].ns);
            goto fail;
        }
        printf("grant %s %s %s %s\n", grants[made].id, grants[made].ns.path, sandbox_ip, host_ip);
    }
    printf("ready\n");
    fflush(stdout);
    struct event *term = evsignal_new(base, SIGTERM, on_term, base);
    evsignal_add(term, NULL);
    event_base_dispatch(base);
    event_free(term);
    for (size_t i = 0; i < made; i++) {
        json_t *log = eai_egress_grant_log(g[i]);
        json_t *line = json_pack("{s:s, s:o}", "exec_id", grants[i].id, "log", log);
        char *s = json_dumps(line, JSON_COMPACT);
        printf("%s\n", s ? s : "{}");
        free(s);
        json_decref(line);
        eai_egress_grant_remove(g[i]);
    }
out:
    for (size_t i = 0; i < made; i++)
        eai_netns_destroy(&grants[i].ns);
    eai_nft_remove(prefix);
    eai_egress_free(eg);
    event_base_free(base);
    return rc;
fail:
    fprintf(stderr, "egress_harness: %s\n", err ? err->message : "?");
    eai_error_free(err);
    for (size_t i = 0; i < made; i++)
        eai_egress_grant_remove(g[i]);
    rc = 1;
    goto out;
}
