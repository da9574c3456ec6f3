/*
 * Per-profile policy of the Kubernetes backend (docs/kubernetes.md,
 * "Images" and "Egress addresses"), issue 16 item 8:
 *
 *  - images: every reference is normalised the way the kubelet reads it
 *    (docker.io/library/ for short names) and the normalised form is what
 *    the pod names; a profile may restrict images to registry prefixes and
 *    require a sha256 digest.  Pods always use imagePullPolicy Always.
 *  - egress: a host name resolved into NetworkPolicy addresses must not
 *    land in loopback, private, link-local (169.254.169.254 metadata),
 *    CGNAT, multicast, unspecified, reserved, ULA or IPv4-embedding
 *    (mapped, compatible, NAT64, 6to4) ranges, unless the profile lists a
 *    CIDR containing the address.  The classes are those of the local
 *    egress gateway (core/net/egress_policy.c, eai_addr_classify).
 *
 * Config (isolation.k8s): `images` = the default image policy,
 * `profiles.<name>` = {images: {...}, egress_private_cidrs: [...]}.
 * Pure functions: no I/O, callable from any thread.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "k8s.h"

/* ------------------------------------------------------------ images */

static int is_domain(const char *s, size_t n)
{
    if (n == 9 && strncmp(s, "localhost", 9) == 0)
        return 1;
    return memchr(s, '.', n) != NULL || memchr(s, ':', n) != NULL;
}

static int ref_chars_ok(const char *s)
{
    if (!*s)
        return 0;
    for (const char *p = s; *p; p++)
        if (!(isalnum((unsigned char)*p) || strchr("._-/:@", *p)))
            return 0;
    return 1;
}

int k8s_image_normalize(const char *in, char *out, size_t outlen)
{
    if (!in || !ref_chars_ok(in) || in[0] == '/' || strstr(in, "//"))
        return -1;
    const char *slash = strchr(in, '/');
    const char *at = strchr(in, '@');
    if (at && slash && at < slash)
        return -1;
    int w;
    if (slash && is_domain(in, (size_t)(slash - in))) {
        /* the registry host is case-insensitive: lowercase it */
        size_t dl = (size_t)(slash - in);
        if (dl + strlen(slash) + 1 > outlen)
            return -1;
        for (size_t i = 0; i < dl; i++)
            out[i] = (char)tolower((unsigned char)in[i]);
        w = (int)dl + snprintf(out + dl, outlen - dl, "%s", slash);
    } else if (slash) {
        w = snprintf(out, outlen, "docker.io/%s", in);
    } else {
        w = snprintf(out, outlen, "docker.io/library/%s", in);
    }
    if (w < 0 || (size_t)w >= outlen)
        return -1;
    /* the path after the registry: lowercase, as the registry API wants */
    const char *path = strchr(out, '/') + 1;
    for (const char *p = path; *p && *p != ':' && *p != '@'; p++)
        if (isupper((unsigned char)*p))
            return -1;
    return 0;
}

static int has_digest(const char *ref)
{
    const char *at = strchr(ref, '@');
    if (!at || strncmp(at + 1, "sha256:", 7) != 0)
        return 0;
    const char *h = at + 8;
    size_t n = 0;
    for (; h[n]; n++)
        if (!((h[n] >= '0' && h[n] <= '9') || (h[n] >= 'a' && h[n] <= 'f')))
            return 0;
    return n == 64;
}

/* ref (normalised) is under prefix: a registry host ("ghcr.io") matches
 * its images only ("ghcr.io/..."), a repository prefix ("ghcr.io/acme" or
 * "ghcr.io/acme/tool") matches itself and what is below it. */
static int prefix_match(const char *ref, const char *prefix)
{
    size_t n = strlen(prefix);
    while (n && prefix[n - 1] == '/')
        n--;
    if (n == 0 || strncmp(ref, prefix, n) != 0)
        return 0;
    char next = ref[n];
    if (!memchr(prefix, '/', n))
        return next == '/';
    return next == '/' || next == ':' || next == '@' || next == '\0';
}

static const json_t *profile_policy(const struct k8s_cfg *c, const char *profile)
{
    const json_t *p = profile && c->profiles ? json_object_get(c->profiles, profile) : NULL;
    return json_is_object(p) ? p : NULL;
}

