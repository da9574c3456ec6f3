/* Test harness for the egress engine (core/net/egress.c): runs the real DNS
 * responder and gateway on a libevent loop, with the grants given on the
 * command line, until SIGTERM; then prints each grant's log.  Driven by
 * tests/net/test_egress.py, which builds the network namespaces around it.
 *
 *   egress_harness --resolver IP:PORT --synthetic CIDR
 *                  --grant EXEC_ID SANDBOX_IP ENTRY[,ENTRY...] ...
 *
 * stdout: first line "dns_port=N gateway_port=M", then at SIGTERM one JSON
 * line per grant {"exec_id":..., "log":{...}}.  stderr: every decision as a
 * JSON line as the hook sees it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "base/errors.h"
#include "net/egress.h"

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
        .connect_timeout_s = 5, .log_max = 256,
    };
    struct { const char *id, *ip; const char *entries[MAX_ENTRIES]; size_t n; } grants[MAX_GRANTS];
    size_t ngrants = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--resolver") && i + 1 < argc) {
            cfg.resolver = argv[++i];
        } else if (!strcmp(argv[i], "--synthetic") && i + 1 < argc) {
            cfg.synthetic_cidr = argv[++i];
        } else if (!strcmp(argv[i], "--max-connections") && i + 1 < argc) {
            cfg.max_connections = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--grant") && i + 3 < argc && ngrants < MAX_GRANTS) {
            grants[ngrants].id = argv[++i];
            grants[ngrants].ip = argv[++i];
            grants[ngrants].n = 0;
            for (char *tok = strtok(argv[++i], ","); tok && grants[ngrants].n < MAX_ENTRIES; tok = strtok(NULL, ","))
                grants[ngrants].entries[grants[ngrants].n++] = tok;
            ngrants++;
        } else {
            fprintf(stderr, "usage: %s --resolver IP:PORT --synthetic CIDR --grant ID IP ENTRIES ...\n", argv[0]);
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    struct event_base *base = event_base_new();
    struct eai_error *err = NULL;
    struct eai_egress *eg = eai_egress_new(base, &cfg, on_decision, NULL, &err);
    if (!eg) {
        fprintf(stderr, "egress_harness: %s\n", err ? err->message : "?");
        return 1;
    }
    struct eai_egress_grant *g[MAX_GRANTS];
    for (size_t i = 0; i < ngrants; i++) {
        g[i] = eai_egress_grant_add(eg, grants[i].id, grants[i].ip, grants[i].entries, grants[i].n, &err);
        if (!g[i]) {
            fprintf(stderr, "egress_harness: %s\n", err ? err->message : "?");
            return 1;
        }
    }
    printf("dns_port=%u gateway_port=%u\n", eai_egress_dns_port(eg), eai_egress_gateway_port(eg));
    fflush(stdout);
    struct event *term = evsignal_new(base, SIGTERM, on_term, base);
    evsignal_add(term, NULL);
    event_base_dispatch(base);
    for (size_t i = 0; i < ngrants; i++) {
        json_t *log = eai_egress_grant_log(g[i]);
        json_t *line = json_pack("{s:s, s:o}", "exec_id", grants[i].id, "log", log);
        char *s = json_dumps(line, JSON_COMPACT);
        printf("%s\n", s ? s : "{}");
        free(s);
        json_decref(line);
        eai_egress_grant_remove(g[i]);
    }
    event_free(term);
    eai_egress_free(eg);
    event_base_free(base);
    return 0;
}
