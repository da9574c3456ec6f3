/* Request line and header block checks before evhttp (see http_head.h). */
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "http/http_head.h"

/* RFC 9110 tchar: digits, letters and !#$%&'*+-.^_`|~ (a table: every
 * request head goes through here) */
static const unsigned char tchar_tab[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 0,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0,
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};
static int tchar(unsigned char ch) { return tchar_tab[ch]; }

/* The run of bytes from p (avail of them readable) up to the first one
 * below lim or 0x7f: sixteen bytes at once with SSE2, else a word of eight
 * is skipped whole when it has no such byte.  Every request head goes
 * through here (its target and each header value). */
#ifdef __SSE2__
static size_t ctl_span(const char *p, size_t avail, unsigned char lim)
{
    const __m128i low = _mm_set1_epi8((char)lim), del = _mm_set1_epi8(0x7f);
    size_t i = 0;
    for (; i + 16 <= avail; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
        int at_least = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(v, low), v)); /* v >= lim, unsigned */
        int stop = (at_least ^ 0xffff) | _mm_movemask_epi8(_mm_cmpeq_epi8(v, del));
        if (stop)
            return i + (size_t)__builtin_ctz((unsigned)stop);
    }
    while (i < avail && (unsigned char)p[i] >= lim && p[i] != 0x7f)
        i++;
    return i;
}
#else
/* The test may say yes for a word that has none (a borrow), never no for
 * one that has one; the byte loop then decides. */
#define ONES  0x0101010101010101ull
#define HIGHS 0x8080808080808080ull
/* some byte below n (n <= 128), or some byte 0x7f */
static int maybe_ctl(uint64_t w, unsigned n)
{
    uint64_t d = w ^ (ONES * 0x7f);
    return (((w - ONES * n) & ~w) | ((d - ONES) & ~d)) & HIGHS ? 1 : 0;
}

static size_t ctl_span(const char *p, size_t avail, unsigned char lim)
{
    size_t i = 0;
    for (;;) {
        uint64_t w;
        while (i + 8 <= avail && (memcpy(&w, p + i, 8), !maybe_ctl(w, lim)))
            i += 8;
        size_t e = i + 8 < avail ? i + 8 : avail;
        for (; i < e; i++)
            if ((unsigned char)p[i] < lim || p[i] == 0x7f)
                return i;
        if (i >= avail)
            return i;
    }
}
#endif

static const char *const served[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", NULL};

/* One request line (without its line end; room: the bytes readable from l,
 * its line end among them). */
static enum eai_code check_request_line(const char *l, size_t n, size_t room)
{
    size_t m = 0;
    while (m < n && tchar((unsigned char)l[m]))
        m++;
    if (m == 0 || m >= n || l[m] != ' ')
        return EAI_E_BAD_REQUEST;
    size_t t = m + 1, te = t + ctl_span(l + t, room - t, 0x21);
    if (te > n)
        te = n;
    if (te == t || te >= n || l[te] != ' ')
        return EAI_E_BAD_REQUEST;
    const char *v = l + te + 1;
    size_t vn = n - te - 1;
    if (vn != 8 || memcmp(v, "HTTP/1.", 7) != 0 || (v[7] != '0' && v[7] != '1'))
        return EAI_E_BAD_REQUEST;
    if (l[t] != '/' && l[t] != '*' && !(te - t > 7 && (!memcmp(l + t, "http://", 7) || !memcmp(l + t, "https://", 8))))
        return EAI_E_BAD_REQUEST;
    for (const char *const *s = served; *s; s++)
        if (strlen(*s) == m && memcmp(*s, l, m) == 0)
            return EAI_OK;
    return EAI_E_METHOD_NOT_ALLOWED;
}

/* One header field line (without its line end; room as above). */
static enum eai_code check_field(const char *l, size_t n, size_t room)
{
    if (n == 0)
        return EAI_OK;
    if (l[0] == ' ' || l[0] == '\t')
        return EAI_E_BAD_REQUEST; /* obsolete line folding (RFC 9112 5.2) */
    size_t c = 0;
    while (c < n && tchar((unsigned char)l[c]))
        c++;
    if (c == 0 || c >= n || l[c] != ':')
        return EAI_E_BAD_REQUEST;
    /* the value: no control byte but tab */
    for (size_t i = c + 1;; i++) {
        i += ctl_span(l + i, room - i, 0x20);
        if (i >= n)
            return EAI_OK;
        if (l[i] != '\t')
            return EAI_E_BAD_REQUEST;
    }
}

enum eai_code eai_http_head_check(const char *acc, size_t len, int done, size_t max_header_bytes)
{
    size_t p = 0;
    /* RFC 9112 2.2: at least one empty line before the request line is ignored */
    while (p < len && (acc[p] == '\r' || acc[p] == '\n'))
        p++;
    const char *nl = memchr(acc + p, '\n', len - p);
    if (!nl)
        return len - p > EAI_HTTP_MAX_REQUEST_LINE ? EAI_E_URI_TOO_LONG : EAI_OK;
    size_t ll = (size_t)(nl - (acc + p));
    size_t body = ll && acc[p + ll - 1] == '\r' ? ll - 1 : ll;
    if (ll > EAI_HTTP_MAX_REQUEST_LINE)
        return EAI_E_URI_TOO_LONG;
    if (memchr(acc + p, '\0', body))
        return EAI_E_BAD_REQUEST;
    enum eai_code rc = check_request_line(acc + p, body, len - p);
    if (rc != EAI_OK)
        return rc;
    /* header fields: complete lines only, the last one may still grow */
    size_t q = (size_t)(nl - acc) + 1, fields = 0, bytes = 0;
    while (q < len) {
        const char *e = memchr(acc + q, '\n', len - q);
        size_t n = e ? (size_t)(e - (acc + q)) : len - q;
        bytes += n + 1;
        if (bytes > max_header_bytes)
            return EAI_E_HEADERS_TOO_LARGE;
        if (!e)
            break;
        size_t fn = n && acc[q + n - 1] == '\r' ? n - 1 : n;
        if (fn == 0)
            break; /* the blank line: the head is complete */
        if (++fields > EAI_HTTP_MAX_HEADERS)
            return EAI_E_HEADERS_TOO_LARGE;
        if ((rc = check_field(acc + q, fn, len - q)) != EAI_OK)
            return rc;
        q += n + 1;
    }
    (void)done;
    return EAI_OK;
}
