#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"

/* Append only; never reuse a name.  docs/errors.md is generated from this
 * table by `eaid errors --markdown`. */
static const struct eai_code_info eai_codes[EAI_CODE_MAX] = {
    [EAI_OK] = {EAI_OK, "ok", 200, 0, "OK", "OK"},
    [EAI_E_INVALID_JSON] = {EAI_E_INVALID_JSON, "invalid_json", 400, 0,
        "The request body is not valid JSON", "Le corps de la requête n'est pas du JSON valide"},
    [EAI_E_VALIDATION_FAILED] = {EAI_E_VALIDATION_FAILED, "validation_failed", 422, 0,
        "The request is invalid", "La requête est invalide"},
    [EAI_E_LIMIT_EXCEEDED] = {EAI_E_LIMIT_EXCEEDED, "limit_exceeded", 422, 0,
        "A limit exceeds the profile's maximum", "Une limite dépasse le maximum du profil"},
    [EAI_E_EGRESS_NOT_ALLOWED] = {EAI_E_EGRESS_NOT_ALLOWED, "egress_not_allowed", 422, 0,
        "Network egress is not allowed by the profile", "L'accès réseau sortant n'est pas autorisé par le profil"},
    [EAI_E_UNKNOWN_PROFILE] = {EAI_E_UNKNOWN_PROFILE, "unknown_profile", 422, 0,
        "Unknown sandbox profile", "Profil de bac à sable inconnu"},
    [EAI_E_UNKNOWN_IMAGE] = {EAI_E_UNKNOWN_IMAGE, "unknown_image", 422, 0,
        "Unknown image", "Image inconnue"},
    [EAI_E_UNAUTHENTICATED] = {EAI_E_UNAUTHENTICATED, "unauthenticated", 401, 0,
        "Missing or invalid API key", "Clé d'API absente ou invalide"},
    [EAI_E_FORBIDDEN] = {EAI_E_FORBIDDEN, "forbidden", 403, 0,
        "This action is not allowed", "Cette action n'est pas autorisée"},
    [EAI_E_NOT_FOUND] = {EAI_E_NOT_FOUND, "not_found", 404, 0,
        "Execution not found", "Exécution introuvable"},
    [EAI_E_ALREADY_FINISHED] = {EAI_E_ALREADY_FINISHED, "already_finished", 409, 0,
        "The execution has already finished", "L'exécution est déjà terminée"},
    [EAI_E_IDEMPOTENCY_CONFLICT] = {EAI_E_IDEMPOTENCY_CONFLICT, "idempotency_conflict", 409, 0,
        "This Idempotency-Key was used with a different request",
        "Cette clé d'idempotence a été utilisée avec une autre requête"},
    [EAI_E_PAYLOAD_TOO_LARGE] = {EAI_E_PAYLOAD_TOO_LARGE, "payload_too_large", 413, 0,
        "The request body is too large", "Le corps de la requête est trop volumineux"},
    [EAI_E_UNSUPPORTED_MEDIA_TYPE] = {EAI_E_UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", 415, 0,
        "Unsupported media type", "Type de média non pris en charge"},
    [EAI_E_RATE_LIMITED] = {EAI_E_RATE_LIMITED, "rate_limited", 429, 1,
        "Too many requests, retry later", "Trop de requêtes, réessayez plus tard"},
    [EAI_E_SANDBOX_UNAVAILABLE] = {EAI_E_SANDBOX_UNAVAILABLE, "sandbox_unavailable", 503, 1,
        "No sandbox runtime is available; the code was not run",
        "Aucun environnement d'isolation n'est disponible ; le code n'a pas été exécuté"},
    [EAI_E_STORAGE_UNAVAILABLE] = {EAI_E_STORAGE_UNAVAILABLE, "storage_unavailable", 503, 1,
        "Storage is unavailable, retry later", "Le stockage est indisponible, réessayez plus tard"},
    [EAI_E_INTERNAL] = {EAI_E_INTERNAL, "internal", 500, 1,
        "Internal error", "Erreur interne"},
    [EAI_E_METHOD_NOT_ALLOWED] = {EAI_E_METHOD_NOT_ALLOWED, "method_not_allowed", 405, 0,
        "Method not allowed on this route", "Méthode non autorisée sur cette route"},
    [EAI_E_INTERRUPTED] = {EAI_E_INTERRUPTED, "interrupted", 500, 1,
        "The server stopped while the execution was running; its result is lost",
        "Le serveur s'est arrêté pendant l'exécution ; son résultat est perdu"},
    [EAI_E_IMAGE_MISSING] = {EAI_E_IMAGE_MISSING, "image_missing", 500, 0,
        "The image was missing when the execution started",
        "L'image était absente au démarrage de l'exécution"},
    [EAI_E_SANDBOX_FAILED] = {EAI_E_SANDBOX_FAILED, "sandbox_failed", 500, 1,
        "The sandbox runtime failed; the code did not complete",
        "L'environnement d'isolation a échoué ; le code ne s'est pas terminé"},
    [EAI_E_CONFLICT] = {EAI_E_CONFLICT, "conflict", 409, 0,
        "The resource already exists or changed", "La ressource existe déjà ou a changé"},
};

const struct eai_code_info *eai_code_info(enum eai_code code)
{
    if ((int)code < 0 || code >= EAI_CODE_MAX || eai_codes[code].name == NULL)
        return &eai_codes[EAI_E_INTERNAL];
    return &eai_codes[code];
}

const char *eai_code_name(enum eai_code code) { return eai_code_info(code)->name; }
int eai_code_http_status(enum eai_code code) { return eai_code_info(code)->http_status; }

enum eai_code eai_code_from_name(const char *name)
{
    for (int i = 0; i < EAI_CODE_MAX; i++)
        if (eai_codes[i].name && name && strcmp(eai_codes[i].name, name) == 0)
            return (enum eai_code)i;
    return EAI_CODE_MAX;
}

const char *eai_code_message(enum eai_code code, const char *lang)
{
    const struct eai_code_info *ci = eai_code_info(code);
    return (lang && strcmp(lang, "fr") == 0) ? ci->fr : ci->en;
}

struct eai_error *eai_error_newv(enum eai_code code, int errno_cause, const char *fmt, va_list ap)
{
    struct eai_error *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->code = code;
    e->errno_cause = errno_cause;
    if (fmt && vasprintf(&e->message, fmt, ap) < 0)
        e->message = NULL;
    return e;
}

struct eai_error *eai_error_new(enum eai_code code, int errno_cause, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    struct eai_error *e = eai_error_newv(code, errno_cause, fmt, ap);
    va_end(ap);
    return e;
}

void eai_error_free(struct eai_error *e)
{
    if (!e)
        return;
    free(e->message);
    json_decref(e->details);
    free(e);
}

void eai_error_prefix(struct eai_error *e, const char *fmt, ...)
{
    if (!e)
        return;
    char *pre = NULL, *joined = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&pre, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (asprintf(&joined, "%s: %s", pre, e->message ? e->message : eai_code_name(e->code)) >= 0) {
        free(e->message);
        e->message = joined;
    }
    free(pre);
}

void eai_error_propagate(struct eai_error **dst, struct eai_error *src)
{
    if (dst)
        *dst = src;
    else
        eai_error_free(src);
}