int k8s_image_check(const struct k8s_cfg *c, const char *profile, const char *image, char *norm,
                    size_t normlen, char *msg, size_t msglen)
{
    if (k8s_image_normalize(image, norm, normlen) < 0) {
        snprintf(msg, msglen, "image '%.200s' is not a valid image reference", image ? image : "");
        return -1;
    }
    const json_t *pp = profile_policy(c, profile);
    const json_t *pol = pp && json_object_get(pp, "images") ? json_object_get(pp, "images") : c->images;
    if (!json_is_object(pol))
        return 0;
    const json_t *regs = json_object_get(pol, "registries");
    if (json_is_array(regs)) {
        int ok = 0;
        size_t i;
        const json_t *r;
        json_array_foreach(regs, i, r)
            if (prefix_match(norm, json_string_value(r)))
                ok = 1;
        if (!ok) {
            snprintf(msg, msglen, "image '%.200s' (%.200s) is not from a registry allowed on profile '%.64s'",
                     image, norm, profile ? profile : "");
            return -1;
        }
    }
    if (json_is_true(json_object_get(pol, "require_digest")) && !has_digest(norm)) {
        snprintf(msg, msglen, "profile '%.64s' requires images pinned by digest (NAME@sha256:<64 hex>); got '%.200s'",
                 profile ? profile : "", image);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ addresses */

struct range {
    int family;
    unsigned char net[16];
    int bits;
    const char *what;
};

static int in_prefix(const unsigned char *a, const unsigned char *net, int bits)
{
    int full = bits / 8, rest = bits % 8;
    if (memcmp(a, net, (size_t)full) != 0)
        return 0;
    if (rest == 0)
        return 1;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return (a[full] & mask) == (net[full] & mask);
}

const char *k8s_addr_refused(int family, const unsigned char *a)
{
    static const struct range v4[] = {
        {AF_INET, {0, 0, 0, 0}, 8, "unspecified (0.0.0.0/8)"},
        {AF_INET, {10, 0, 0, 0}, 8, "private (10.0.0.0/8)"},
        {AF_INET, {100, 64, 0, 0}, 10, "CGNAT (100.64.0.0/10)"},
        {AF_INET, {127, 0, 0, 0}, 8, "loopback (127.0.0.0/8)"},
        {AF_INET, {169, 254, 0, 0}, 16, "link-local/metadata (169.254.0.0/16)"},
        {AF_INET, {172, 16, 0, 0}, 12, "private (172.16.0.0/12)"},
        {AF_INET, {192, 0, 0, 0}, 24, "IETF protocol assignments (192.0.0.0/24)"},
        {AF_INET, {192, 168, 0, 0}, 16, "private (192.168.0.0/16)"},
        {AF_INET, {224, 0, 0, 0}, 4, "multicast (224.0.0.0/4)"},
        {AF_INET, {240, 0, 0, 0}, 4, "reserved/broadcast (240.0.0.0/4)"},
    };
    static const struct range v6[] = {
        {AF_INET6, {0}, 128, "unspecified (::/128)"},
        {AF_INET6, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 128, "loopback (::1/128)"},
        {AF_INET6, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 96, "IPv4-mapped (::ffff:0:0/96)"},
        {AF_INET6, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 96, "IPv4-compatible (::/96)"},
        {AF_INET6, {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0}, 96, "NAT64 (64:ff9b::/96)"},
        {AF_INET6, {0x20, 0x02}, 16, "6to4 (2002::/16)"},
        {AF_INET6, {0xfc}, 7, "unique local (fc00::/7)"},
        {AF_INET6, {0xfe, 0x80}, 10, "link-local (fe80::/10)"},
        {AF_INET6, {0xfe, 0xc0}, 10, "site-local (fec0::/10)"},
        {AF_INET6, {0xff}, 8, "multicast (ff00::/8)"},
    };
    const struct range *t = family == AF_INET ? v4 : v6;
    size_t n = family == AF_INET ? sizeof v4 / sizeof v4[0] : sizeof v6 / sizeof v6[0];
    for (size_t i = 0; i < n; i++)
        if (in_prefix(a, t[i].net, t[i].bits))
            return t[i].what;
    return NULL;
}

/* "a.b.c.d/n" or "v6/n" (or a bare address) -> family, network, bits. */
int k8s_cidr_parse(const char *cidr, int *family, unsigned char net[16], int *bits)
{
    char buf[80];
    if (!cidr || strlen(cidr) >= sizeof buf)
        return -1;
    snprintf(buf, sizeof buf, "%s", cidr);
    char *slash = strchr(buf, '/');
    long b = -1;
    if (slash) {
        char *end;
        *slash = '\0';
        b = strtol(slash + 1, &end, 10);
        if (end == slash + 1 || *end)
            return -1;
    }
    *family = strchr(buf, ':') ? AF_INET6 : AF_INET;
    memset(net, 0, 16);
    if (inet_pton(*family, buf, net) != 1)
        return -1;
    int max = *family == AF_INET ? 32 : 128;
    if (b < 0)
        b = max;
    if (b > max)
        return -1;
    *bits = (int)b;
    return 0;
}

int k8s_cidrs_contain(const json_t *cidrs, int family, const unsigned char *a)
{
    size_t i;
    const json_t *v;
    json_array_foreach(cidrs, i, v) {
        int f, bits;
        unsigned char net[16];
        if (k8s_cidr_parse(json_string_value(v), &f, net, &bits) == 0 && f == family &&
            in_prefix(a, net, bits))
            return 1;
    }
    return 0;
}

const json_t *k8s_profile_private_cidrs(const struct k8s_cfg *c, const char *profile)
{
    const json_t *pp = profile_policy(c, profile);
    const json_t *v = pp ? json_object_get(pp, "egress_private_cidrs") : NULL;
    return json_is_array(v) ? v : NULL;
}

/* ------------------------------------------------------------ config */

static int images_policy_check(const json_t *pol, const char *where, char *msg, size_t msglen)
{
    if (!json_is_object(pol)) {
        snprintf(msg, msglen, "%s: expected a map {registries, require_digest}", where);
        return -1;
    }
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)pol, k, v) {
        if (strcmp(k, "registries") == 0) {
            if (!json_is_array(v)) {
                snprintf(msg, msglen, "%s.registries: expected a list of registry prefixes", where);
                return -1;
            }
            size_t i;
            const json_t *r;
            json_array_foreach(v, i, r) {
                const char *s = json_string_value(r);
                const char *sl = s ? strchr(s, '/') : NULL;
                size_t hl = s ? (sl ? (size_t)(sl - s) : strlen(s)) : 0;
                if (!s || !ref_chars_ok(s) || strchr(s, '@') || !is_domain(s, hl)) {
                    snprintf(msg, msglen,
                             "%s.registries[%zu]: expected a registry host with an optional path"
                             " (e.g. ghcr.io/acme or docker.io/library)", where, i);
                    return -1;
                }
                for (size_t j = 0; j < hl; j++)
                    if (isupper((unsigned char)s[j])) {
                        snprintf(msg, msglen, "%s.registries[%zu]: write the registry host in lower case", where, i);
                        return -1;
                    }
            }
        } else if (strcmp(k, "require_digest") == 0) {
            if (!json_is_boolean(v)) {
                snprintf(msg, msglen, "%s.require_digest: expected true or false", where);
                return -1;
            }
        } else {
            snprintf(msg, msglen, "%s: unknown key '%s' (registries, require_digest)", where, k);
            return -1;
        }
    }
    return 0;
}

