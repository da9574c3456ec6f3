/*
 * Collected files, the backend's side (docs/kubernetes.md "Collected
 * files"): the caps a job's collect sidecar gets, the log size they may
 * take, and the parser of what k8s_collector.c printed.  No I/O, no host
 * API: unit-tested in tests/k8s/test_k8s_ranges.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s.h"

void k8s_collect_caps(const struct eai_iso_job *job, int64_t *files, int64_t *file_bytes, int64_t *total_bytes)
{
    /* plugins/common/pc_collect.c's defaults when core gives none */
    *files = job->collect_max_files > 0 ? job->collect_max_files : 100;
    *file_bytes = job->collect_max_file_bytes > 0 ? job->collect_max_file_bytes : 10LL << 20;
    *total_bytes = job->collect_max_total_bytes > 0 ? job->collect_max_total_bytes : 50LL << 20;
}

int64_t k8s_collect_log_bytes(int64_t files, int64_t file_bytes, int64_t total_bytes)
{
    (void)file_bytes;
    /* header and end lines; per file a base64 path (<= 4096 bytes: 5464),
     * its size and separators; the data in base64 */
    return 128 + files * (5464 + 32) + (total_bytes + 2) / 3 * 4 + files * 4;
}

static int b64v(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Strict padded base64 of exactly n chars; malloc'd (+1 NUL), NULL when invalid. */
static unsigned char *b64_dec(const char *s, size_t n, size_t *outlen)
{
    if (n % 4)
        return NULL;
    unsigned char *o = malloc(n / 4 * 3 + 1);
    if (!o)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int q = 0; q < 4; q++) {
            if (s[i + q] == '=' && i + 4 == n && q >= 2) {
                v[q] = 0;
                pad++;
            } else if ((v[q] = b64v((unsigned char)s[i + q])) < 0 || pad) {
                free(o);
                return NULL;
            }
        }
        unsigned w = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 | (unsigned)v[2] << 6 | (unsigned)v[3];
        o[k++] = (unsigned char)(w >> 16);
        if (pad < 2)
            o[k++] = (unsigned char)(w >> 8);
        if (pad < 1)
            o[k++] = (unsigned char)w;
    }
    o[k] = '\0';
    *outlen = k;
    return o;
}

void k8s_collect_free(struct eai_iso_collected *files, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(files[i].path);
        free(files[i].data);
    }
    free(files);
}

int k8s_collect_parse(const char *body, size_t len, struct eai_iso_collected **files, size_t *nfiles,
                      int *truncated, char *msg, size_t msglen)
{
    const char *p = body, *end = body + len;
    const char *nl = len ? memchr(p, '\n', len) : NULL;
    unsigned long n = 0;
    int trunc = 0;
    char head[64];
    *files = NULL;
    *nfiles = 0;
    *truncated = 0;
    if (nl && (size_t)(nl - p) < sizeof head) {
        memcpy(head, p, (size_t)(nl - p));
        head[nl - p] = '\0';
    }
    if (!nl || (size_t)(nl - p) >= sizeof head || sscanf(head, "EAI-COLLECT 1 %lu %d", &n, &trunc) != 2 ||
        n > 1000000) {
        snprintf(msg, msglen, "the collector printed no header");
        return -1;
    }
    p = nl + 1;
    struct eai_iso_collected *f = n ? calloc(n, sizeof *f) : NULL;
    if (n && !f) {
        snprintf(msg, msglen, "out of memory");
        return -1;
    }
    *files = f;
    for (unsigned long i = 0; i < n; i++) {
        nl = p < end ? memchr(p, '\n', (size_t)(end - p)) : NULL;
        const char *sp1 = nl ? memchr(p, ' ', (size_t)(nl - p)) : NULL;
        const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(nl - sp1 - 1)) : NULL;
        if (!nl) {
            snprintf(msg, msglen, "the collector's output ends after %lu of %lu files (log cut short?)", i, n);
            return -1;
        }
        size_t plen = 0, dlen = 0;
        unsigned char *path = sp2 ? b64_dec(p, (size_t)(sp1 - p), &plen) : NULL;
        unsigned char *data = sp2 ? b64_dec(sp2 + 1, (size_t)(nl - sp2 - 1), &dlen) : NULL;
        char *stop = NULL;
        unsigned long long want = sp2 ? strtoull(sp1 + 1, &stop, 10) : 0;
        if (!path || !data || stop != sp2 || want != dlen || !plen || memchr(path, 0, plen)) {
            free(path);
            free(data);
            snprintf(msg, msglen, "the collector's line %lu is malformed", i + 1);
            return -1;
        }
        f[i].path = (char *)path;
        f[i].data = data;
        f[i].len = dlen;
        (*nfiles)++;
        p = nl + 1;
    }
    if ((size_t)(end - p) < 16 || strncmp(p, "EAI-COLLECT-END\n", 16) != 0) {
        snprintf(msg, msglen, "the collector's output has no end line");
        return -1;
    }
    *truncated = trunc != 0;
    return 0;
}
