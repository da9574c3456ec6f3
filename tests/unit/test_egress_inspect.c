/* Egress inspection (core/net/egress_inspect.c): what the gateway reads of a
 * connection for its whole life.  HTTP heads one after another (keep-alive,
 * pipelining, bodies framed by Content-Length and chunked), the splitting
 * tricks of issue 36, TLS over real OpenSSL handshakes run in memory through
 * the inspector (TLS 1.3, TLS 1.2, a HelloRetryRequest) and the ClientHellos
 * an attacker sends where a server would read them, other ports. */
#include <string.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "unit_main.h"
#include "net/egress_inspect.h"

/* the refusal's reason is r (a failed assertion, never a crash, when none) */
#define REASON(in, r) ((in).reason && strcmp((in).reason, r) == 0)

#define C EAI_INSPECT_CLIENT
#define S EAI_INSPECT_SERVER

static long step_str(struct eai_inspect *in, const char *s)
{
    return eai_inspect_step(in, C, (const uint8_t *)s, strlen(s));
}

/* Feed a stream as a gateway does: judge, pass, judge the rest.  The bytes
 * passed, or -1 at a refusal. */
static long feed(struct eai_inspect *in, enum eai_inspect_side side, const uint8_t *p, size_t n)
{
    size_t at = 0;
    while (at < n) {
        size_t look = n - at < EAI_INSPECT_MAX ? n - at : EAI_INSPECT_MAX;
        long r = eai_inspect_step(in, side, p + at, look);
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        CU_ASSERT(r <= (long)look);
        at += (size_t)r;
    }
    return (long)at;
}

static long feed_str(struct eai_inspect *in, const char *s)
{
    return feed(in, C, (const uint8_t *)s, strlen(s));
}

/* ---------------------------------------------------------------- HTTP */

