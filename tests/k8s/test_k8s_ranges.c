/*
 * The Kubernetes backend's address and image rules (plugins/k8s/k8s_policy.c)
 * as plain functions, every range at its edges (issue 16, item 8): a host
 * name resolved into NetworkPolicy addresses must never open the node, the
 * cluster or the cloud metadata service.
 */
#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

#include "../unit/unit_main.h"
#include "k8s.h"

static const char *refused(const char *a)
{
    unsigned char b[16];
    int fam = strchr(a, ':') ? AF_INET6 : AF_INET;
    CU_ASSERT_EQUAL_FATAL(inet_pton(fam, a, b), 1);
    return k8s_addr_refused(fam, b);
}

#define REFUSED(a, what)                                                                  \
    do {                                                                                  \
        const char *w_ = refused(a);                                                      \
        if (!w_ || !strstr(w_, what)) {                                                   \
            fprintf(stderr, "  %s -> %s, want %s\n", a, w_ ? w_ : "(allowed)", what);     \
            CU_FAIL(a);                                                                   \
        }                                                                                 \
    } while (0)
#define ALLOWED(a)                                                                        \
    do {                                                                                  \
        const char *w_ = refused(a);                                                      \
        if (w_) {                                                                         \
            fprintf(stderr, "  %s -> %s, want allowed\n", a, w_);                         \
            CU_FAIL(a);                                                                   \
        }                                                                                 \
    } while (0)

static void test_v4(void)
{
    REFUSED("169.254.169.254", "metadata");
    REFUSED("169.254.0.1", "link-local");
    REFUSED("127.0.0.1", "loopback");
    REFUSED("127.255.255.254", "loopback");
    REFUSED("10.0.0.1", "private");
    REFUSED("172.16.0.1", "private");
    REFUSED("172.31.255.255", "private");
    ALLOWED("172.32.0.1");
    ALLOWED("172.15.255.255");
    REFUSED("192.168.1.1", "private");
    REFUSED("100.64.0.1", "CGNAT");
    REFUSED("100.127.255.255", "CGNAT");
    ALLOWED("100.128.0.1");
    ALLOWED("100.63.255.255");
    REFUSED("0.0.0.0", "unspecified");
    REFUSED("224.0.0.1", "multicast");
    REFUSED("239.255.255.250", "multicast");
    REFUSED("255.255.255.255", "broadcast");
    ALLOWED("198.18.0.1"); /* as core/net/egress_policy.c: not a refused class */
    REFUSED("192.0.0.8", "IETF");
    ALLOWED("93.184.216.34");
    ALLOWED("8.8.8.8");
    ALLOWED("1.1.1.1");
}

static void test_v6(void)
{
    REFUSED("::", "unspecified");
    REFUSED("::1", "loopback");
    REFUSED("::ffff:169.254.169.254", "IPv4-mapped");
    REFUSED("::ffff:8.8.8.8", "IPv4-mapped");
    REFUSED("fc00::1", "unique local");
    REFUSED("fd12:3456::1", "unique local");
    REFUSED("fe80::1", "link-local");
    REFUSED("ff02::1", "multicast");
    REFUSED("64:ff9b::a9fe:a9fe", "NAT64");
    REFUSED("fd00:ec2::254", "unique local"); /* AWS IPv6 metadata */
    REFUSED("2002:a9fe:a9fe::1", "6to4");
    REFUSED("fec0::1", "site-local");
    ALLOWED("2606:4700:4700::1111");
    ALLOWED("2a00:1450:4007:80f::200e");
}

static void test_cidrs(void)
{
    json_t *c = json_pack("[s, s]", "10.20.0.0/16", "fd00::/8");
    unsigned char b[16];
    inet_pton(AF_INET, "10.20.3.4", b);
    CU_ASSERT(k8s_cidrs_contain(c, AF_INET, b));
    inet_pton(AF_INET, "10.21.0.1", b);
    CU_ASSERT(!k8s_cidrs_contain(c, AF_INET, b));
    inet_pton(AF_INET6, "fd12::1", b);
    CU_ASSERT(k8s_cidrs_contain(c, AF_INET6, b));
    inet_pton(AF_INET6, "fe80::1", b);
    CU_ASSERT(!k8s_cidrs_contain(c, AF_INET6, b));
    CU_ASSERT(!k8s_cidrs_contain(NULL, AF_INET, b));
    json_decref(c);
    int f, bits;
    unsigned char net[16];
    CU_ASSERT_EQUAL(k8s_cidr_parse("10.0.0.0/33", &f, net, &bits), -1);
    CU_ASSERT_EQUAL(k8s_cidr_parse("10.0.0.0/", &f, net, &bits), -1);
    CU_ASSERT_EQUAL(k8s_cidr_parse("example.com/8", &f, net, &bits), -1);
    CU_ASSERT_EQUAL(k8s_cidr_parse("::1", &f, net, &bits), 0);
    CU_ASSERT_EQUAL(bits, 128);
}

