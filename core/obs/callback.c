/* Completion callbacks: URL policy, signature, event and view (callback.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obs/callback.h"
#include "base/util.h"


int eai_cb_policy_init(struct eai_cb_policy *p, const json_t *allow, size_t *bad)
{
    memset(p, 0, sizeof *p);
    size_t n = json_array_size(allow);
    if (n == 0)
        return 0;
    p->rules = calloc(n, sizeof *p->rules);
    if (!p->rules)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(allow, i));
        if (!s || eai_egress_rule_parse(s, &p->rules[i]) < 0) {
            if (bad)
                *bad = i;
            eai_cb_policy_free(p);
            return -1;
        }
    }
    p->n = n;
    return 0;
}

void eai_cb_policy_free(struct eai_cb_policy *p)
{
    free(p->rules);
    p->rules = NULL;
    p->n = 0;
}

int eai_cb_url_parse(const char *url, char *host, size_t hostlen, uint16_t *port, int *https)
{
    const char *p;
    if (!url)
        return -1;
    if (strncmp(url, "https://", 8) == 0) {
        *https = 1;
        p = url + 8;
    } else if (strncmp(url, "http://", 7) == 0) {
        *https = 0;
        p = url + 7;
    } else {
        return -1;
    }
    for (const char *c = url; *c; c++)
        if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
            return -1;  /* no spaces, controls or raw non-ASCII */
    size_t alen = strcspn(p, "/?#");
    if (alen == 0 || memchr(p, '@', alen))
        return -1;      /* empty authority, or user info */
    const char *hs = p, *he, *pe = p + alen;
    const char *ps = NULL;
    if (*p == '[') {
        const char *rb = memchr(p, ']', alen);
        if (!rb)
            return -1;
        hs = p + 1;
        he = rb;
        if (rb + 1 < pe) {
            if (rb[1] != ':')
                return -1;
            ps = rb + 2;
        }
    } else {
        const char *colon = memchr(p, ':', alen);
        he = colon ? colon : pe;
        ps = colon ? colon + 1 : NULL;
    }
    size_t hl = (size_t)(he - hs);
    if (hl == 0 || hl >= hostlen)
        return -1;
    for (size_t i = 0; i < hl; i++)
        host[i] = (char)tolower((unsigned char)hs[i]);
    host[hl] = 0;
    if (hl > 1 && host[hl - 1] == '.')
        host[hl - 1] = 0;
    long v = *https ? 443 : 80;
    if (ps) {
        if (ps == pe)
            return -1;
        v = 0;
        for (const char *c = ps; c < pe; c++) {
            if (!isdigit((unsigned char)*c) || v > 65535)
                return -1;
            v = v * 10 + (*c - '0');
        }
        if (v < 1 || v > 65535)
            return -1;
    }
    *port = (uint16_t)v;
    return 0;
}

int eai_cb_addr_ok(const struct eai_cb_policy *p, const struct eai_ip *ip, uint16_t port, int name_allowed)
{
    size_t n = p ? p->n : 0;
    const struct eai_egress_rule *r = p ? p->rules : NULL;
    if (eai_addr_classify(ip) != EAI_ADDR_PUBLIC)
        return eai_egress_addr_match(r, n, ip, port) >= 0;
    /* a public address: the allow list (when set) must name it or hold it */
    return n == 0 || name_allowed || eai_egress_addr_match(r, n, ip, port) >= 0;
}

int eai_cb_url_check(const struct eai_cb_policy *p, const char *url, char *why, size_t whylen)
{
    char host[EAI_CALLBACK_HOST_MAX];
    uint16_t port;
    int https;
    if (eai_cb_url_parse(url, host, sizeof host, &port, &https) < 0) {
        snprintf(why, whylen, "must be an http:// or https:// URL with a host, an optional port and no user "
                              "name or password");
        return -1;
    }
    struct eai_ip ip;
    size_t n = p ? p->n : 0;
    if (eai_ip_parse(host, &ip) == 0) {
        if (eai_cb_addr_ok(p, &ip, port, 0))
            return 0;
        if (eai_addr_classify(&ip) != EAI_ADDR_PUBLIC)
            snprintf(why, whylen, "'%.64s' is a %s address: add '%.64s:%u' (or its range) to callbacks.allow "
                                  "to call it", host, eai_addr_class_name(eai_addr_classify(&ip)), host,
                     (unsigned)port);
        else
            snprintf(why, whylen, "'%.64s:%u' is not in callbacks.allow", host, (unsigned)port);
        return -1;
    }
    char norm[EAI_EGRESS_NAME_MAX + 1];
    if (eai_egress_name_normalize(host, strlen(host), norm, sizeof norm) < 0) {
        snprintf(why, whylen, "'%.64s' is not a valid host name", host);
        return -1;
    }
    size_t nl = strlen(norm);
    if (strcmp(norm, "localhost") == 0 || (nl > 10 && strcmp(norm + nl - 10, ".localhost") == 0)) {
        snprintf(why, whylen, "'%.64s' is a loopback name: use the address (e.g. 127.0.0.1:%u) and add it "
                              "to callbacks.allow", norm, (unsigned)port);
        return -1;
    }
    if (n > 0 && eai_egress_name_match(p->rules, n, norm, port) < 0) {
        snprintf(why, whylen, "'%.64s:%u' is not in callbacks.allow", norm, (unsigned)port);
        return -1;
    }
    return 0;
}

