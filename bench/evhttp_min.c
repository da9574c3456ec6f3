/* The baseline of bench/perf.sh: a minimal libevent evhttp server that
 * answers every request with one fixed 1 KB JSON body (what libevent itself
 * can do on this machine).  Built by the bench:
 *   cc -O2 -o evhttp_min bench/evhttp_min.c -levent
 *   ./evhttp_min PORT */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

static char body[1025];

static void cb(struct evhttp_request *req, void *arg)
{
    (void)arg;
    struct evbuffer *b = evbuffer_new();
    evbuffer_add_reference(b, body, 1024, NULL, NULL);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: evhttp_min PORT\n");
        return 2;
    }
    /* {"id":"...","pad":"xxxx..."} padded to exactly 1024 bytes */
    int n = snprintf(body, sizeof body, "{\"id\":\"exec_0123456789abcdef\",\"status\":\"succeeded\",\"pad\":\"");
    while (n < 1022)
        body[n++] = 'x';
    body[n++] = '"';
    body[n++] = '}';
    body[n] = '\0';
    signal(SIGPIPE, SIG_IGN);
    struct event_base *base = event_base_new();
    struct evhttp *h = evhttp_new(base);
    if (!base || !h || evhttp_bind_socket(h, "127.0.0.1", (unsigned short)atoi(argv[1])) < 0) {
        fprintf(stderr, "evhttp_min: cannot listen on 127.0.0.1:%s\n", argv[1]);
        return 1;
    }
    evhttp_set_gencb(h, cb, NULL);
    event_base_dispatch(base);
    return 0;
}