static void norm(const char *in, const char *want)
{
    char out[300];
    int rc = k8s_image_normalize(in, out, sizeof out);
    if (want) {
        CU_ASSERT_EQUAL(rc, 0);
        if (rc == 0 && strcmp(out, want) != 0) {
            fprintf(stderr, "  %s -> %s, want %s\n", in, out, want);
            CU_FAIL(in);
        }
    } else {
        CU_ASSERT_EQUAL(rc, -1);
    }
}

static void test_image_normalize(void)
{
    norm("python", "docker.io/library/python");
    norm("python:3.12-slim", "docker.io/library/python:3.12-slim");
    norm("acme/tool:1", "docker.io/acme/tool:1");
    norm("GHCR.io/acme/tool:1", "ghcr.io/acme/tool:1");
    norm("localhost/x", "localhost/x");
    norm("registry:5000/x", "registry:5000/x");
    norm("x@sha256:00", "docker.io/library/x@sha256:00");
    norm("", NULL);
    norm("/abs", NULL);
    norm("a//b", NULL);
    norm("a b", NULL);
    norm("Upper/case", NULL);
    norm("x@sha256:1/y", NULL);
}

/* What plugins/k8s/k8s_collector.c prints, parsed (k8s_collect.c). */
static int parse(const char *text, struct eai_iso_collected **f, size_t *n, int *trunc)
{
    char msg[160];
    return k8s_collect_parse(text, strlen(text), f, n, trunc, msg, sizeof msg);
}

static void test_collect_parse(void)
{
    struct eai_iso_collected *f;
    size_t n;
    int t;
    /* "/tmp/a" -> L3RtcC9h, "hi\n" -> aGkK; an empty file; binary "\0\377" -> AP8= */
    CU_ASSERT_EQUAL(parse("EAI-COLLECT 1 3 1\nL3RtcC9h 3 aGkK\nL3RtcC9i 0 \nL3RtcC9j 2 AP8=\nEAI-COLLECT-END\n",
                          &f, &n, &t), 0);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT_EQUAL(t, 1);
    if (n == 3) {
        CU_ASSERT_STRING_EQUAL(f[0].path, "/tmp/a");
        CU_ASSERT(f[0].len == 3 && !memcmp(f[0].data, "hi\n", 3));
        CU_ASSERT_STRING_EQUAL(f[1].path, "/tmp/b");
        CU_ASSERT_EQUAL(f[1].len, 0);
        CU_ASSERT(f[2].len == 2 && f[2].data[0] == 0 && f[2].data[1] == 0xff);
    }
    k8s_collect_free(f, n);
    CU_ASSERT_EQUAL(parse("EAI-COLLECT 1 0 0\nEAI-COLLECT-END\n", &f, &n, &t), 0);
    CU_ASSERT(n == 0 && t == 0);
    k8s_collect_free(f, n);
    /* cut short (limitBytes, log rotation): what parsed is kept, -1 */
    CU_ASSERT_EQUAL(parse("EAI-COLLECT 1 2 0\nL3RtcC9h 3 aGkK\nL3RtcC9i 3 aG", &f, &n, &t), -1);
    CU_ASSERT_EQUAL(n, 1);
    k8s_collect_free(f, n);
    CU_ASSERT_EQUAL(parse("EAI-COLLECT 1 1 0\nL3RtcC9h 3 aGkK\n", &f, &n, &t), -1); /* no end line */
    CU_ASSERT_EQUAL(n, 1);
    k8s_collect_free(f, n);
    /* malformed: size disagrees, bad base64, NUL in a path, no header, empty */
    const char *bad[] = {"EAI-COLLECT 1 1 0\nL3RtcC9h 4 aGkK\nEAI-COLLECT-END\n",
                         "EAI-COLLECT 1 1 0\nL3R!cC9h 3 aGkK\nEAI-COLLECT-END\n",
                         "EAI-COLLECT 1 1 0\nAA== 3 aGkK\nEAI-COLLECT-END\n",
                         "EAI-COLLECT 1 1 0\nL3RtcC9h 3aGkK\nEAI-COLLECT-END\n",
                         "hello\n", "", NULL};
    for (int i = 0; bad[i]; i++) {
        CU_ASSERT_EQUAL(parse(bad[i], &f, &n, &t), -1);
        CU_ASSERT_EQUAL(n, 0);
        k8s_collect_free(f, n);
    }
    /* the log bound covers the worst case of the caps */
    CU_ASSERT(k8s_collect_log_bytes(64, 10 << 20, 32 << 20) > (32LL << 20) / 3 * 4 + 64 * 5464);
}

static int reg(void)
{
    CU_pSuite s = CU_add_suite("k8s policy", NULL, NULL);
    if (!s || !CU_add_test(s, "IPv4 ranges", test_v4) || !CU_add_test(s, "IPv6 ranges", test_v6) ||
        !CU_add_test(s, "CIDR lists", test_cidrs) || !CU_add_test(s, "image references", test_image_normalize) ||
        !CU_add_test(s, "collector output", test_collect_parse))
        return -1;
    return 0;
}

EAI_UNIT_MAIN(reg)
