/* details[].message in French (core/http/details_i18n.c): templates with
 * holes, nested messages, the envelope's details localised by language. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/details_i18n.h"
#include "http/http_util.h"
#include "base/errors.h"
#include "plugin/loader.h"
#include "plugin/messages.h"
#include "unit_main.h"

static void expect(const char *en, const char *fr)
{
    char *got = eai_detail_fr(en);
    if (!got || strcmp(got, fr) != 0)
        fprintf(stderr, "'%s': got '%s', want '%s'\n", en, got ? got : "(none)", fr);
    CU_ASSERT(got && strcmp(got, fr) == 0);
    free(got);
}

/* The work one message may cost is bounded (localisation runs on the
 * event loop): a message over the cap keeps its English; nested messages
 * are translated four deep, the rest stays English; a long message full of
 * the texts between holes still matches, and right. */
static void test_bounds(void)
{
    size_t n = 3000;
    char *big = malloc(n + 32);
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    strcpy(big, "unknown image '");
    size_t o = strlen(big);
    memset(big + o, 'a', n);
    strcpy(big + o + n, "'");
    char *fr = eai_detail_fr(big);
    CU_ASSERT_PTR_NULL(fr); /* over the cap: English in both */
    free(fr);
    big[o + 900] = '\0';
    strcat(big, "'");
    fr = eai_detail_fr(big); /* 916 bytes: under it */
    CU_ASSERT(fr && strncmp(fr, "image inconnue 'aaa", 19) == 0);
    free(fr);
    /* 40 ", column " texts before the ": " that closes the match: the
     * first hole is the shortest that leads to a whole match */
    char msg[1024] = "line 1";
    for (int i = 0; i < 40; i++)
        strcat(msg, ", column 2");
    strcat(msg, ", column 3: syntax error");
    fr = eai_detail_fr(msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fr);
    CU_ASSERT(strncmp(fr, "ligne 1, colonne 2, column 2, column 2", 38) == 0); /* the shortest first hole */
    CU_ASSERT(strstr(fr, ", column 3 : erreur de syntaxe") != NULL);
    free(fr);
    /* nesting: four levels in French, the fifth and below English */
    char nest[512] = "";
    for (int i = 0; i < 6; i++)
        strcat(nest, "line 1, column 1: ");
    strcat(nest, "syntax error");
    fr = eai_detail_fr(nest);
    CU_ASSERT(fr && strcmp(fr, "ligne 1, colonne 1 : ligne 1, colonne 1 : ligne 1, colonne 1 : ligne 1, colonne 1 : "
                               "line 1, column 1: line 1, column 1: syntax error") == 0);
    free(fr);
    free(big);
}

/* every entry of the table is reachable and well formed */
static void test_table_shape(void)
{
    char why[1024] = "";
    int rc = eai_details_table_check(why, sizeof why);
    if (rc != 0)
        fprintf(stderr, "%s\n", why);
    CU_ASSERT_EQUAL(rc, 0);
}

static void test_templates(void)
{
    expect("is required", "est obligatoire");
    expect("must be at least 16 characters long", "doit compter au moins 16 caractères");
    expect("must have at least 2 items", "doit avoir au moins 2 éléments");
    expect("must have at least 1 item", "doit avoir au moins 1 élément");
    expect("1Gi exceeds the maximum 512Mi of profile 'gvisor-small'",
           "1Gi dépasse le maximum 512Mi du profil 'gvisor-small'");
    expect("unknown image 'nosuch:1'; the images here are: python:3.11-slim, x:y (eaid images list)",
           "image inconnue 'nosuch:1' ; les images présentes sont : python:3.11-slim, x:y (eaid images list)");
    /* the hint of core/exec/exec_create.c, whole: every part of it in French */
    expect("unknown image 'py:3'; the image store is empty: build one with `eaid images build py:3 --packages x` "
           "or import one with `eaid images import NAME:TAG ARCHIVE` (docs/images.md)",
           "image inconnue 'py:3' ; le magasin d'images est vide : construisez-en une avec "
           "`eaid images build py:3 --packages x` ou importez-en une avec `eaid images import NAME:TAG ARCHIVE` "
           "(docs/images.md)");
    expect("unknown image 'a'", "image inconnue 'a'");
    expect("'evil.example:443' is not in the allow list of profile 'fake'",
           "'evil.example:443' n'est pas dans la liste autorisée du profil 'fake'");
    expect("must be an integer from 1 to 100", "doit être un entier de 1 à 100");
    /* a nested message: the prefix's own template translates the rest */
    expect("the tool manifest's '10.0.0.1' is a private address: add '10.0.0.1:80' (or its range) to "
           "callbacks.allow to call it",
           "(manifeste de l'outil) '10.0.0.1' est une adresse de classe private : ajoutez '10.0.0.1:80' (ou sa "
           "plage) à callbacks.allow pour l'appeler");
    /* no regular expression in quantity and path refusals: they have words */
    expect("must be a CPU quantity: millicores such as \"500m\", or cores such as \"1\" or \"1.5\" (at most 3 "
           "decimals)",
           "doit être une quantité de CPU : des millicœurs comme \"500m\", ou des cœurs comme \"1\" ou \"1.5\" "
           "(3 décimales au plus)");
    char *none = eai_detail_fr("a message nobody wrote");
    CU_ASSERT_PTR_NULL(none);
    free(none);
    /* a hole takes at least one character */
    none = eai_detail_fr("unknown tool ''");
    CU_ASSERT_PTR_NULL(none);
    free(none);
}

