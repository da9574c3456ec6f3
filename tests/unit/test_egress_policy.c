/* Egress policy (core/net/egress_policy.c): allow-list grammar, address
 * classes, name matching; and the SNI and Host readers (egress_proto.c),
 * the former over a real ClientHello written by OpenSSL. */
#include <string.h>

#include <openssl/bio.h>
#include <openssl/ssl.h>

#include "unit_main.h"
#include "net/egress_proto.h"

static void test_rule_grammar(void)
{
    struct eai_egress_rule r;
    CU_ASSERT_EQUAL_FATAL(eai_egress_rule_parse("PyPI.org:443", &r), 0);
    CU_ASSERT_EQUAL(r.kind, EAI_EGRESS_NAME);
    CU_ASSERT_STRING_EQUAL(r.name, "pypi.org");
    CU_ASSERT_EQUAL(r.port, 443);
    CU_ASSERT_EQUAL_FATAL(eai_egress_rule_parse("*.example.com:80", &r), 0);
    CU_ASSERT_EQUAL(r.kind, EAI_EGRESS_SUFFIX);
    CU_ASSERT_STRING_EQUAL(r.name, "example.com");
    CU_ASSERT_EQUAL_FATAL(eai_egress_rule_parse("198.18.0.7:8443", &r), 0);
    CU_ASSERT_EQUAL(r.kind, EAI_EGRESS_ADDR);
    CU_ASSERT_EQUAL(r.ip.family, 4);
    CU_ASSERT_EQUAL(r.prefix, 32);
    CU_ASSERT_EQUAL_FATAL(eai_egress_rule_parse("10.1.0.0/16:5432", &r), 0);
    CU_ASSERT_EQUAL(r.kind, EAI_EGRESS_CIDR);
    CU_ASSERT_EQUAL(r.prefix, 16);
    CU_ASSERT_EQUAL_FATAL(eai_egress_rule_parse("[2001:db8::1]:443", &r), 0);
    CU_ASSERT_EQUAL(r.kind, EAI_EGRESS_ADDR);
    CU_ASSERT_EQUAL(r.ip.family, 6);
    CU_ASSERT_EQUAL_FATAL(eai_egress_rule_parse("[2001:db8::/32]:443", &r), 0);
    CU_ASSERT_EQUAL(r.kind, EAI_EGRESS_CIDR);

    const char *bad[] = {
        "", "pypi.org", "pypi.org:", "pypi.org:0", "pypi.org:65536", "pypi.org:0443", "pypi.org:44a",
        ":443", "*.:443", "*:443", "**.a.com:443", "a.*.com:443", "pypi.org.:443", "-a.com:443",
        "a-.com:443", "a..com:443", "a_b.com:443", "a b.com:443", "caf\xc3\xa9.fr:443",
        /* numbers in other spellings are addresses, never names */
        "2130706433:80", "0x7f000001:80", "0x7f.1:80", "127.1:80", "017.0.0.1:80", "1.2.3:80",
        "a.123:80",
        /* ranges with host bits, bad prefixes, IPv6 without brackets */
        "10.0.0.1/8:80", "10.0.0.0/33:80", "10.0.0.0/:80", "10.0.0.0/08:80", "::1:80",
        "[::1]", "[::1]443", "[1.2.3.4]:80", "[::ffff:1.2.3.4]:80", "[fe80::1%eth0]:80",
        NULL};
    for (int i = 0; bad[i]; i++) {
        if (eai_egress_rule_parse(bad[i], &r) == 0)
            fprintf(stderr, "accepted: %s\n", bad[i]);
        CU_ASSERT_EQUAL(eai_egress_rule_parse(bad[i], &r), -1);
    }
    char long_name[300];
    memset(long_name, 'a', 250);
    strcpy(long_name + 250, ".com:1");
    CU_ASSERT_EQUAL(eai_egress_rule_parse(long_name, &r), -1);
    char long_label[80];
    memset(long_label, 'b', 64);
    strcpy(long_label + 64, ".io:1");
    CU_ASSERT_EQUAL(eai_egress_rule_parse(long_label, &r), -1);
}

