/* TLS on the listener (see tls.h). */
#include <stdio.h>
#include <stdlib.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <event2/bufferevent_ssl.h>

#include "http/tls.h"
#include "base/log.h"

struct eai_tls {
    SSL_CTX *ctx;
};

/* The first OpenSSL error, as text. */
static const char *ossl_why(char *buf, size_t len)
{
    unsigned long e = ERR_peek_last_error();
    if (!e)
        return "unknown error";
    ERR_error_string_n(e, buf, len);
    ERR_clear_error();
    return buf;
}

int eai_tls_server_new(const struct eai_config *cfg, struct eai_tls **out, struct eai_error **err)
{
    char why[256];
    *out = NULL;
    if (!cfg->tls_cert)
        return 0;
    struct eai_tls *t = calloc(1, sizeof *t);
    if (!t)
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    t->ctx = SSL_CTX_new(TLS_server_method());
    if (!t->ctx) {
        free(t);
        return eai_error_set(err, EAI_E_INTERNAL, "server.tls: SSL_CTX_new: %s", ossl_why(why, sizeof why));
    }
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(t->ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_OFF);
    int rc = 0;
    if (SSL_CTX_use_certificate_chain_file(t->ctx, cfg->tls_cert) != 1)
        rc = eai_error_set(err, EAI_E_VALIDATION_FAILED, "server.tls.cert %s: %s", cfg->tls_cert,
                           ossl_why(why, sizeof why));
    else if (SSL_CTX_use_PrivateKey_file(t->ctx, cfg->tls_key, SSL_FILETYPE_PEM) != 1)
        rc = eai_error_set(err, EAI_E_VALIDATION_FAILED, "server.tls.key %s: %s", cfg->tls_key,
                           ossl_why(why, sizeof why));
    else if (SSL_CTX_check_private_key(t->ctx) != 1)
        rc = eai_error_set(err, EAI_E_VALIDATION_FAILED, "server.tls: the key does not match the certificate");
    if (rc == 0 && cfg->tls_client_ca) {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(cfg->tls_client_ca);
        if (!names || SSL_CTX_load_verify_locations(t->ctx, cfg->tls_client_ca, NULL) != 1) {
            if (names)
                sk_X509_NAME_pop_free(names, X509_NAME_free);
            rc = eai_error_set(err, EAI_E_VALIDATION_FAILED, "server.tls.client_ca %s: %s", cfg->tls_client_ca,
                               ossl_why(why, sizeof why));
        } else {
            SSL_CTX_set_client_CA_list(t->ctx, names);
            SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
            SSL_CTX_set_verify_depth(t->ctx, 8);
        }
    }
    if (rc < 0) {
        eai_tls_free(t);
        return -1;
    }
    eai_log("http", EAI_LOG_INFO, "TLS on the listener (1.2+), certificate %s%s%s", cfg->tls_cert,
            cfg->tls_client_ca ? ", client certificates required from " : "",
            cfg->tls_client_ca ? cfg->tls_client_ca : "");
    *out = t;
    return 0;
}

void eai_tls_free(struct eai_tls *t)
{
    if (!t)
        return;
    SSL_CTX_free(t->ctx);
    free(t);
}

struct bufferevent *eai_tls_bev_new(struct eai_tls *t, struct event_base *base)
{
    SSL *ssl = SSL_new(t->ctx);
    if (!ssl)
        return NULL;
    struct bufferevent *bev =
        bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
    if (!bev)
        return NULL; /* freed ssl on failure */
    /* clients that close without close_notify are not an error here */
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}