/* Every producer's messages in French, as the producers format them (a
 * message with no template would stay English in French). */
static void test_producers(void)
{
    /* JSON Schema validator (core/schema/jsonschema_validate.c) */
    expect("must be of type number or string, not boolean", "doit être de type number ou string, pas boolean");
    expect("must be of type integer or string or null, not object",
           "doit être de type integer, string ou null, pas object");
    expect("must be of type object, not array", "doit être de type object, pas array");
    expect("could not be matched against pattern '^[a-z]+$' (regex limit)",
           "n'a pas pu être comparé au motif '^[a-z]+$' (limite des expressions régulières)");
    expect("must contain an item matching the 'contains' schema",
           "doit contenir un élément conforme au schéma de 'contains'");
    expect("must contain at least 2 items matching the 'contains' schema",
           "doit contenir au moins 2 éléments conformes au schéma de 'contains'");
    expect("must contain at most 3 items matching the 'contains' schema",
           "doit contenir au plus 3 éléments conformes au schéma de 'contains'");
    expect("property name could not be matched against pattern '^x-'",
           "le nom de propriété n'a pas pu être comparé au motif '^x-'");
    expect("must be \"eai.dev/v1\"", "doit être \"eai.dev/v1\"");
    expect("must be \"Tool\"", "doit être \"Tool\"");
    expect("must be the constant value", "doit être la valeur constante");
    expect("must be one of the allowed values", "doit être l'une des valeurs permises");
    expect("must be one of [\"a\",\"b\"]", "doit être l'une des valeurs [\"a\",\"b\"]");
    expect("schema nesting too deep (recursive $ref?)", "imbrication du schéma trop profonde ($ref récursif ?)");
    expect("no schema or no instance", "pas de schéma ou pas d'instance");
    expect("validation ran out of memory", "la validation a manqué de mémoire");
    expect("validation could not complete", "la validation n'a pas pu aboutir");

    /* admission (core/exec/exec_validate.c, core/obs/callback.c) */
    expect("the backend of profile 'kata-small' cannot enforce network egress",
           "le backend du profil 'kata-small' ne peut pas appliquer l'accès réseau sortant");
    expect("'exa_mple.com' is not a valid host name", "'exa_mple.com' n'est pas un nom d'hôte valide");
    expect("the tool manifest's 'exa_mple.com' is not a valid host name",
           "(manifeste de l'outil) 'exa_mple.com' n'est pas un nom d'hôte valide");
    /* manifests (core/http/routes_misc.c) and quotas (core/exec/quota.c) */
    expect("unknown sandbox profile 'nope'", "profil de bac à sable inconnu 'nope'");
    expect("1048576 bytes stored, 4096 more asked, quota 1000000",
           "1048576 octets stockés, 4096 de plus demandés, quota 1000000");
    expect("100 of 100 executions in the last 3600 s", "100 exécutions sur 100 dans les dernières 3600 s");
    expect("50 manifests stored, quota 50, 1 more asked", "50 manifestes stockés, quota 50, 1 de plus demandé(s)");

    /* routes (core/http/request.c, bearer.c, routes_misc.c, routes_manifests.c, core/exec/exec_read.c) */
    expect("send application/json or application/yaml", "envoyez application/json ou application/yaml");
    expect("send application/json", "envoyez application/json");
    expect("the body is empty", "le corps de la requête est vide");
    expect("too many connections for this tenant (limits.max_connections_per_tenant)",
           "trop de connexions pour ce locataire (limits.max_connections_per_tenant)");
    expect("too many open long-polls for this tenant (limits.max_polls_per_tenant)",
           "trop d'attentes longues (long-polls) ouvertes pour ce locataire (limits.max_polls_per_tenant)");
    expect("too many open event streams for this tenant (limits.max_streams_per_tenant)",
           "trop de flux d'événements ouverts pour ce locataire (limits.max_streams_per_tenant)");
    expect("metrics are served to loopback clients or with the ops token (ops.access)",
           "les métriques sont servies aux clients de bouclage ou avec le jeton ops (ops.access)");
    expect("storage is unreachable", "le stockage est injoignable");
    expect("no isolation backend is ready", "aucun backend d'isolation n'est prêt");
    expect("draining: running executions end, no new ones are taken",
           "vidage : les exécutions en cours se terminent, aucune nouvelle n'est prise");
    expect("this storage backend cannot list manifests (upgrade its plugin)",
           "ce backend de stockage ne sait pas lister les manifestes (mettez à jour son plugin)");
    /* FinOps usage (core/http/routes_finops.c) */
    expect("expected an RFC 3339 time such as 2026-11-29T10:00:00Z",
           "une date RFC 3339 est attendue, par exemple 2026-11-29T10:00:00Z");
    expect("expected an RFC 3339 time or null", "une date RFC 3339 ou null est attendue");
    expect("expected an integer from 1 to 1000", "un entier de 1 à 1000 est attendu");
    expect("expected a string of at most 256 characters or null",
           "une chaîne de 256 caractères au plus ou null est attendue");
    expect("expected a number >= 0", "un nombre >= 0 est attendu");
    expect("expected 1..128 characters of [A-Za-z0-9._:-]", "1 à 128 caractères parmi [A-Za-z0-9._:-] sont attendus");

    /* sessions (core/session/) */
    expect("the backend 'kata' of profile 'kata-small' does not support sessions",
           "le backend 'kata' du profil 'kata-small' ne prend pas en charge les sessions");
    expect("at most 10 live sessions per tenant (sessions.max_per_tenant)",
           "10 sessions actives au plus par locataire (sessions.max_per_tenant)");
    expect("a session has no network egress", "une session n'a pas d'accès réseau sortant");
    expect("must be a boolean", "doit être un booléen");
    expect("timeout_s and output_bytes are given per execution, not per session",
           "timeout_s et output_bytes se donnent par exécution, pas par session");
    expect("must be an integer within the configured bounds (docs/sessions.md)",
           "doit être un entier dans les bornes configurées (docs/sessions.md)");
    expect("resume it (POST .../resume) or create it with auto_resume",
           "reprenez-la (POST .../resume) ou créez-la avec auto_resume");
    expect("the session is still starting", "la session est encore en démarrage");
    expect("the session has ended", "la session est terminée");
    expect("the session is pausing, resuming or starting",
           "la session est en cours de pause, de reprise ou de démarrage");
    expect("another call on this session is waiting", "un autre appel sur cette session est en attente");
    expect("boot failed", "échec du démarrage");
    expect("must be a path under /tmp without '.', '..' or empty segments",
           "doit être un chemin sous /tmp sans segment '.', '..' ou vide");
    expect("the backend cannot pause sessions", "le backend ne sait pas mettre les sessions en pause");
    expect("the backend cannot resume sessions", "le backend ne sait pas reprendre les sessions");
    /* a body that does not parse: the location and jansson's text, nested */
    expect("line 1, column 2: end of file expected near 'x'",
           "ligne 1, colonne 2 : fin de fichier attendue près de 'x'");
    expect("line 1, column 1: '[' or '{' expected near 'a'", "ligne 1, colonne 1 : '[' ou '{' attendu près de 'a'");
    expect("line 3, column 0: string or '}' expected near end of file",
           "ligne 3, colonne 0 : chaîne ou '}' attendue en fin de fichier");
    expect("line 1, column 9: duplicate object key near '\"a\"'",
           "ligne 1, colonne 9 : clé d'objet en double près de '\"a\"'");
    expect("line 1, column 5: ':' expected near '1'", "ligne 1, colonne 5 : ':' attendu près de '1'");
    expect("line 1, column 6: ']' expected near '}'", "ligne 1, colonne 6 : ']' attendu près de '}'");
    expect("line 1, column 3: unexpected token near ','", "ligne 1, colonne 3 : élément inattendu près de ','");
    expect("line 1, column 2: invalid token near 'tru'", "ligne 1, colonne 2 : élément invalide près de 'tru'");
    expect("line 1, column 8: premature end of input near '\"abc'",
           "ligne 1, colonne 8 : fin prématurée des données près de '\"abc'");
    expect("line 1, column 6: unexpected newline near '\"ab'",
           "ligne 1, colonne 6 : saut de ligne inattendu près de '\"ab'");
    expect("line 1, column 4: control character 0x1 near '\"a'",
           "ligne 1, colonne 4 : caractère de contrôle 0x1 près de '\"a'");
    expect("line 1, column 4: invalid escape near '\"\\q'",
           "ligne 1, colonne 4 : échappement invalide près de '\"\\q'");
    expect("line 1, column 8: invalid Unicode escape '\\u12G4' near '\"\\u12G4'",
           "ligne 1, colonne 8 : échappement Unicode invalide '\\u12G4' près de '\"\\u12G4'");
    expect("line 1, column 8: invalid Unicode '\\uDC00' near '\"\\uDC00'",
           "ligne 1, colonne 8 : Unicode invalide '\\uDC00' près de '\"\\uDC00'");
    expect("line 1, column 1: unable to decode byte 0xff near '\"'",
           "ligne 1, colonne 1 : impossible de décoder l'octet 0xff près de '\"'");
    expect("line 1, column 2049: maximum parsing depth reached near '['",
           "ligne 1, colonne 2049 : profondeur d'analyse maximale atteinte près de '['");
    expect("line 1, column 30: too big integer near '99999999999999999999999999999'",
           "ligne 1, colonne 30 : entier trop grand près de '99999999999999999999999999999'");
    expect("line 1, column 31: too big negative integer near '-99999999999999999999999999999'",
           "ligne 1, colonne 31 : entier négatif trop grand près de '-99999999999999999999999999999'");
    expect("line 1, column 7: real number overflow near '1e999'",
           "ligne 1, colonne 7 : nombre réel hors limites près de '1e999'");
    expect("line 1, column 8: \\u0000 is not allowed without JSON_ALLOW_NUL near '\"\\u0000'",
           "ligne 1, colonne 8 : \\u0000 n'est pas permis sans JSON_ALLOW_NUL près de '\"\\u0000'");
    expect("line 1, column 10: NUL byte in object key not supported near '\"a\\u0000\"'",
           "ligne 1, colonne 10 : octet NUL non pris en charge dans une clé d'objet près de '\"a\\u0000\"'");
    /* YAML (core/schema/yamljson.c) */
    expect("line 3, column 1: duplicate mapping key 'name'", "ligne 3, colonne 1 : clé de mapping en double 'name'");
    expect("line 1, column 1: document expands to too many nodes (alias bomb?)",
           "ligne 1, colonne 1 : le document se développe en trop de nœuds (bombe d'alias ?)");
    expect("line 4, column 12: document expands to more than 1048576 bytes (alias bomb?)",
           "ligne 4, colonne 12 : le document se développe en plus de 1048576 octets (bombe d'alias ?)");
    expect("line 2, column 1: mapping keys are strings; tag 'tag:yaml.org,2002:int' is not supported here",
           "ligne 2, colonne 1 : les clés de mapping sont des chaînes ; le tag 'tag:yaml.org,2002:int' n'est pas "
           "pris en charge ici");
    expect("line 2, column 7: unsupported tag '!custom'", "ligne 2, colonne 7 : tag non pris en charge '!custom'");
    expect("line 2, column 7: 'abc' is not a valid value for tag 'tag:yaml.org,2002:int'",
           "ligne 2, colonne 7 : 'abc' n'est pas une valeur valide pour le tag 'tag:yaml.org,2002:int'");
    expect("line 2, column 7: '99999999999999999999': integer out of range",
           "ligne 2, colonne 7 : '99999999999999999999' : entier hors limites");
    expect("line 2, column 7: '1e999': number out of range", "ligne 2, colonne 7 : '1e999' : nombre hors limites");
    expect("line 2, column 7: '1.000000000000000000000000000000000000': number too long",
           "ligne 2, colonne 7 : '1.000000000000000000000000000000000000' : nombre trop long");
    expect("line 2, column 7: '.inf': infinity and NaN cannot be represented in JSON",
           "ligne 2, colonne 7 : '.inf' : l'infini et NaN ne peuvent pas être représentés en JSON");
    expect("line 4, column 9: unknown alias '*base'", "ligne 4, colonne 9 : alias inconnu '*base'");
    expect("line 4, column 3: alias '*k' used as a mapping key is not a string",
           "ligne 4, colonne 3 : l'alias '*k' employé comme clé de mapping n'est pas une chaîne");
    expect("line 2, column 1: mapping keys must be scalars",
           "ligne 2, colonne 1 : les clés de mapping doivent être des scalaires");
    expect("line 65, column 3: nesting deeper than 64", "ligne 65, colonne 3 : imbrication plus profonde que 64");
    expect("line 4, column 1: only one YAML document is allowed",
           "ligne 4, colonne 1 : un seul document YAML est permis");
    expect("line 1, column 1: syntax error", "ligne 1, colonne 1 : erreur de syntaxe");
    expect("line 1, column 1: out of memory", "ligne 1, colonne 1 : mémoire épuisée");
}