static void test_name_match(void)
{
    struct eai_egress_rule rules[3];
    CU_ASSERT_EQUAL_FATAL(eai_egress_rule_parse("pypi.org:443", &rules[0]), 0);
    CU_ASSERT_EQUAL_FATAL(eai_egress_rule_parse("*.pythonhosted.org:443", &rules[1]), 0);
    CU_ASSERT_EQUAL_FATAL(eai_egress_rule_parse("198.18.0.1:80", &rules[2]), 0);
    CU_ASSERT_EQUAL(eai_egress_name_match(rules, 3, "pypi.org", 443), 0);
    CU_ASSERT_EQUAL(eai_egress_name_match(rules, 3, "pypi.org", 0), 0);     /* DNS: any port */
    CU_ASSERT_EQUAL(eai_egress_name_match(rules, 3, "pypi.org", 80), -1);   /* other port */
    CU_ASSERT_EQUAL(eai_egress_name_match(rules, 3, "files.pythonhosted.org", 443), 1);
    CU_ASSERT_EQUAL(eai_egress_name_match(rules, 3, "a.b.pythonhosted.org", 443), 1);
    CU_ASSERT_EQUAL(eai_egress_name_match(rules, 3, "pythonhosted.org", 443), -1); /* suffix itself */
    CU_ASSERT_EQUAL(eai_egress_name_match(rules, 3, "evilpythonhosted.org", 443), -1);
    CU_ASSERT_EQUAL(eai_egress_name_match(rules, 3, "pypi.org.evil.com", 443), -1);
    CU_ASSERT_EQUAL(eai_egress_name_match(rules, 3, "evil.pypi.org", 443), -1);
    CU_ASSERT_EQUAL(eai_egress_name_match(rules, 3, "198.18.0.1", 80), -1); /* an ADDR entry is no name */

    struct eai_ip ip;
    CU_ASSERT_EQUAL_FATAL(eai_ip_parse("198.18.0.1", &ip), 0);
    CU_ASSERT_EQUAL(eai_egress_addr_match(rules, 3, &ip, 80), 2);
    CU_ASSERT_EQUAL(eai_egress_addr_match(rules, 3, &ip, 81), -1);
    CU_ASSERT_EQUAL_FATAL(eai_ip_parse("198.18.0.2", &ip), 0);
    CU_ASSERT_EQUAL(eai_egress_addr_match(rules, 3, &ip, 80), -1);

    struct eai_egress_rule cidr;
    CU_ASSERT_EQUAL_FATAL(eai_egress_rule_parse("10.20.0.0/14:5432", &cidr), 0);
    CU_ASSERT_EQUAL_FATAL(eai_ip_parse("10.23.255.255", &ip), 0);
    CU_ASSERT_EQUAL(eai_egress_addr_match(&cidr, 1, &ip, 5432), 0);
    CU_ASSERT_EQUAL_FATAL(eai_ip_parse("10.24.0.0", &ip), 0);
    CU_ASSERT_EQUAL(eai_egress_addr_match(&cidr, 1, &ip, 5432), -1);
    /* an IPv4-mapped IPv6 address never matches an IPv4 entry */
    CU_ASSERT_EQUAL_FATAL(eai_ip_parse("::ffff:10.20.0.1", &ip), 0);
    CU_ASSERT_EQUAL(eai_egress_addr_match(&cidr, 1, &ip, 5432), -1);
}

