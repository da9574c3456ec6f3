/* Who may read /metrics and the details of /readyz (ops_access.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <strings.h>

#include <event2/http.h>
#include <openssl/crypto.h>

#include "http/ops_access.h"
#include "base/errors.h"
#include "base/util.h"
#include "config/config.h"
#include "http/request.h"
#include "http/request_int.h"

int eai_ops_access_parse(const char *s)
{
    if (!s || !strcmp(s, "loopback"))
        return EAI_OPS_LOOPBACK;
    if (!strcmp(s, "token"))
        return EAI_OPS_TOKEN;
    if (!strcmp(s, "open"))
        return EAI_OPS_OPEN;
    return -1;
}

int eai_ops_token_load(struct eai_app *app, const struct eai_config *cfg, struct eai_error **err)
{
    app->ops_token[0] = '\0';
    if (!cfg->ops_token_file) {
        if (cfg->ops_access == EAI_OPS_TOKEN)
            return eai_error_set(err, EAI_E_VALIDATION_FAILED,
                                 "ops.access is token but no ops.token_file (EAI_OPS_TOKEN_FILE) is set");
        return 0;
    }
    FILE *f = fopen(cfg->ops_token_file, "re");
    if (!f)
        return eai_error_set_sys(err, EAI_E_VALIDATION_FAILED, errno, "ops token file %s: %s", cfg->ops_token_file,
                                 strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 077)) {
        fclose(f);
        return eai_error_set(err, EAI_E_VALIDATION_FAILED,
                             "ops token file %s: must be a regular file readable by its owner only (chmod 600)",
                             cfg->ops_token_file);
    }
    char *got = fgets(app->ops_token, sizeof app->ops_token, f);
    fclose(f);
    size_t n = got ? strcspn(app->ops_token, "\r\n") : 0;
    app->ops_token[n] = '\0';
    if (n < 16) {
        explicit_bzero(app->ops_token, sizeof app->ops_token);
        return eai_error_set(err, EAI_E_VALIDATION_FAILED,
                             "ops token file %s: expected one line of at least 16 characters", cfg->ops_token_file);
    }
    return 0;
}

int eai_sockaddr_loopback(const struct sockaddr *sa)
{
    if (!sa)
        return 0;
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return 1;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return 0;
}

/* The request carries "Bearer <ops token>" (compared in constant time on
 * the SHA-256 of both). */
static int has_token(const struct eai_app *app, struct eai_req *r)
{
    if (!app->ops_token[0])
        return 0;
    const char *h = eai_req_header(r, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return 0;
    h += 7;
    while (*h == ' ')
        h++;
    size_t n = strlen(h);
    while (n && h[n - 1] == ' ')
        n--;
    char a[65], b[65];
    eai_sha256_hex(h, n, a);
    eai_sha256_hex(app->ops_token, strlen(app->ops_token), b);
    return CRYPTO_memcmp(a, b, 64) == 0;
}

int eai_ops_allowed(const struct eai_app *app, struct eai_req *r)
{
    int mode = app->cfg ? app->cfg->ops_access : EAI_OPS_LOOPBACK;
    if (mode == EAI_OPS_OPEN || has_token(app, r))
        return 1;
    if (mode == EAI_OPS_TOKEN)
        return 0;
    struct evhttp_connection *c = r->evreq ? evhttp_request_get_connection(r->evreq) : NULL;
    return c && eai_sockaddr_loopback(evhttp_connection_get_addr(c));
}