static void test_envelope(void)
{
    json_t *d = json_pack("[{s:s, s:s}, {s:s, s:s}]", "path", "/limits/cpu", "message", "must be greater than zero",
                          "path", "/x", "message", "a message nobody wrote");
    json_t *e = eai_http_error_envelope(EAI_E_VALIDATION_FAILED, "fr", "rid", d);
    json_t *d0 = json_array_get(json_object_get(json_object_get(e, "error"), "details"), 0);
    json_t *d1 = json_array_get(json_object_get(json_object_get(e, "error"), "details"), 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(d0, "message")), "doit être supérieur à zéro");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(d0, "message_i18n"), "en")),
                           "must be greater than zero");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(d1, "message")), "a message nobody wrote");
    json_decref(e);
    d = json_pack("[{s:s, s:s}]", "path", "/limits/cpu", "message", "must be greater than zero");
    e = eai_http_error_envelope(EAI_E_VALIDATION_FAILED, "en", "rid", d);
    d0 = json_array_get(json_object_get(json_object_get(e, "error"), "details"), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(d0, "message")), "must be greater than zero");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(d0, "message_i18n"), "fr")),
                           "doit être supérieur à zéro");
    json_decref(e);
}

/* A plugin's messages ship in its descriptor (ABI 1.4): a table without
 * French is refused; every in-tree plugin loads (its table checked), its
 * messages then come out in French, and the whole table (core's and the
 * plugins') keeps its shape. */