static void test_classes(void)
{
    struct { const char *a; enum eai_addr_class c; } cases[] = {
        {"0.0.0.0", EAI_ADDR_UNSPECIFIED}, {"0.1.2.3", EAI_ADDR_UNSPECIFIED},
        {"127.0.0.1", EAI_ADDR_LOOPBACK}, {"127.255.0.9", EAI_ADDR_LOOPBACK},
        {"10.0.0.1", EAI_ADDR_PRIVATE}, {"172.16.0.1", EAI_ADDR_PRIVATE}, {"172.31.255.255", EAI_ADDR_PRIVATE},
        {"172.32.0.1", EAI_ADDR_PUBLIC}, {"172.15.0.1", EAI_ADDR_PUBLIC}, {"192.168.1.1", EAI_ADDR_PRIVATE},
        {"169.254.169.254", EAI_ADDR_LINK_LOCAL}, {"100.64.0.1", EAI_ADDR_CGNAT},
        {"100.127.255.255", EAI_ADDR_CGNAT}, {"100.128.0.1", EAI_ADDR_PUBLIC},
        {"224.0.0.1", EAI_ADDR_MULTICAST}, {"239.255.255.250", EAI_ADDR_MULTICAST},
        {"240.0.0.1", EAI_ADDR_RESERVED}, {"255.255.255.255", EAI_ADDR_RESERVED},
        {"192.0.0.8", EAI_ADDR_RESERVED}, {"198.18.0.1", EAI_ADDR_PUBLIC}, {"93.184.216.34", EAI_ADDR_PUBLIC},
        {"::", EAI_ADDR_UNSPECIFIED}, {"::1", EAI_ADDR_LOOPBACK}, {"fe80::1", EAI_ADDR_LINK_LOCAL},
        {"febf::1", EAI_ADDR_LINK_LOCAL}, {"fec0::1", EAI_ADDR_PRIVATE}, {"fc00::1", EAI_ADDR_ULA},
        {"fd12:3456::1", EAI_ADDR_ULA}, {"ff02::1", EAI_ADDR_MULTICAST},
        {"::ffff:127.0.0.1", EAI_ADDR_V4_EMBEDDED}, {"::ffff:8.8.8.8", EAI_ADDR_V4_EMBEDDED},
        {"::127.0.0.1", EAI_ADDR_V4_EMBEDDED}, {"64:ff9b::a9fe:a9fe", EAI_ADDR_V4_EMBEDDED},
        {"2002:a9fe:a9fe::1", EAI_ADDR_V4_EMBEDDED}, {"2001:4860:4860::8888", EAI_ADDR_PUBLIC},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct eai_ip ip;
        CU_ASSERT_EQUAL_FATAL(eai_ip_parse(cases[i].a, &ip), 0);
        if (eai_addr_classify(&ip) != cases[i].c)
            fprintf(stderr, "%s: %s, want %s\n", cases[i].a, eai_addr_class_name(eai_addr_classify(&ip)),
                    eai_addr_class_name(cases[i].c));
        CU_ASSERT_EQUAL(eai_addr_classify(&ip), cases[i].c);
    }
    struct eai_ip ip;
    CU_ASSERT_EQUAL(eai_ip_parse("2130706433", &ip), -1);
    CU_ASSERT_EQUAL(eai_ip_parse("0x7f.0.0.1", &ip), -1);
    CU_ASSERT_EQUAL(eai_ip_parse("127.1", &ip), -1);
    CU_ASSERT_STRING_EQUAL(eai_addr_class_name(EAI_ADDR_LINK_LOCAL), "link_local");
}

/* A ClientHello as OpenSSL writes it for server_name (NULL: none). */
static size_t client_hello(const char *server_name, unsigned char *buf, size_t cap)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl = SSL_new(ctx);
    BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
    SSL_set_bio(ssl, rb, wb);
    if (server_name)
        SSL_set_tlsext_host_name(ssl, server_name);
    SSL_set_connect_state(ssl);
    (void)SSL_do_handshake(ssl); /* wants to read: the hello is written */
    int n = BIO_read(wb, buf, (int)cap);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    return n > 0 ? (size_t)n : 0;
}

