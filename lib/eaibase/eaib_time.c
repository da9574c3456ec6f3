/* eaibase: clocks and RFC 3339 times (eaibase.h). */
#include <stdio.h>
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