static void test_plugin_messages(void)
{
    struct eai_error *err = NULL;
    static const struct eai_message nofr[] = {{"x.ok", "fine", "bien"}, {"x.nofr", "no French", NULL}, {NULL}};
    CU_ASSERT_EQUAL(eai_plugin_messages_check(nofr, "x", &err), -1);
    CU_ASSERT(err && strstr(err->message, "message 'x.nofr' has no French") != NULL);
    eai_error_free(err), err = NULL;
    static const struct eai_message empty[] = {{"x.empty", "no French", ""}, {NULL}};
    CU_ASSERT_EQUAL(eai_plugin_messages_check(empty, "x", &err), -1);
    eai_error_free(err), err = NULL;
    static const struct eai_message hole[] = {{"x.hole", "%d files", "{2} fichiers"}, {NULL}};
    CU_ASSERT_EQUAL(eai_plugin_messages_check(hole, "x", &err), -1);
    CU_ASSERT(err && strstr(err->message, "names a hole") != NULL);
    eai_error_free(err), err = NULL;
    static const struct eai_message twice[] = {{"x.a", "a", "a"}, {"x.a", "b", "b"}, {NULL}};
    CU_ASSERT_EQUAL(eai_plugin_messages_check(twice, "x", &err), -1);
    eai_error_free(err), err = NULL;
    static const struct eai_message badid[] = {{"X A", "a", "a"}, {NULL}};
    CU_ASSERT_EQUAL(eai_plugin_messages_check(badid, "x", &err), -1);
    eai_error_free(err), err = NULL;
    char t[128];
    CU_ASSERT(eai_plugin_message_template("larger than %lld bytes (%.200s, 100%%)", t, sizeof t) == 0 &&
              strcmp(t, "larger than {} bytes ({}, 100%)") == 0);

    /* every in-tree plugin (EAI_PLUGIN_DIR) loads: its table has French */
    const char *dir = getenv("EAI_PLUGIN_DIR");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    static const struct {
        enum eai_plugin_kind kind;
        const char *name;
    } intree[] = {{EAI_KIND_ISOLATION, "gvisor"}, {EAI_KIND_ISOLATION, "k8s"}, {EAI_KIND_ISOLATION, "kata"},
                  {EAI_KIND_STORAGE, "postgres"}, {EAI_KIND_AUDIT, "http"}, {EAI_KIND_FINOPS, "http"},
                  {EAI_KIND_TELEMETRY, "otlp"}};
    static const char *const kinds[] = {"isolation", "storage", "audit", "finops", "telemetry"};
    for (size_t i = 0; i < sizeof intree / sizeof intree[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/eai-%s-%s.so", dir, kinds[intree[i].kind], intree[i].name);
        if (i > 0 && access(path, F_OK) != 0)
            continue; /* not built here (gvisor always is) */
        const struct eai_plugin_descriptor *d = eai_plugin_load(dir, intree[i].kind, intree[i].name, &err);
        if (!d)
            fprintf(stderr, "%s: %s\n", intree[i].name, err && err->message ? err->message : "?");
        CU_ASSERT_PTR_NOT_NULL(d);
        eai_error_free(err), err = NULL;
    }
    CU_ASSERT(eai_plugin_messages_count() >= 18);

    /* the session backend's refusals (plugins/gvisor/gvisor_messages.c) */
    expect("no such session", "pas de telle session");
    expect("the session is not running", "la session ne tourne pas");
    expect("executions are running in the session", "des exécutions tournent dans la session");
    expect("the session is not paused", "la session n'est pas en pause");
    expect("path must be under /tmp", "le chemin doit être sous /tmp");
    expect("the file is larger than 1048576 bytes", "le fichier dépasse 1048576 octets");
    expect("the directory is not empty", "le répertoire n'est pas vide");
    expect("no such file", "pas de tel fichier");
    expect("the session's /tmp is full", "le /tmp de la session est plein");
    expect("image python:3.11-slim is not in the local image store",
           "l'image python:3.11-slim n'est pas dans le magasin d'images local");
    expect("the session's sandbox did not boot in time", "le bac à sable de la session n'a pas démarré à temps");
    expect("the session's sandbox ended while booting",
           "le bac à sable de la session s'est arrêté pendant son démarrage");
    expect("the session's sandbox ended on its own", "le bac à sable de la session s'est arrêté de lui-même");
    expect("the sandbox was lost while pausing", "le bac à sable a été perdu pendant la mise en pause");
    expect("the restored sandbox did not run in time", "le bac à sable restauré n'a pas tourné à temps");
    expect("runsc restore ended before the sandbox ran", "runsc restore s'est arrêté avant que le bac à sable tourne");
    expect("pausing failed", "la mise en pause a échoué");
    /* the node budget (core/exec/budget.c) */
    expect("256 MiB and 500m CPU do not fit in the tenant's share of the node (0 MiB and 900m of it free: "
           "node.tenant_share)",
           "256 Mio et 500m de CPU ne tiennent pas dans la part du nœud du locataire (0 Mio et 900m encore libres : "
           "node.tenant_share)");
    expect("runsc checkpoint failed: checkpoint: no space left on device",
           "runsc checkpoint a échoué : checkpoint: no space left on device");

    /* as the plugin's host handle attributes them */
    expect("plugin gvisor: no such session", "plugin gvisor : pas de telle session");

    char why[1024] = "";
    int rc = eai_details_table_check(why, sizeof why);
    if (rc != 0)
        fprintf(stderr, "%s\n", why);
    CU_ASSERT_EQUAL(rc, 0);
}

static int reg(void)
{
    CU_pSuite s = CU_add_suite("details_i18n", NULL, NULL);
    if (!s || !CU_add_test(s, "table shape", test_table_shape) || !CU_add_test(s, "bounds", test_bounds) ||
        !CU_add_test(s, "templates", test_templates) || !CU_add_test(s, "producers", test_producers) ||
        !CU_add_test(s, "envelope", test_envelope) || !CU_add_test(s, "plugin messages", test_plugin_messages))
        return -1;
    return 0;
}

EAI_UNIT_MAIN(reg)