static void test_http_heads(void)
{
    struct eai_inspect in;
    const char *ok = "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
    eai_inspect_init(&in, eai_inspect_proto_for_port(80), "allowed.test", 80);
    CU_ASSERT_EQUAL(in.proto, EAI_INSPECT_HTTP);
    CU_ASSERT_EQUAL(step_str(&in, ok), (long)strlen(ok));
    CU_ASSERT_EQUAL(in.units, 1);
    CU_ASSERT_EQUAL(eai_inspect_passable(&in, S), EAI_INSPECT_ALL); /* responses are not read */

    /* a partial method waits, never passes: "GET" alone, then the rest */
    eai_inspect_init(&in, EAI_INSPECT_HTTP, "allowed.test", 80);
    CU_ASSERT_EQUAL(step_str(&in, "G"), 0);
    CU_ASSERT_EQUAL(step_str(&in, "GET"), 0);
    CU_ASSERT_EQUAL(step_str(&in, "GET / HTTP/1.1\r\n"), 0);
    CU_ASSERT_EQUAL(step_str(&in, "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n"), -1);
    CU_ASSERT(REASON(in, "host_mismatch"));
    CU_ASSERT_STRING_EQUAL(in.seen, "other.test");

    /* byte by byte, from the same start: waits until the end, then checks */
    eai_inspect_init(&in, EAI_INSPECT_HTTP, "allowed.test", 80);
    for (size_t k = 1; k < strlen(ok); k++)
        CU_ASSERT_EQUAL(eai_inspect_step(&in, C, (const uint8_t *)ok, k), 0);
    CU_ASSERT_EQUAL(step_str(&in, ok), (long)strlen(ok));

    /* leading CR/LF is skipped, as servers do, and the request read */
    eai_inspect_init(&in, EAI_INSPECT_HTTP, "allowed.test", 80);
    CU_ASSERT_EQUAL(step_str(&in, "\r\n\nGET / HTTP/1.1\r\nHost: other.test\r\n\r\n"), -1);
    CU_ASSERT(REASON(in, "host_mismatch"));
    eai_inspect_init(&in, EAI_INSPECT_HTTP, "allowed.test", 80);
    CU_ASSERT_EQUAL(step_str(&in, "\r\nGET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n"), 2 + (long)strlen(ok));
    char lead[200];
    memset(lead, '\n', 100);
    strcpy(lead + 100, ok);
    eai_inspect_init(&in, EAI_INSPECT_HTTP, "allowed.test", 80);
    CU_ASSERT_EQUAL(step_str(&in, lead), -1); /* more than 64 */

    /* keep-alive and pipelining: every head is checked */
    eai_inspect_init(&in, EAI_INSPECT_HTTP, "allowed.test", 80);
    char two[256];
    snprintf(two, sizeof(two), "%s%s", ok, ok);
    CU_ASSERT_EQUAL(feed_str(&in, two), (long)strlen(two));
    CU_ASSERT_EQUAL(in.units, 2);
    snprintf(two, sizeof(two), "%sGET / HTTP/1.1\r\nHost: other.test\r\n\r\n", ok);
    eai_inspect_init(&in, EAI_INSPECT_HTTP, "allowed.test", 80);
    CU_ASSERT_EQUAL(step_str(&in, two), (long)strlen(ok));
    CU_ASSERT_EQUAL(step_str(&in, two + strlen(ok)), -1);
    CU_ASSERT_STRING_EQUAL(in.seen, "other.test");

    /* the port in Host, when there is one, is the entry's */
    eai_inspect_init(&in, EAI_INSPECT_HTTP, "allowed.test", 80);
    CU_ASSERT(step_str(&in, "GET / HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n") > 0);
    eai_inspect_init(&in, EAI_INSPECT_HTTP, "allowed.test", 80);
    CU_ASSERT_EQUAL(step_str(&in, "GET / HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n"), -1);
    CU_ASSERT(REASON(in, "host_mismatch"));

    /* HTTP/2 prior knowledge is refused, with its own reason */
    eai_inspect_init(&in, EAI_INSPECT_HTTP, "allowed.test", 80);
    CU_ASSERT_EQUAL(step_str(&in, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), -1);
    CU_ASSERT(REASON(in, "http2_refused"));

    /* other protocols, ambiguity, tunnels: refused */
    const char *bad[] = {
        "SSH-2.0-OpenSSH_9.2\r\n",
        "\x16\x03\x01\x00\x05hello",
        "get / HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        " GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        "GET / HTTP/1.1\nHost: allowed.test\n\n",                                          /* bare LF */
        "GET / HTTP/1.1\r\nHost: allowed.test\r\n X: folded\r\n\r\n",                      /* obs-fold */
        "GET http://other.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        "CONNECT other.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        "GET / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: allowed.test\r\nHost: allowed.test\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: +5\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        "POST / HTTP/1.0\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: allowed.test\r\nX: a\rb\r\n\r\n",
        "GET /\x01 HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        NULL};
    for (int i = 0; bad[i]; i++) {
        eai_inspect_init(&in, EAI_INSPECT_HTTP, "allowed.test", 80);
        CU_ASSERT_EQUAL(step_str(&in, bad[i]), -1);
        CU_ASSERT(REASON(in, "http_malformed"));
    }

    /* a head never finished is refused at the bound, not read forever */
    static char big[EAI_INSPECT_MAX + 10];
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    memset(big + 19, 'a', sizeof(big) - 19);
    eai_inspect_init(&in, EAI_INSPECT_HTTP, "allowed.test", 80);
    CU_ASSERT_EQUAL(eai_inspect_step(&in, C, (const uint8_t *)big, EAI_INSPECT_MAX - 1), 0);
    CU_ASSERT_EQUAL(eai_inspect_step(&in, C, (const uint8_t *)big, EAI_INSPECT_MAX), -1);
}

static void test_http_bodies(void)
{
    struct eai_inspect in;
    /* a body that looks like a request is a body; the next head is read */
    const char *smuggle = "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n";
    char req[512];
    snprintf(req, sizeof(req), "POST /up HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(smuggle), smuggle);
    eai_inspect_init(&in, EAI_INSPECT_HTTP, "allowed.test", 80);
    size_t head = strlen(req) - strlen(smuggle);
    CU_ASSERT_EQUAL(step_str(&in, req), (long)head);
    CU_ASSERT_EQUAL(eai_inspect_passable(&in, C), strlen(smuggle));
    eai_inspect_skip(&in, C, 10); /* passed unread (splice) */
    CU_ASSERT_EQUAL(eai_inspect_passable(&in, C), strlen(smuggle) - 10);
    CU_ASSERT_EQUAL(step_str(&in, req + head + 10), (long)strlen(smuggle) - 10);
    CU_ASSERT_EQUAL(eai_inspect_passable(&in, C), 0);
    CU_ASSERT_EQUAL(step_str(&in, smuggle), -1); /* the same bytes as a head: checked */
    CU_ASSERT(REASON(in, "host_mismatch"));

    /* chunked: sizes, extensions, the end, a trailer, then the next head */
    const char *chunked = "POST / HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: Chunked\r\n\r\n"
                          "5\r\nhello\r\n"
                          "1A;name=val\r\nGET / HTTP/1.1\r\nHost: oo\r\n\r\n"
                          "0\r\nX-Sum: 1\r\n\r\n"
                          "GET /next HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
    eai_inspect_init(&in, EAI_INSPECT_HTTP, "allowed.test", 80);
    CU_ASSERT_EQUAL(feed_str(&in, chunked), (long)strlen(chunked));
    CU_ASSERT_EQUAL(in.units, 2);
    const char *end = "POST / HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                      "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n";
    eai_inspect_init(&in, EAI_INSPECT_HTTP, "allowed.test", 80);
    CU_ASSERT_EQUAL(feed_str(&in, end), -1);
    CU_ASSERT(REASON(in, "host_mismatch"));
    const char *badchunks[] = {"5 x\r\nhello\r\n0\r\n\r\n", "5\nhello\r\n0\r\n\r\n", "5\r\nhelloXX0\r\n\r\n",
                               "-5\r\n", "12345678901234567\r\n", "0\r\nX: a\nb\r\n\r\n", NULL};
    for (int i = 0; badchunks[i]; i++) {
        char buf[256];
        snprintf(buf, sizeof(buf), "POST / HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n%s",
                 badchunks[i]);
        eai_inspect_init(&in, EAI_INSPECT_HTTP, "allowed.test", 80);
        CU_ASSERT_EQUAL(feed_str(&in, buf), -1);
    }
}

static void test_other_ports(void)
{
    struct eai_inspect in;
    eai_inspect_init(&in, eai_inspect_proto_for_port(7000), "allowed.test", 7000);
    CU_ASSERT_EQUAL(in.proto, EAI_INSPECT_FIRST);
    /* not HTTP nor TLS: passes, and everything after */
    const char *ssh = "SSH-2.0-OpenSSH_9.2\r\n";
    CU_ASSERT_EQUAL(step_str(&in, ssh), (long)strlen(ssh));
    CU_ASSERT_EQUAL(in.proto, EAI_INSPECT_OPAQUE);
    CU_ASSERT_EQUAL(eai_inspect_passable(&in, C), EAI_INSPECT_ALL);
    const char *others[] = {"EHLO client.example\r\n", "\x00\x01\x02", "+PING\r\n", NULL};
    for (int i = 0; others[i]; i++) {
        eai_inspect_init(&in, EAI_INSPECT_FIRST, "allowed.test", 7000);
        CU_ASSERT(eai_inspect_step(&in, C, (const uint8_t *)others[i], i == 1 ? 3 : strlen(others[i])) > 0);
        CU_ASSERT_EQUAL(in.proto, EAI_INSPECT_OPAQUE);
    }
    /* a first line that is not over waits */
    eai_inspect_init(&in, EAI_INSPECT_FIRST, "allowed.test", 7000);
    CU_ASSERT_EQUAL(step_str(&in, "GET"), 0);
    CU_ASSERT_EQUAL(step_str(&in, "GET / HTTP/1.1\r\nHost: other.test:7000\r\n\r\n"), -1);
    CU_ASSERT(REASON(in, "host_mismatch"));
    /* HTTP named on the line, lower case methods, leading white space: read as HTTP (and refused) */
    const char *https[] = {"get / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "X y http/1.1\r\n",
                           "\r\n\r\nGET / HTTP/1.1\r\nHost: other.test\r\n\r\n", "  GET / HTTP/1.1\r\n",
                           "GET http://other.test/\r\n", NULL};
    for (int i = 0; https[i]; i++) {
        eai_inspect_init(&in, EAI_INSPECT_FIRST, "allowed.test", 7000);
        CU_ASSERT_EQUAL(step_str(&in, https[i]), -1);
    }
    eai_inspect_init(&in, EAI_INSPECT_FIRST, "allowed.test", 7000);
    const char *ok = "GET / HTTP/1.1\r\nHost: allowed.test:7000\r\n\r\n";
    CU_ASSERT_EQUAL(step_str(&in, ok), (long)strlen(ok));
    CU_ASSERT_EQUAL(in.proto, EAI_INSPECT_HTTP);
    /* an address entry reads nothing */
    eai_inspect_init(&in, EAI_INSPECT_HTTP, "", 80);
    CU_ASSERT_EQUAL(in.proto, EAI_INSPECT_OPAQUE);
    const char *any = "GET / HTTP/1.1\r\nHost: anything\r\n\r\n";
    CU_ASSERT_EQUAL(step_str(&in, any), (long)strlen(any));
}

/* ---------------------------------------------------------------- TLS */

static EVP_PKEY *key;
static X509 *cert;

static int tls_setup(void)
{
    key = EVP_EC_gen("P-256");
    cert = X509_new();
    if (!key || !cert)
        return -1;
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME *n = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"tls.test", -1, -1, 0);
    X509_set_issuer_name(cert, n);
    return X509_sign(cert, key, EVP_sha256()) > 0 ? 0 : -1;
}

static int tls_teardown(void)
{
    X509_free(cert);
    EVP_PKEY_free(key);
    return 0;
}

/* A client and a server talking through the inspector, each direction
 * buffered as the gateway buffers it. */
struct pair {
    SSL_CTX *cctx, *sctx;
    SSL *cl, *sv;
    BIO *c_rd, *c_wr, *s_rd, *s_wr; /* the client's and the server's memory BIOs */
    uint8_t up[65536], down[65536];
    size_t nup, ndown;
    struct eai_inspect in;
};

static void pair_new(struct pair *p, const char *sni, int max_version, const char *server_groups)
{
    memset(p, 0, sizeof(*p));
    p->cctx = SSL_CTX_new(TLS_client_method());
    p->sctx = SSL_CTX_new(TLS_server_method());
    SSL_CTX_use_certificate(p->sctx, cert);
    SSL_CTX_use_PrivateKey(p->sctx, key);
    if (max_version)
        SSL_CTX_set_max_proto_version(p->cctx, max_version);
    if (server_groups) {
        SSL_CTX_set1_groups_list(p->sctx, server_groups);
        SSL_CTX_set1_groups_list(p->cctx, "X25519:P-256"); /* key share for X25519 only: a HelloRetryRequest */
    }
    p->cl = SSL_new(p->cctx);
    p->sv = SSL_new(p->sctx);
    p->c_rd = BIO_new(BIO_s_mem());
    p->c_wr = BIO_new(BIO_s_mem());
    p->s_rd = BIO_new(BIO_s_mem());
    p->s_wr = BIO_new(BIO_s_mem());
    SSL_set_bio(p->cl, p->c_rd, p->c_wr);
    SSL_set_bio(p->sv, p->s_rd, p->s_wr);
    if (sni)
        SSL_set_tlsext_host_name(p->cl, sni);
    SSL_set_connect_state(p->cl);
    SSL_set_accept_state(p->sv);
    eai_inspect_init(&p->in, EAI_INSPECT_TLS, "tls.test", 443);
}

static void pair_free(struct pair *p)
{
    SSL_free(p->cl);
    SSL_free(p->sv);
    SSL_CTX_free(p->cctx);
    SSL_CTX_free(p->sctx);
}

/* Move what `from` wrote through the inspector into `to`.  -1 refused. */
static int relay(struct pair *p, enum eai_inspect_side side, BIO *from, BIO *to)
{
    uint8_t *buf = side == C ? p->up : p->down;
    size_t *n = side == C ? &p->nup : &p->ndown;
    int r;
    while (*n < sizeof(p->up) && (r = BIO_read(from, buf + *n, (int)(sizeof(p->up) - *n))) > 0)
        *n += (size_t)r;
    long passed = feed(&p->in, side, buf, *n);
    if (passed < 0)
        return -1;
    if (passed > 0)
        BIO_write(to, buf, (int)passed);
    memmove(buf, buf + passed, *n - (size_t)passed);
    *n -= (size_t)passed;
    return 0;
}

/* Handshake, then a message each way.  0 done, -1 refused, -2 stuck. */
static int pair_run(struct pair *p)
{
    for (int round = 0; round < 20; round++) {
        SSL_do_handshake(p->cl);
        if (relay(p, C, p->c_wr, p->s_rd) < 0)
            return -1;
        SSL_do_handshake(p->sv);
        if (relay(p, S, p->s_wr, p->c_rd) < 0)
            return -1;
        if (SSL_is_init_finished(p->cl) && SSL_is_init_finished(p->sv))
            break;
    }
    if (!SSL_is_init_finished(p->cl) || !SSL_is_init_finished(p->sv))
        return -2;
    char got[16] = "";
    SSL_write(p->cl, "ping", 4);
    if (relay(p, C, p->c_wr, p->s_rd) < 0)
        return -1;
    if (SSL_read(p->sv, got, sizeof(got)) != 4 || memcmp(got, "ping", 4) != 0)
        return -2;
    SSL_write(p->sv, "pong", 4);
    if (relay(p, S, p->s_wr, p->c_rd) < 0)
        return -1;
    return SSL_read(p->cl, got, sizeof(got)) == 4 && memcmp(got, "pong", 4) == 0 ? 0 : -2;
}

/* A ClientHello as a client for sni writes it (its records). */
static size_t hello_bytes(const char *sni, uint8_t *out, size_t cap)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl = SSL_new(ctx);
    BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
    SSL_set_bio(ssl, rb, wb);
    if (sni)
        SSL_set_tlsext_host_name(ssl, sni);
    SSL_set_connect_state(ssl);
    (void)SSL_do_handshake(ssl);
    int n = BIO_read(wb, out, (int)cap);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    return n > 0 ? (size_t)n : 0;
}

