/* Small helpers of the PostgreSQL plugin: uuids, time, base64, cells. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "pg.h"

int eai_pg_uuid_valid(const char *s)
{
    if (!s || strlen(s) != 36)
        return 0;
    for (int i = 0; i < 36; i++) {
        char c = s[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-')
                return 0;
        } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
            return 0;
        }
    }
    return 1;
}

void eai_pg_uuid_v4(char out[37])
{
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof(b)) {
        ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            abort();   /* no entropy source: nothing sensible to do */
        }
        got += (size_t)n;
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

int eai_pg_exec_uuid(const char *id, char out[37])
{
    if (!id || strncmp(id, "sbx_", 4) != 0 || !eai_pg_uuid_valid(id + 4))
        return -1;
    for (int i = 0; i < 37; i++) {
        char c = id[4 + i];
        out[i] = (c >= 'A' && c <= 'F') ? (char)(c - 'A' + 'a') : c;
    }
    return 0;
}

static const char eai_pg_b64tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *eai_pg_b64_encode(const unsigned char *d, size_t n)
{
    size_t olen = 4 * ((n + 2) / 3) + 1;
    char *o = malloc(olen), *p = o;
    if (!o)
        return NULL;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
        *p++ = eai_pg_b64tab[v >> 18 & 63];
        *p++ = eai_pg_b64tab[v >> 12 & 63];
        *p++ = eai_pg_b64tab[v >> 6 & 63];
        *p++ = eai_pg_b64tab[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0);
        *p++ = eai_pg_b64tab[v >> 18 & 63];
        *p++ = eai_pg_b64tab[v >> 12 & 63];
        *p++ = i + 1 < n ? eai_pg_b64tab[v >> 6 & 63] : '=';
        *p++ = '=';
    }
    *p = '\0';
    return o;
}

static int eai_pg_b64val(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

unsigned char *eai_pg_b64_decode(const char *s, size_t *outlen)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '='))
        n--;
    if (n % 4 == 1)
        return NULL;
    unsigned char *o = malloc(n * 3 / 4 + 1);
    if (!o)
        return NULL;
    size_t j = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = eai_pg_b64val(s[i]);
        if (v < 0) {
            free(o);
            return NULL;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[j++] = (unsigned char)(acc >> bits & 0xff);
        }
    }
    *outlen = j;
    return o;
}

json_t *eai_pg_cell_json(const PGresult *r, int row, int col)
{
    if (PQgetisnull(r, row, col))
        return json_null();
    return json_loadb(PQgetvalue(r, row, col), (size_t)PQgetlength(r, row, col),
                      JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
}

json_t *eai_pg_cell_str(const PGresult *r, int row, int col)
{
    if (PQgetisnull(r, row, col))
        return json_null();
    return json_stringn(PQgetvalue(r, row, col), (size_t)PQgetlength(r, row, col));
}

json_t *eai_pg_cell_int(const PGresult *r, int row, int col)
{
    if (PQgetisnull(r, row, col))
        return json_null();
    return json_integer((json_int_t)strtoll(PQgetvalue(r, row, col), NULL, 10));
}

json_t *eai_pg_cell_bool(const PGresult *r, int row, int col)
{
    if (PQgetisnull(r, row, col))
        return json_null();
    return json_boolean(PQgetvalue(r, row, col)[0] == 't');
}

json_t *eai_pg_cell_time(const PGresult *r, int row, int col)
{
    if (PQgetisnull(r, row, col))
        return json_null();
    char buf[32];
    eai_time_rfc3339((int64_t)strtoll(PQgetvalue(r, row, col), NULL, 10), buf);
    return json_string(buf);
}

char *eai_pg_dump(const json_t *v)
{
    return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
}

const char *eai_pg_i64(int64_t v, char buf[24])
{
    snprintf(buf, 24, "%" PRId64, v);
    return buf;
}

