/* eaibase: clocks and RFC 3339 times (eaibase.h). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "eaibase.h"

int64_t eai_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t eai_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t eai_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t eai_monotonic_ms(void)
{
    return eai_monotonic_ns() / 1000000;
}

void eai_time_rfc3339(int64_t ms, char out[32])
{
    int64_t sec = ms / 1000, frac = ms % 1000;
    if (frac < 0) { /* before 1970: floor, not truncation */
        frac += 1000;
        sec--;
    }
    time_t s = (time_t)sec;
    struct tm tm;
    gmtime_r(&s, &tm);
    snprintf(out, 32, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, (int)frac);
}

/* n decimal digits at s into *out; -1 on anything else (no sign, no space). */
static int digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

int eai_time_parse_rfc3339(const char *s, int64_t *ms)
{
    int Y, M, D, h, m, sec;
    if (!s || strnlen(s, 20) < 20 || digits(s, 4, &Y) < 0 || s[4] != '-' || digits(s + 5, 2, &M) < 0 ||
        s[7] != '-' || digits(s + 8, 2, &D) < 0 || (s[10] != 'T' && s[10] != 't') || digits(s + 11, 2, &h) < 0 ||
        s[13] != ':' || digits(s + 14, 2, &m) < 0 || s[16] != ':' || digits(s + 17, 2, &sec) < 0)
        return -1;
    if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60)
        return -1;
    const char *p = s + 19;
    int frac_ms = 0;
    if (*p == '.') {
        int nd = 0;
        p++;
        while (*p >= '0' && *p <= '9') {
            if (nd < 3)
                frac_ms = frac_ms * 10 + (*p - '0');
            nd++;
            p++;
        }
        if (nd == 0)
            return -1;
        for (int i = nd; i < 3; i++)
            frac_ms *= 10;
    }
    int off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om;
        if (digits(p + 1, 2, &oh) < 0 || p[3] != ':' || digits(p + 4, 2, &om) < 0 || oh > 23 || om > 59)
            return -1;
        off = (oh * 60 + om) * (*p == '+' ? 1 : -1);
        p += 6;
    } else {
        return -1;
    }
    if (*p)
        return -1;
    struct tm tm = {0};
    tm.tm_year = Y - 1900;
    tm.tm_mon = M - 1;
    tm.tm_mday = D;
    tm.tm_hour = h;
    tm.tm_min = m;
    tm.tm_sec = sec;
    time_t t = timegm(&tm);
    *ms = ((int64_t)t - off * 60) * 1000 + frac_ms;
    return 0;
}