/* The ClientHello of one record re-framed into records of at most `per`
 * content bytes. */
static size_t reframe(const uint8_t *rec, size_t n, size_t per, uint8_t *out)
{
    size_t body = n - 5, o = 0;
    for (size_t at = 0; at < body; at += per) {
        size_t k = body - at < per ? body - at : per;
        out[o++] = 0x16;
        out[o++] = 0x03;
        out[o++] = 0x01;
        out[o++] = (uint8_t)(k >> 8);
        out[o++] = (uint8_t)k;
        memcpy(out + o, rec + 5 + at, k);
        o += k;
    }
    return o;
}

static void test_tls_first_flight(void)
{
    struct eai_inspect in;
    uint8_t hello[4096], split[8192];
    size_t n = hello_bytes("tls.test", hello, sizeof(hello));
    CU_ASSERT_FATAL(n > 100);
    eai_inspect_init(&in, eai_inspect_proto_for_port(443), "tls.test", 443);
    CU_ASSERT_EQUAL(in.proto, EAI_INSPECT_TLS);
    CU_ASSERT_EQUAL(eai_inspect_passable(&in, S), 0); /* the server's hello is read */
    for (size_t k = 1; k < n; k++)
        CU_ASSERT_EQUAL(eai_inspect_step(&in, C, hello, k), 0);
    CU_ASSERT_EQUAL(eai_inspect_step(&in, C, hello, n), (long)n);
    CU_ASSERT_EQUAL(in.units, 1);

    /* another name, none, not TLS */
    n = hello_bytes("other.test", hello, sizeof(hello));
    eai_inspect_init(&in, EAI_INSPECT_TLS, "tls.test", 443);
    CU_ASSERT_EQUAL(eai_inspect_step(&in, C, hello, n), -1);
    CU_ASSERT(REASON(in, "sni_mismatch"));
    CU_ASSERT_STRING_EQUAL(in.seen, "other.test");
    n = hello_bytes(NULL, hello, sizeof(hello));
    eai_inspect_init(&in, EAI_INSPECT_TLS, "tls.test", 443);
    CU_ASSERT_EQUAL(eai_inspect_step(&in, C, hello, n), -1);
    CU_ASSERT(REASON(in, "sni_missing"));
    eai_inspect_init(&in, EAI_INSPECT_TLS, "tls.test", 443);
    CU_ASSERT_EQUAL(step_str(&in, "GET / HTTP/1.1\r\nHost: tls.test\r\n\r\n"), -1);
    CU_ASSERT(REASON(in, "tls_malformed"));

    /* a ClientHello over several records is reassembled and checked */
    n = hello_bytes("tls.test", hello, sizeof(hello));
    size_t m = reframe(hello, n, 7, split);
    eai_inspect_init(&in, EAI_INSPECT_TLS, "tls.test", 443);
    CU_ASSERT_EQUAL(eai_inspect_step(&in, C, split, m - 1), 0);
    CU_ASSERT_EQUAL(eai_inspect_step(&in, C, split, m), (long)m);
    n = hello_bytes("other.test", hello, sizeof(hello));
    m = reframe(hello, n, 100, split);
    eai_inspect_init(&in, EAI_INSPECT_TLS, "tls.test", 443);
    CU_ASSERT_EQUAL(eai_inspect_step(&in, C, split, m), -1);
    CU_ASSERT(REASON(in, "sni_mismatch"));
    /* ... but not in records so small it would take more than the bound */
    n = hello_bytes("tls.test", hello, sizeof(hello));
    static uint8_t tiny[6 * 4096];
    m = reframe(hello, n, 1, tiny);
    eai_inspect_init(&in, EAI_INSPECT_TLS, "tls.test", 443);
    CU_ASSERT_EQUAL(feed(&in, C, tiny, m), m > EAI_INSPECT_MAX ? -1 : (long)m);
    /* records after the hello: read by their headers; contents pass unread */
    n = hello_bytes("tls.test", hello, sizeof(hello));
    eai_inspect_init(&in, EAI_INSPECT_TLS, "tls.test", 443);
    CU_ASSERT_EQUAL(eai_inspect_step(&in, C, hello, n), (long)n);
    const uint8_t app[] = {0x17, 0x03, 0x03, 0x00, 0x04, 1, 2, 3, 4};
    CU_ASSERT_EQUAL(eai_inspect_step(&in, C, app, sizeof(app)), 5);
    CU_ASSERT_EQUAL(eai_inspect_passable(&in, C), 4);
    CU_ASSERT_EQUAL(eai_inspect_step(&in, C, app + 5, 4), 4);
    const uint8_t weird[] = {0x42, 0x03, 0x03, 0x00, 0x00};
    CU_ASSERT_EQUAL(eai_inspect_step(&in, C, weird, sizeof(weird)), -1);
}