void eai_cb_sign(const char *secret, int64_t t, const char *body, size_t len, char *out)
{
    char ts[24], hex[65];
    int tl = snprintf(ts, sizeof ts, "%lld.", (long long)t);
    size_t total = (size_t)tl + len;
    char *msg = malloc(total + 1);
    if (!msg) {
        out[0] = 0;
        return;
    }
    memcpy(msg, ts, (size_t)tl);
    memcpy(msg + tl, body, len);
    eai_hmac_sha256_hex(secret, strlen(secret), msg, total, hex);
    free(msg);
    snprintf(out, EAI_CALLBACK_SIG_MAX, "t=%lld,v1=%s", (long long)t, hex);
}

int eai_cb_is_callback(const json_t *event)
{
    const char *t = eai_jstr(event, "target");
    return t && strcmp(t, "callback") == 0;
}

json_t *eai_cb_event(const json_t *rec, const json_t *terminal)
{
    const json_t *cb = json_object_get(rec, "callback");
    if (!eai_jstr(cb, "url") || !eai_jstr(cb, "secret"))
        return NULL;
    static const char *const keep[] = {"id", "status", "exit_code", "signal", "error", "usage", "profile",
                                       "image", "tool", "project_id", "agent_id", "run_id", "trace_id",
                                       "created_at", "started_at", "finished_at", "stdout_truncated",
                                       "stderr_truncated", "files", "files_truncated"};
    json_t *x = json_object();
    for (size_t i = 0; x && i < sizeof keep / sizeof keep[0]; i++) {
        const json_t *v = json_object_get(terminal, keep[i]);
        if (!v)
            v = json_object_get(rec, keep[i]);
        json_object_set_new(x, keep[i], v ? json_deep_copy(v) : json_null());
    }
    char id[37], now[32];
    eai_uuid_v4(id);
    eai_time_rfc3339(eai_now_ms(), now);
    json_t *body = x ? json_pack("{s:s, s:s, s:s, s:o}", "id", id, "type", "execution.finished",
                                 "created_at", now, "execution", x)
                     : NULL;
    if (!body)
        return NULL;
    return json_pack("{s:s, s:s, s:s?, s:s?, s:s, s:s, s:o}", "id", id, "target", "callback",
                     "tenant_id", eai_jstr(rec, "tenant_id"), "execution_id", eai_jstr(rec, "id"),
                     "url", eai_jstr(cb, "url"), "secret", eai_jstr(cb, "secret"), "body", body);
}

int64_t eai_cb_backoff_ms(int n, int64_t cap_ms)
{
    if (n <= 0)
        return 0;
    int64_t ms = 1000;
    for (int i = 1; i < n && ms < cap_ms; i++)
        ms *= 2;
    return ms < cap_ms ? ms : cap_ms;
}

json_t *eai_cb_view(const json_t *rec, const char *state)
{
    const json_t *cb = json_object_get(rec, "callback");
    if (!eai_jstr(cb, "url"))
        return NULL;
    json_t *st = state ? json_loads(state, 0, NULL) : NULL;
    const json_t *a = json_object_get(st, "attempts");
    const json_t *ls = json_object_get(st, "last_status");
    const json_t *da = json_object_get(st, "delivered_at");
    json_t *v = json_pack("{s:s, s:I, s:O, s:O}", "url", eai_jstr(cb, "url"),
                          "attempts", (json_int_t)(json_is_integer(a) ? json_integer_value(a) : 0),
                          "last_status", ls ? ls : json_null(), "delivered_at", da ? da : json_null());
    json_decref(st);
    return v;
}
