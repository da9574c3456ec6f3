/* Per-execution network namespaces and eaid's nftables table (netns.h). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/errors.h"
#include "net/egress_policy.h"
#include "net/netns.h"

extern char **environ;

/* Run argv with `input` on its stdin; its stdout and stderr (at most
 * outlen-1 bytes) into out.  Exit status, or -1 when it could not run. */
static int run_with_input(char *const argv[], const char *input, char *out, size_t outlen)
{
    int in[2], res[2];
    if (pipe2(in, O_CLOEXEC) < 0)
        return -1;
    if (pipe2(res, O_CLOEXEC) < 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, res[1], 1);
    posix_spawn_file_actions_adddup2(&fa, res[1], 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(res[1]);
    if (rc != 0) {
        close(in[1]);
        close(res[0]);
        errno = rc;
        return -1;
    }
    size_t len = input ? strlen(input) : 0, off = 0;
    while (off < len) {
        ssize_t w = write(in[1], input + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    close(in[1]);
    size_t got = 0;
    for (;;) {
        char buf[512];
        ssize_t r = read(res[0], buf, sizeof(buf));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (out && got + 1 < outlen) {
            size_t k = (size_t)r < outlen - 1 - got ? (size_t)r : outlen - 1 - got;
            memcpy(out + got, buf, k);
            got += k;
        }
    }
    if (out && outlen)
        out[got] = '\0';
    close(res[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int pool_parse(const char *cidr, uint32_t *net, int *prefix)
{
    struct eai_egress_rule r;
    char s[64];
    snprintf(s, sizeof(s), "%s:1", cidr ? cidr : "");
    if (eai_egress_rule_parse(s, &r) < 0 || r.kind != EAI_EGRESS_CIDR || r.ip.family != 4 || r.prefix < 8 ||
        r.prefix > 30)
        return -1;
    uint32_t n;
    memcpy(&n, r.ip.b, 4);
    *net = ntohl(n);
    *prefix = r.prefix;
    return 0;
}

uint32_t eai_netns_pool_slots(const char *pool_cidr)
{
    uint32_t net;
    int prefix;
    if (pool_parse(pool_cidr, &net, &prefix) < 0)
        return 0;
    return 1u << (30 - prefix);
}

int eai_netns_slot_addrs(const char *pool_cidr, uint32_t slot, char host_ip[16], char sandbox_ip[16])
{
    uint32_t net;
    int prefix;
    if (pool_parse(pool_cidr, &net, &prefix) < 0 || slot >= (1u << (30 - prefix)))
        return -1;
    uint32_t h = htonl(net + slot * 4 + 1), s = htonl(net + slot * 4 + 2);
    inet_ntop(AF_INET, &h, host_ip, 16);
    inet_ntop(AF_INET, &s, sandbox_ip, 16);
    return 0;
}

static int prefix_ok(const char *p)
{
    if (!p || strlen(p) != 4)
        return 0;
    for (; *p; p++)
        if (*p < 'a' || *p > 'z')
            return 0;
    return 1;
}

static int tag_ok(const char *tag)
{
    if (!tag || strlen(tag) != 8)
        return 0;
    for (const char *p = tag; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

int eai_netns_create(const char *prefix, const char *tag, const char *host_ip, const char *sandbox_ip,
                     struct eai_netns *out, struct eai_error **err)
{
    struct in_addr a;
    if (!prefix_ok(prefix) || !tag_ok(tag) || !host_ip || !sandbox_ip || inet_pton(AF_INET, host_ip, &a) != 1 ||
        inet_pton(AF_INET, sandbox_ip, &a) != 1)
        return eai_error_set(err, EAI_E_INTERNAL, "netns: bad tag or address");
    struct eai_netns n;
    memset(&n, 0, sizeof(n));
    snprintf(n.name, sizeof(n.name), "%s-%s", prefix, tag);
    snprintf(n.path, sizeof(n.path), "/var/run/netns/%s", n.name);
    snprintf(n.host_if, sizeof(n.host_if), "%s%sh", prefix, tag);
    snprintf(n.host_ip, sizeof(n.host_ip), "%s", host_ip);
    snprintf(n.sandbox_ip, sizeof(n.sandbox_ip), "%s", sandbox_ip);
    char host_cmds[1024], ns_cmds[512], out_text[512];
    /* the sandbox side is made as <prefix><tag>s, moved, then renamed eth0;
     * both ends with EAI_NETNS_MTU (netns.h) */
    snprintf(host_cmds, sizeof(host_cmds),
             "netns add %s\n"
             "link add %s mtu %d type veth peer name %s%ss mtu %d\n"
             "link set %s%ss netns %s\n"
             "addr add %s/30 dev %s\n"
             "link set %s up\n",
             n.name, n.host_if, EAI_NETNS_MTU, prefix, tag, EAI_NETNS_MTU, prefix, tag, n.name, host_ip, n.host_if,
             n.host_if);
    snprintf(ns_cmds, sizeof(ns_cmds),
             "link set %s%ss name eth0\n"
             "addr add %s/30 dev eth0\n"
             "link set lo up\n"
             "link set eth0 up\n"
             "route add default via %s\n",
             prefix, tag, sandbox_ip, host_ip);
    char *host_argv[] = {"ip", "-batch", "-", NULL};
    char *ns_argv[] = {"ip", "-n", n.name, "-batch", "-", NULL};
    int rc = run_with_input(host_argv, host_cmds, out_text, sizeof(out_text));
    if (rc == 0)
        rc = run_with_input(ns_argv, ns_cmds, out_text, sizeof(out_text));
    if (rc != 0) {
        eai_netns_destroy(&n);
        return eai_error_set(err, EAI_E_SANDBOX_UNAVAILABLE, "netns %s: ip failed (%d): %.200s", n.name, rc,
                             rc < 0 ? strerror(errno) : out_text);
    }
    /* no IPv6 on the host side: nothing but our IPv4 rules applies */
    char sysctl[128];
    snprintf(sysctl, sizeof(sysctl), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", n.host_if);
    int fd = open(sysctl, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (write(fd, "1", 1) != 1) {
            /* IPv6 may be off on this host already; the nft table drops it anyway */
        }
        close(fd);
    }
    *out = n;
    return 0;
}

void eai_netns_destroy(const struct eai_netns *n)
{
    if (!n || !n->name[0])
        return;
    char cmds[256];
    /* deleting the host side removes its peer; then the namespace */
    snprintf(cmds, sizeof(cmds), "link del %s\nnetns del %s\n", n->host_if, n->name);
    char *argv[] = {"ip", "-force", "-batch", "-", NULL};
    run_with_input(argv, cmds, NULL, 0);
}

int eai_netns_sweep(const char *prefix)
{
    int removed = 0;
    if (!prefix_ok(prefix))
        return 0;
    DIR *d = opendir("/var/run/netns");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strncmp(e->d_name, prefix, 4) != 0 || e->d_name[4] != '-' || !tag_ok(e->d_name + 5))
                continue;
            struct eai_netns n;
            memset(&n, 0, sizeof(n));
            snprintf(n.name, sizeof(n.name), "%s", e->d_name);
            snprintf(n.host_if, sizeof(n.host_if), "%s%sh", prefix, e->d_name + 5);
            eai_netns_destroy(&n);
            removed++;
        }
        closedir(d);
    }
    /* host sides whose namespace is already gone */
    DIR *s = opendir("/sys/class/net");
    if (s) {
        struct dirent *e;
        while ((e = readdir(s))) {
            size_t l = strlen(e->d_name);
            if (l == 13 && strncmp(e->d_name, prefix, 4) == 0 && e->d_name[12] == 'h') {
                char cmd[64];
                snprintf(cmd, sizeof(cmd), "link del %s\n", e->d_name);
                char *argv[] = {"ip", "-force", "-batch", "-", NULL};
                run_with_input(argv, cmd, NULL, 0);
            }
        }
        closedir(s);
    }
    return removed;
}

int eai_nft_install(const char *prefix, uint16_t dns_port, uint16_t gateway_port, struct eai_error **err)
{
    char rules[2048], out_text[512];
    if (!prefix_ok(prefix))
        return eai_error_set(err, EAI_E_INTERNAL, "nft: bad prefix");
    /* Declaring the table first makes the delete valid when it is absent:
     * the file replaces any table a dead eaid left. */
    snprintf(rules, sizeof(rules),
             "table inet %1$s\n"
             "delete table inet %1$s\n"
             "table inet %1$s {\n"
             "  chain prerouting { type nat hook prerouting priority dstnat; policy accept;\n"
             "    iifname \"%1$s*\" meta nfproto ipv4 udp dport 53 redirect to :%2$u\n"
             "    iifname \"%1$s*\" meta nfproto ipv4 meta l4proto tcp redirect to :%3$u\n"
             /* other UDP (QUIC...) to this host too, so that input refuses
              * it with an ICMP error the sandbox sees at once: forwarding is
              * usually off, and the kernel drops unroutable packets silently */
             "    iifname \"%1$s*\" meta nfproto ipv4 meta l4proto udp redirect to :9\n"
             "  }\n"
             "  chain input { type filter hook input priority filter; policy accept;\n"
             /* the DNS and gateway sockets bind 0.0.0.0 (one socket serves every
              * veth): nothing but the sandboxes' veths reaches them */
             "    iifname != \"%1$s*\" udp dport %2$u reject with icmpx type port-unreachable\n"
             "    iifname != \"%1$s*\" tcp dport %3$u reject with tcp reset\n"
             "    iifname \"%1$s*\" meta nfproto ipv4 udp dport %2$u accept\n"
             "    iifname \"%1$s*\" meta nfproto ipv4 tcp dport %3$u accept\n"
             "    iifname \"%1$s*\" meta l4proto udp reject with icmpx type port-unreachable\n"
             "    iifname \"%1$s*\" reject with icmpx type admin-prohibited\n"
             "  }\n"
             "  chain forward { type filter hook forward priority filter; policy accept;\n"
             "    iifname \"%1$s*\" reject with icmpx type admin-prohibited\n"
             "    oifname \"%1$s*\" drop\n"
             "  }\n"
             "}\n",
             prefix, dns_port, gateway_port);
    char *argv[] = {"nft", "-f", "-", NULL};
    int rc = run_with_input(argv, rules, out_text, sizeof(out_text));
    if (rc != 0)
        return eai_error_set(err, EAI_E_SANDBOX_UNAVAILABLE, "nft: table inet %s failed (%d): %.200s", prefix,
                             rc, rc < 0 ? strerror(errno) : out_text);
    return 0;
}

void eai_nft_remove(const char *prefix)
{
    if (!prefix_ok(prefix))
        return;
    char rules[128];
    snprintf(rules, sizeof(rules), "table inet %s\ndelete table inet %s\n", prefix, prefix);
    char *argv[] = {"nft", "-f", "-", NULL};
    run_with_input(argv, rules, NULL, 0);
}