static void test_tls_handshakes(void)
{
    struct pair p;
    /* TLS 1.3, TLS 1.2, and 1.3 with a HelloRetryRequest (a second ClientHello, checked) */
    pair_new(&p, "tls.test", 0, NULL);
    CU_ASSERT_EQUAL(pair_run(&p), 0);
    CU_ASSERT_EQUAL(p.in.version, 0x0304);
    CU_ASSERT_EQUAL(p.in.units, 1);
    pair_free(&p);
    pair_new(&p, "tls.test", TLS1_2_VERSION, NULL);
    CU_ASSERT_EQUAL(pair_run(&p), 0);
    CU_ASSERT_EQUAL(p.in.version, 0x0303);
    CU_ASSERT_EQUAL(p.in.units, 1);
    pair_free(&p);
    pair_new(&p, "tls.test", 0, "P-256");
    CU_ASSERT_EQUAL(pair_run(&p), 0);
    CU_ASSERT_EQUAL(p.in.units, 2);
    pair_free(&p);
    /* the attack: after the server's HelloRetryRequest, a ClientHello for
     * another name (with the compatibility ChangeCipherSpec before it) */
    pair_new(&p, "tls.test", 0, "P-256");
    SSL_do_handshake(p.cl);
    CU_ASSERT_EQUAL(relay(&p, C, p.c_wr, p.s_rd), 0);
    SSL_do_handshake(p.sv);
    CU_ASSERT_EQUAL(relay(&p, S, p.s_wr, p.c_rd), 0);
    CU_ASSERT_EQUAL(p.in.version, 0x0304);
    uint8_t evil[4096 + 6] = {0x14, 0x03, 0x03, 0x00, 0x01, 0x01};
    size_t n = hello_bytes("other.test", evil + 6, sizeof(evil) - 6);
    CU_ASSERT_EQUAL(feed(&p.in, C, evil, n + 6), -1);
    CU_ASSERT(REASON(p.in, "sni_mismatch"));
    pair_free(&p);
    /* a handshake record after the client's ChangeCipherSpec, the server's
     * hello never seen: cannot be told plaintext from encrypted, refused */
    struct eai_inspect in;
    uint8_t hello[4096];
    n = hello_bytes("tls.test", hello, sizeof(hello));
    eai_inspect_init(&in, EAI_INSPECT_TLS, "tls.test", 443);
    CU_ASSERT_EQUAL(eai_inspect_step(&in, C, hello, n), (long)n);
    CU_ASSERT_EQUAL(feed(&in, C, evil, 6), 6);
    n = hello_bytes("other.test", hello, sizeof(hello));
    CU_ASSERT_EQUAL(feed(&in, C, hello, n), -1);
    CU_ASSERT(REASON(in, "tls_malformed"));
    /* a ClientHello behind another handshake message in one record */
    n = hello_bytes("tls.test", hello, sizeof(hello));
    eai_inspect_init(&in, EAI_INSPECT_TLS, "tls.test", 443);
    CU_ASSERT_EQUAL(eai_inspect_step(&in, C, hello, n), (long)n);
    uint8_t two[4096 + 16] = {0x16, 0x03, 0x03, 0, 0, 0x10, 0x00, 0x00, 0x01, 0xaa};
    size_t h2 = hello_bytes("other.test", two + 200, 3000);
    memmove(two + 10, two + 200 + 5, h2 - 5);
    size_t rec = 5 + (h2 - 5);
    two[3] = (uint8_t)(rec >> 8);
    two[4] = (uint8_t)rec;
    CU_ASSERT_EQUAL(feed(&in, C, two, 5 + rec), -1);
    CU_ASSERT(REASON(in, "tls_malformed"));
}

static int register_tests(void)
{
    CU_pSuite s = CU_add_suite("egress_inspect_http", NULL, NULL);
    if (!s || !CU_add_test(s, "request heads", test_http_heads) ||
        !CU_add_test(s, "bodies and framing", test_http_bodies) ||
        !CU_add_test(s, "other ports", test_other_ports))
        return -1;
    s = CU_add_suite("egress_inspect_tls", tls_setup, tls_teardown);
    if (!s || !CU_add_test(s, "first flight", test_tls_first_flight) ||
        !CU_add_test(s, "handshakes", test_tls_handshakes))
        return -1;
    return 0;
}

EAI_UNIT_MAIN(register_tests)
