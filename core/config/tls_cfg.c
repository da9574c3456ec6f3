/* server.tls: the listener's certificate, key and optional client CA
 * (docs/configuration.md "TLS"; the listener side is http/tls.c). */
#include <stdlib.h>

#include "config/cfg_read.h"
#include "config/config.h"
#include "base/errors.h"

int eai_cfg_server_tls(struct eai_config *c, const char *file, const char *path, const json_t *v,
                       struct eai_error **err)
{
    static const char *const k[] = {"cert", "key", "client_ca", NULL};
    char p[128];
    if (!v || json_is_null(v))
        return 0;
    if (eai_cfg_need_object(file, path, "tls", v, err) < 0)
        return -1;
    eai_cfg_child_path(p, sizeof p, path, "tls");
    if (eai_cfg_check_keys(file, p, v, k, err) < 0 || eai_cfg_get_string(file, p, v, "cert", &c->tls_cert, err) < 0 ||
        eai_cfg_get_string(file, p, v, "key", &c->tls_key, err) < 0 ||
        eai_cfg_get_string(file, p, v, "client_ca", &c->tls_client_ca, err) < 0)
        return -1;
    if (!c->tls_cert != !c->tls_key)
        return eai_cfg_fail(err, file, p, c->tls_cert ? "key" : "cert", "cert and key go together");
    if (c->tls_client_ca && !c->tls_cert)
        return eai_cfg_fail(err, file, p, "client_ca", "needs cert and key");
    return 0;
}