static void test_sni(void)
{
    unsigned char hello[4096];
    char name[256];
    size_t n = client_hello("Files.PythonHosted.org", hello, sizeof(hello));
    CU_ASSERT_FATAL(n > 100);
    CU_ASSERT_EQUAL(eai_tls_sni(hello, n, name, sizeof(name)), 1);
    CU_ASSERT_STRING_EQUAL(name, "files.pythonhosted.org");
    /* every prefix asks for more, never answers */
    for (size_t k = 0; k < n; k++)
        CU_ASSERT_EQUAL(eai_tls_sni(hello, k, name, sizeof(name)), -1);
    /* a hello without server_name: complete, no name */
    size_t m = client_hello(NULL, hello, sizeof(hello));
    CU_ASSERT_FATAL(m > 100);
    CU_ASSERT_EQUAL(eai_tls_sni(hello, m, name, sizeof(name)), 0);
    /* not TLS */
    CU_ASSERT_EQUAL(eai_tls_sni((const uint8_t *)"GET / HTTP/1.1\r\n", 16, name, sizeof(name)), -2);
    /* a handshake length past its record is refused, not read */
    n = client_hello("a.example", hello, sizeof(hello));
    hello[6] = 0x7f;
    CU_ASSERT_EQUAL(eai_tls_sni(hello, n, name, sizeof(name)), -2);
    /* a server name that is no host name (NUL inside) is refused */
    n = client_hello("abc.example", hello, sizeof(hello));
    unsigned char *p = memmem(hello, n, "abc.example", 11);
    CU_ASSERT_FATAL(p != NULL);
    p[1] = '\0';
    CU_ASSERT_EQUAL(eai_tls_sni(hello, n, name, sizeof(name)), -2);
}

static void test_http_host(void)
{
    char host[256];
    uint16_t port = 1;
    const char *ok = "GET /simple/ HTTP/1.1\r\nUser-Agent: x\r\nHost:  PyPI.org:8080 \r\nAccept: */*\r\n\r\n";
    CU_ASSERT_EQUAL(eai_http_host(ok, strlen(ok), host, sizeof(host), &port), 1);
    CU_ASSERT_STRING_EQUAL(host, "pypi.org");
    CU_ASSERT_EQUAL(port, 8080);
    const char *v6 = "HEAD / HTTP/1.0\r\nhost: [2001:DB8::1]\r\n\r\n";
    CU_ASSERT_EQUAL(eai_http_host(v6, strlen(v6), host, sizeof(host), &port), 1);
    CU_ASSERT_STRING_EQUAL(host, "2001:db8::1");
    CU_ASSERT_EQUAL(port, 0);
    for (size_t k = 0; k < strlen(ok); k++)
        CU_ASSERT_EQUAL(eai_http_host(ok, k, host, sizeof(host), &port), -1);
    const char *bad[] = {
        "GET / HTTP/1.1\r\n\r\n",                                           /* no Host */
        "GET / HTTP/1.1\r\nHost: a.com\r\nHost: b.com\r\n\r\n",              /* two */
        "GET http://b.com/ HTTP/1.1\r\nHost: a.com\r\n\r\n",                 /* absolute-form */
        "CONNECT b.com:443 HTTP/1.1\r\nHost: a.com\r\n\r\n",                 /* tunnel */
        "GET / HTTP/1.1\r\nHost : a.com\r\n\r\n",                            /* space before colon */
        "GET / HTTP/1.1\r\nHost: a.com:99999\r\n\r\n",                       /* port */
        "GET / HTTP/1.1\r\nHost: a_b.com\r\n\r\n",                           /* not a host name */
        "GET / HTTP/2.0\r\nHost: a.com\r\n\r\n",
        "get / HTTP/1.1\r\nHost: a.com\r\n\r\n",
        "\x16\x03\x01\x00\x05hello",
        NULL};
    for (int i = 0; bad[i]; i++)
        CU_ASSERT_EQUAL(eai_http_host(bad[i], strlen(bad[i]), host, sizeof(host), &port), -2);
    static char big[20000];
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    memset(big + 19, 'a', sizeof(big) - 19);
    CU_ASSERT_EQUAL(eai_http_host(big, sizeof(big), host, sizeof(host), &port), -2); /* head too long */
}

static int register_tests(void)
{
    CU_pSuite s = CU_add_suite("egress_policy", NULL, NULL);
    if (!s || !CU_add_test(s, "allow-list grammar", test_rule_grammar) ||
        !CU_add_test(s, "name and address matching", test_name_match) ||
        !CU_add_test(s, "address classes", test_classes) || !CU_add_test(s, "TLS SNI", test_sni) ||
        !CU_add_test(s, "HTTP Host", test_http_host))
        return -1;
    return 0;
}

EAI_UNIT_MAIN(register_tests)