int k8s_policy_load(struct k8s_cfg *c, const json_t *cfg, char *msg, size_t msglen)
{
    const json_t *im = cfg ? json_object_get(cfg, "images") : NULL;
    if (im) {
        if (images_policy_check(im, "images", msg, msglen) < 0)
            return -1;
        c->images = json_deep_copy(im);
    }
    const json_t *pr = cfg ? json_object_get(cfg, "profiles") : NULL;
    if (!pr)
        return 0;
    if (!json_is_object(pr)) {
        snprintf(msg, msglen, "profiles: expected a map of profile name -> {images, egress_private_cidrs}");
        return -1;
    }
    const char *name;
    const json_t *p;
    json_object_foreach((json_t *)pr, name, p) {
        char where[160];
        snprintf(where, sizeof where, "profiles.%.64s", name);
        if (!json_is_object(p)) {
            snprintf(msg, msglen, "%s: expected a map {images, egress_private_cidrs}", where);
            return -1;
        }
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)p, k, v) {
            if (strcmp(k, "images") == 0) {
                char w2[200];
                snprintf(w2, sizeof w2, "%s.images", where);
                if (images_policy_check(v, w2, msg, msglen) < 0)
                    return -1;
            } else if (strcmp(k, "egress_private_cidrs") == 0) {
                if (!json_is_array(v)) {
                    snprintf(msg, msglen, "%s.egress_private_cidrs: expected a list of CIDRs", where);
                    return -1;
                }
                size_t i;
                const json_t *x;
                json_array_foreach(v, i, x) {
                    int f, bits;
                    unsigned char net[16];
                    if (k8s_cidr_parse(json_string_value(x), &f, net, &bits) < 0) {
                        snprintf(msg, msglen, "%s.egress_private_cidrs[%zu]: not a CIDR", where, i);
                        return -1;
                    }
                }
            } else {
                snprintf(msg, msglen, "%s: unknown key '%s' (images, egress_private_cidrs)", where, k);
                return -1;
            }
        }
    }
    c->profiles = json_deep_copy(pr);
    return c->profiles ? 0 : -1;
}
