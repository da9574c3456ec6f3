/*
 * details[].message in the negotiated language (http/details_i18n.h).
 *
 * Every detail message is made in English by its checker (schema
 * validator, exec_validate, the routes); this table gives its French form
 * by template: "{}" in the English text matches any non-empty text, "{1}",
 * "{2}" in the French text put the matched texts back (in any order).  A
 * message with no template keeps its English text in both languages
 * (tests/unit/test_details_i18n.c checks the table's shape and a sample).
 * A plugin's messages are not here: they ship in its descriptor (ABI 1.4,
 * .messages) and are looked up after these (plugin/messages.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/details_i18n.h"
#include "plugin/messages.h"

struct tmpl {
    const char *en, *fr;
};

static const struct tmpl T[] = {
    /* stdin_mode (core/exec/exec_validate.c, exec_create.c): before the
     * generic "must be {}" templates */
    {"must be \"data\" or \"stream\"", "doit être \"data\" ou \"stream\""},
    {"must be absent with stdin_mode \"stream\" (send it with POST .../stdin)",
     "doit être absent avec stdin_mode \"stream\" (envoyez-le avec POST .../stdin)"},
    {"the backend of profile '{}' cannot stream stdin to a running program",
     "le backend du profil '{1}' ne peut pas transmettre d'entrée standard à un programme en cours"},
    /* JSON Schema validator (core/schema/jsonschema_validate.c) */
    {"is required", "est obligatoire"},
    {"is not allowed (unknown property)", "n'est pas permis (propriété inconnue)"},
    /* anyOf/oneOf of several types: "integer or string" (more specific first) */
    {"must be of type {} or {} or {}, not {}", "doit être de type {1}, {2} ou {3}, pas {4}"},
    {"must be of type {} or {}, not {}", "doit être de type {1} ou {2}, pas {3}"},
    {"must be of type {}, not {}", "doit être de type {1}, pas {2}"},
    {"does not match any of the allowed alternatives ({})", "ne correspond à aucune des formes permises ({1})"},
    {"matches more than one of the exclusive alternatives (oneOf)",
     "correspond à plus d'une des formes exclusives (oneOf)"},
    {"must be >= {}", "doit être >= {1}"},
    {"must be <= {}", "doit être <= {1}"},
    {"must be > {}", "doit être > {1}"},
    {"must be < {}", "doit être < {1}"},
    {"must be a multiple of {}", "doit être un multiple de {1}"},
    {"must be at least {} characters long", "doit compter au moins {1} caractères"},
    {"must be at most {} characters long", "doit compter au plus {1} caractères"},
    {"does not match pattern '{}'", "ne correspond pas au motif '{1}'"},
    {"could not be matched against pattern '{}' (regex limit)",
     "n'a pas pu être comparé au motif '{1}' (limite des expressions régulières)"},
    {"must have at least {} items", "doit avoir au moins {1} éléments"},
    {"must have at least {} item", "doit avoir au moins {1} élément"},
    {"must have at most {} items", "doit avoir au plus {1} éléments"},
    {"must have at most {} item", "doit avoir au plus {1} élément"},
    {"items must be unique", "les éléments doivent être uniques"},
    {"must contain an item matching the 'contains' schema",
     "doit contenir un élément conforme au schéma de 'contains'"},
    {"must contain at least {} items matching the 'contains' schema",
     "doit contenir au moins {1} éléments conformes au schéma de 'contains'"},
    {"must contain at most {} items matching the 'contains' schema",
     "doit contenir au plus {1} éléments conformes au schéma de 'contains'"},
    {"is required when '{}' is present", "est obligatoire quand '{1}' est présent"},
    {"must have at least {} properties", "doit avoir au moins {1} propriétés"},
    {"must have at least {} property", "doit avoir au moins {1} propriété"},
    {"must have at most {} properties", "doit avoir au plus {1} propriétés"},
    {"must have at most {} property", "doit avoir au plus {1} propriété"},
    {"property name is not allowed", "ce nom de propriété n'est pas permis"},
    {"property name could not be matched against pattern '{}'",
     "le nom de propriété n'a pas pu être comparé au motif '{1}'"},
    {"no value is allowed here", "aucune valeur n'est permise ici"},
    {"must be one of the allowed values", "doit être l'une des valeurs permises"},
    {"must be one of {}", "doit être l'une des valeurs {1}"},
    {"must not match the schema in 'not'", "ne doit pas correspondre au schéma de 'not'"},
    {"must be the constant value", "doit être la valeur constante"},
    {"must be \"{}\"", "doit être \"{1}\""}, /* const, a JSON string: apiVersion, kind */
    {"schema nesting too deep (recursive $ref?)", "imbrication du schéma trop profonde ($ref récursif ?)"},
    {"no schema or no instance", "pas de schéma ou pas d'instance"},
    {"validation ran out of memory", "la validation a manqué de mémoire"},
    {"validation could not complete", "la validation n'a pas pu aboutir"},
    /* x-message of the contracts (contracts/v1/, x-message) */
    {"must be a CPU quantity: millicores such as \"500m\", or cores such as \"1\" or \"1.5\" (at most 3 decimals)",
     "doit être une quantité de CPU : des millicœurs comme \"500m\", ou des cœurs comme \"1\" ou \"1.5\" "
     "(3 décimales au plus)"},
    {"must be a byte quantity: a number with an optional unit Ki, Mi, Gi, Ti (powers of 1024) or k, M, G, T "
     "(powers of 1000), such as \"256Mi\" or \"1Gi\"",
     "doit être une quantité d'octets : un nombre suivi ou non d'une unité Ki, Mi, Gi, Ti (puissances de 1024) "
     "ou k, M, G, T (puissances de 1000), comme \"256Mi\" ou \"1Gi\""},
    {"must be /tmp or a path under /tmp/ without '..' segments",
     "doit être /tmp ou un chemin sous /tmp/ sans segment '..'"},
    {"must be a file path under /tmp/ without '..' segments",
     "doit être un chemin de fichier sous /tmp/ sans segment '..'"},
    {"must be 1 to 63 lower-case letters, digits or '-', starting and ending with a letter or a digit",
     "doit compter 1 à 63 lettres minuscules, chiffres ou '-', et commencer et finir par une lettre ou un chiffre"},
    {"must be an image reference NAME[:TAG] or NAME@sha256:DIGEST (letters, digits and . _ / : @ -)",
     "doit être une référence d'image NOM[:TAG] ou NOM@sha256:EMPREINTE (lettres, chiffres et . _ / : @ -)"},
    {"must start with a letter or '_' and hold only letters, digits and '_'",
     "doit commencer par une lettre ou '_' et ne contenir que des lettres, des chiffres et '_'"},
    {"must start with http:// or https://", "doit commencer par http:// ou https://"},
    {"must be base64: letters, digits, '+' and '/', padded with '='",
     "doit être du base64 : lettres, chiffres, '+' et '/', complété par '='"},
    {"must be host:port: a DNS name or an IPv6 address in brackets, then ':' and a port from 1 to 65535",
     "doit être hôte:port : un nom DNS ou une adresse IPv6 entre crochets, puis ':' et un port de 1 à 65535"},
    {"must be a label key: an optional DNS prefix and '/', then 1 to 63 letters, digits, '-', '_' or '.', "
     "starting and ending with a letter or a digit",
     "doit être une clé d'étiquette : un préfixe DNS et '/' facultatifs, puis 1 à 63 lettres, chiffres, '-', "
     "'_' ou '.', en commençant et finissant par une lettre ou un chiffre"},
    {"must be a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or "
     "a digit",
     "doit être une valeur d'étiquette : 63 lettres, chiffres, '-', '_' ou '.' au plus, en commençant et "
     "finissant par une lettre ou un chiffre"},
    /* admission (core/exec/exec_validate.c, exec_create.c) */
    /* streamed stdin (core/exec/exec_stdin.c, plugins/common/pc_runner.c) */
    {"must be true or false", "doit valoir true ou false"},
    {"must be application/octet-stream or application/json", "doit être application/octet-stream ou application/json"},
    {"give data or data_b64, not both", "donnez data ou data_b64, pas les deux"},
    {"{} bytes; one call carries at most {}", "{1} octets ; un appel en porte au plus {2}"},
    {"the execution is queued: it has not started yet", "l'exécution est en file d'attente : elle n'a pas encore démarré"},
    {"the execution is not running on this server yet (or runs on another replica)",
     "l'exécution ne tourne pas encore sur ce serveur (ou tourne sur une autre réplique)"},
    {"the execution is being started", "l'exécution est en cours de démarrage"},
    {"the execution was not started with stdin_mode stream", "l'exécution n'a pas été lancée avec stdin_mode stream"},
    {"the program has ended", "le programme est terminé"},
    {"{}: the program has ended", "{1} : le programme est terminé"},
    {"{}: stdin is not streamed", "{1} : l'entrée standard n'est pas transmise en flux"},
    {"{}: eof was already sent", "{1} : eof a déjà été envoyé"},
    {"{}: the program closed its stdin", "{1} : le programme a fermé son entrée standard"},
    {"{}: {} bytes wait for the program to read them (at most {})",
     "{1} : {2} octets attendent que le programme les lise (au plus {3})"},
    {"unknown tool '{}'", "outil inconnu '{1}'"},
    {"unknown profile '{}'", "profil inconnu '{1}'"},
    {"unknown image '{}'; the images here are: {} (eaid images list)",
     "image inconnue '{1}' ; les images présentes sont : {2} (eaid images list)"},
    {"unknown image '{}'; the image store is empty: build one with {} or import one with {} ({})",
     "image inconnue '{1}' ; le magasin d'images est vide : construisez-en une avec {2} ou importez-en une "
     "avec {3} ({4})"},
    {"unknown image '{}'", "image inconnue '{1}'"},
    {"is required: image '{}' has no command of its own (no Entrypoint or Cmd)",
     "est obligatoire : l'image '{1}' n'a pas de commande propre (ni Entrypoint ni Cmd)"},
    {"is required: unknown image '{}'", "est obligatoire : image inconnue '{1}'"},
    {"is required: the backend of profile '{}' takes images from a registry and cannot tell an image's own "
     "command here",
     "est obligatoire : le backend du profil '{1}' prend ses images dans un registre et ne peut pas connaître "
     "ici la commande propre d'une image"},
    {"tool '{}' runs with profile '{}'", "l'outil '{1}' s'exécute avec le profil '{2}'"},
    {"{} exceeds the maximum {} of profile '{}'", "{1} dépasse le maximum {2} du profil '{3}'"},
    {"'{}' is not in the allow list of profile '{}'", "'{1}' n'est pas dans la liste autorisée du profil '{2}'"},
    {"total size {} bytes exceeds the cap of {} bytes", "la taille totale de {1} octets dépasse la limite de {2} octets"},
    {"is not a CPU quantity (e.g. \"500m\", \"1\", \"1.5\")",
     "n'est pas une quantité de CPU (par exemple \"500m\", \"1\", \"1.5\")"},
    {"is not a byte quantity (e.g. \"256Mi\", \"1Gi\", 1048576)",
     "n'est pas une quantité d'octets (par exemple \"256Mi\", \"1Gi\", 1048576)"},
    {"must be a positive integer", "doit être un entier positif"},
    {"must be greater than zero", "doit être supérieur à zéro"},
    {"must be a string", "doit être une chaîne"},
    {"must be a non-empty string", "doit être une chaîne non vide"},
    {"must be a string without NUL characters", "doit être une chaîne sans caractère NUL"},
    {"must be an object", "doit être un objet"},
    {"must be an array", "doit être un tableau"},
    {"must be an object of strings", "doit être un objet de chaînes"},
    {"must be an array of 1 to 256 strings", "doit être un tableau de 1 à 256 chaînes"},
    {"must not be empty", "ne doit pas être vide"},
    {"is larger than {} bytes", "dépasse {1} octets"},
    {"must be a path under /tmp without '.' or '..' segments",
     "doit être un chemin sous /tmp sans segment '.' ou '..'"},
    {"must be a file path under /tmp/ without '.' or '..' segments",
     "doit être un chemin de fichier sous /tmp/ sans segment '.' ou '..'"},
    {"must have exactly one of content and content_b64", "doit avoir exactement un de content et content_b64"},
    {"content must be a string", "content doit être une chaîne"},
    {"is not valid base64", "n'est pas du base64 valide"},
    {"duplicates {}", "répète {1}"},
    {"is {} bytes long; the backend of this profile accepts at most {}",
     "fait {1} octets ; le backend de ce profil en accepte {2} au plus"},
    {"name must start with a letter, '-', '.' or '_' and hold only letters, digits, '-', '.' and '_' for the "
     "backend of this profile",
     "le nom doit commencer par une lettre, '-', '.' ou '_' et ne contenir que des lettres, chiffres, '-', '.' "
     "et '_' pour le backend de ce profil"},
    {"name is {} bytes long; the backend of this profile accepts at most {}",
     "le nom fait {1} octets ; le backend de ce profil en accepte {2} au plus"},
    {"has a {}-byte segment; the backend of this profile accepts at most {} bytes a segment",
     "a un segment de {1} octets ; le backend de ce profil en accepte {2} au plus par segment"},
    {"stdin, files and env values total {} bytes; the backend of this profile accepts at most {}",
     "stdin, les fichiers et les valeurs d'env font {1} octets ; le backend de ce profil en accepte {2} au plus"},
    {"has {} files; the backend of this profile accepts at most {}",
     "contient {1} fichiers ; le backend de ce profil en accepte {2} au plus"},
    {"the backend of profile '{}' cannot enforce network egress",
     "le backend du profil '{1}' ne peut pas appliquer l'accès réseau sortant"},
    {"secret must be at least 16 characters long", "secret doit compter au moins 16 caractères"},
    {"must be at least 16 characters long", "doit compter au moins 16 caractères"},
    {"must be an object with a url and a secret (strings)", "doit être un objet avec une url et un secret (chaînes)"},
    {"must be an http:// or https:// URL with a host, an optional port and no user name or password",
     "doit être une URL http:// ou https:// avec un hôte, un port facultatif et ni nom d'utilisateur ni mot "
     "de passe"},
    {"'{}' is not in callbacks.allow", "'{1}' n'est pas dans callbacks.allow"},
    {"'{}' is a {} address: add '{}' (or its range) to callbacks.allow to call it",
     "'{1}' est une adresse de classe {2} : ajoutez '{3}' (ou sa plage) à callbacks.allow pour l'appeler"},
    {"'{}' is a loopback name: use the address (e.g. {}) and add it to callbacks.allow",
     "'{1}' est un nom de bouclage : utilisez l'adresse (par exemple {2}) et ajoutez-la à callbacks.allow"},
    {"'{}' is not a valid host name", "'{1}' n'est pas un nom d'hôte valide"},
    {"the tool manifest's {}", "(manifeste de l'outil) {T1}"},
    /* manifests (core/http/routes_misc.c) */
    {"unknown sandbox profile '{}'", "profil de bac à sable inconnu '{1}'"},
    /* quotas (core/exec/quota.c) */
    {"{} bytes stored, {} more asked, quota {}", "{1} octets stockés, {2} de plus demandés, quota {3}"},
    {"{} of {} executions in the last {} s", "{1} exécutions sur {2} dans les dernières {3} s"},
    {"{} manifests stored, quota {}, {} more asked", "{1} manifestes stockés, quota {2}, {3} de plus demandé(s)"},
    /* routes */
    {"must be 1 to 255 printable ASCII characters", "doit compter 1 à 255 caractères ASCII imprimables"},
    {"was used with a different request body", "a servi avec un autre corps de requête"},
    {"too many queued executions for this tenant", "trop d'exécutions en attente pour ce locataire"},
    {"is not a status value", "n'est pas une valeur de statut"},
    {"is longer than 128 characters", "dépasse 128 caractères"},
    {"must be an integer from {} to {}", "doit être un entier de {1} à {2}"},
    {"is not a cursor from a previous page", "n'est pas un curseur d'une page précédente"},
    {"must be a manifest kind such as Tool", "doit être un type de manifeste, comme Tool"},
    {"malformed percent-escape in the path", "échappement %xx mal formé dans le chemin"},
    {"malformed query string", "chaîne de requête mal formée"},
    {"this route takes application/json", "cette route prend application/json"},
    {"send application/json or application/yaml", "envoyez application/json ou application/yaml"},
    {"send application/json", "envoyez application/json"},
    {"the body is empty", "le corps de la requête est vide"},
    {"too many connections for this tenant (limits.max_connections_per_tenant)",
     "trop de connexions pour ce locataire (limits.max_connections_per_tenant)"},
    {"too many open long-polls for this tenant ({})",
     "trop d'attentes longues (long-polls) ouvertes pour ce locataire ({1})"},
    {"too many open event streams for this tenant ({})",
     "trop de flux d'événements ouverts pour ce locataire ({1})"},
    {"metrics are served to loopback clients or with the ops token (ops.access)",
     "les métriques sont servies aux clients de bouclage ou avec le jeton ops (ops.access)"},
    {"storage is unreachable", "le stockage est injoignable"},
    {"no isolation backend is ready", "aucun backend d'isolation n'est prêt"},
    {"draining: running executions end, no new ones are taken",
     "vidage : les exécutions en cours se terminent, aucune nouvelle n'est prise"},
    {"this storage backend cannot list manifests (upgrade its plugin)",
     "ce backend de stockage ne sait pas lister les manifestes (mettez à jour son plugin)"},
    {"shutting down", "arrêt en cours"},
    {"expected an object", "un objet est attendu"},
    /* FinOps usage (core/http/routes_finops.c) */
    {"expected an RFC 3339 time such as {}", "une date RFC 3339 est attendue, par exemple {1}"},
    {"expected an RFC 3339 time or null", "une date RFC 3339 ou null est attendue"},
    {"expected an integer from {} to {}", "un entier de {1} à {2} est attendu"},
    {"expected a string of at most {} characters or null", "une chaîne de {1} caractères au plus ou null est attendue"},
    {"expected a number >= {}", "un nombre >= {1} est attendu"},
    {"expected {}..{} characters of {}", "{1} à {2} caractères parmi {3} sont attendus"},
    {"unknown field", "champ inconnu"},
    {"required", "obligatoire"},
    {"execution not found", "exécution introuvable"},
    {"no such file in this execution", "pas de tel fichier dans cette exécution"},
    {"no such manifest", "pas de tel manifeste"},
    {"no such route", "pas de telle route"},
    /* volumes (core/vol/volume.c, docs/volumes.md) */
    {"must be an array of {name, path, read_only}", "doit être un tableau de {name, path, read_only}"},
    {"at most {} bytes of volumes per tenant", "{1} octets de volumes au plus par locataire"},
    {"at most {} volumes per tenant", "{1} volumes au plus par locataire"},
    {"at most {} volumes", "{1} volumes au plus"},
    {"volumes are not available on this server", "les volumes ne sont pas disponibles sur ce serveur"},
    {"must be {name, path, read_only (boolean, optional)}", "doit être {name, path, read_only (booléen, facultatif)}"},
    {"must be an absolute path under /mnt, normalised (no '.', '..', empty segments or trailing '/'; letters, "
     "digits, '.', '_', '-')",
     "doit être un chemin absolu sous /mnt, normalisé (sans '.', '..', segment vide ni '/' final ; lettres, "
     "chiffres, '.', '_', '-')"},
    {"the volume is being created or deleted", "le volume est en cours de création ou de suppression"},
    {"no such volume", "pas de tel volume"},
    {"names a volume already mounted by this request", "désigne un volume déjà monté par cette requête"},
    {"must not equal or nest in another volume's path", "ne doit pas égaler ni contenir le chemin d'un autre volume"},
    {"another sandbox mounts this volume read-write", "un autre bac à sable monte ce volume en lecture-écriture"},
    {"the volume could not be made on this server", "le volume n'a pas pu être créé sur ce serveur"},
    {"this server has no disk space for the volume now", "ce serveur n'a pas la place disque pour ce volume maintenant"},
    {"must be 1 to 63 characters of a-z, 0-9, '.', '_', '-', starting with a letter or digit, not vol_...",
     "doit compter 1 à 63 caractères parmi a-z, 0-9, '.', '_', '-', commencer par une lettre ou un chiffre, "
     "sans être vol_..."},
    {"give size_bytes or size, not both", "donnez size_bytes ou size, pas les deux"},
    {"must be a number of bytes (or a quantity like \"1Gi\") from {} to {}",
     "doit être un nombre d'octets (ou une quantité comme \"1Gi\") de {1} à {2}"},
    {"a volume of this name exists", "un volume de ce nom existe"},
    {"the volume could not be unmounted; retry", "le volume n'a pas pu être démonté ; réessayez"},
    {"a sandbox or a file operation holds the volume", "un bac à sable ou une opération sur fichier détient le volume"},
    {"the file is larger than a file API call carries", "le fichier dépasse ce qu'un appel de l'API des fichiers transporte"},
    {"the volume is full", "le volume est plein"},
    {"a directory that is not empty, or not a file", "un répertoire non vide, ou pas un fichier"},
    {"a sandbox mounts the volume read-write", "un bac à sable monte le volume en lecture-écriture"},
    {"sandboxes mount the volume: it is read-only now", "des bacs à sable montent le volume : il est en lecture seule pour l'instant"},
    {"must be a path in the volume without '.', '..' or empty segments",
     "doit être un chemin dans le volume sans '.', '..' ni segment vide"},
    {"an execution in a session mounts the session's volumes", "une exécution dans une session monte les volumes de la session"},
    {"volumes need a backend that mounts them on this node (gvisor); the backend '{}' of profile '{}' cannot "
     "(docs/volumes.md)",
     "les volumes demandent un backend qui les monte sur ce nœud (gvisor) ; le backend '{1}' du profil '{2}' ne "
     "le peut pas (docs/volumes.md)"},
    /* the node budget (core/exec/budget.c) */
    {"{} MiB and {}m CPU are more than the tenant may hold on a node ({} MiB and {}m: node.tenant_share)",
     "{1} Mio et {2}m de CPU dépassent ce que le locataire peut détenir sur un nœud ({3} Mio et {4}m : "
     "node.tenant_share)"},
    {"{} MiB and {}m CPU do not fit in the tenant's share of the node ({} MiB and {}m of it free: "
     "node.tenant_share)",
     "{1} Mio et {2}m de CPU ne tiennent pas dans la part du nœud du locataire ({3} Mio et {4}m encore libres : "
     "node.tenant_share)"},
    {"{} MiB and {}m CPU do not fit in the node's budget ({} MiB and {}m free: node.memory_budget, "
     "node.cpu_budget)",
     "{1} Mio et {2}m de CPU ne tiennent pas dans le budget du nœud ({3} Mio et {4}m libres : "
     "node.memory_budget, node.cpu_budget)"},
    /* sessions (core/session/session_routes.c, session.c, session_files.c) */
    {"the backend '{}' of profile '{}' does not support sessions",
     "le backend '{1}' du profil '{2}' ne prend pas en charge les sessions"},
    {"at most {} live sessions per tenant (sessions.max_per_tenant)",
     "{1} sessions actives au plus par locataire (sessions.max_per_tenant)"},
    {"differs from the claim of the gateway token", "diffère de la revendication du jeton de la passerelle"},
    {"a session has no network egress", "une session n'a pas d'accès réseau sortant"},
    {"must be a boolean", "doit être un booléen"},
    {"timeout_s and output_bytes are given per execution, not per session",
     "timeout_s et output_bytes se donnent par exécution, pas par session"},
    {"must be an integer within the configured bounds (docs/sessions.md)",
     "doit être un entier dans les bornes configurées (docs/sessions.md)"},
    {"resume it (POST .../resume) or create it with auto_resume",
     "reprenez-la (POST .../resume) ou créez-la avec auto_resume"},
    {"the session is still starting", "la session est encore en démarrage"},
    {"the session has ended", "la session est terminée"},
    {"the session is pausing, resuming or starting", "la session est en cours de pause, de reprise ou de démarrage"},
    {"another call on this session is waiting", "un autre appel sur cette session est en attente"},
    {"boot failed", "échec du démarrage"},
    {"must be a path under /tmp without '.', '..' or empty segments",
     "doit être un chemin sous /tmp sans segment '.', '..' ou vide"},
    {"the backend cannot pause sessions", "le backend ne sait pas mettre les sessions en pause"},
    /* stored sessions, pause admission (core/session/session_store.c, session.c) */
    {"the session runs on another node of the service: call it through the node that created it"
     " (docs/sessions.md, \"Stored sessions\")",
     "la session tourne sur un autre nœud du service : appelez-la par le nœud qui l'a créée"
     " (docs/sessions.md, \"Stored sessions\")"},
    {"must be an integer in 1..1000", "doit être un entier de 1 à 1000"},
    {"the node that runs the session did not answer", "le nœud qui fait tourner la session n'a pas répondu"},
    {"must be an array of host:port entries", "doit être un tableau d'entrées hôte:port"},
    {"the session was created without network egress: it has no network to change",
     "la session a été créée sans accès réseau sortant : elle n'a pas de réseau à modifier"},
    {"must be live or a session status (docs/sessions.md)",
     "doit être live ou un statut de session (docs/sessions.md)"},
    {"must be a session id (ses_...)", "doit être un identifiant de session (ses_...)"},
    {"the tenant's paused sessions would hold {} bytes of checkpoints, over its quota of {}"
     " (sessions.checkpoint_quota_bytes; a paused session counts its memory limit)",
     "les sessions en pause du locataire occuperaient {1} octets de points de reprise, au-delà de son quota de {2}"
     " (sessions.checkpoint_quota_bytes ; une session en pause compte sa limite mémoire)"},
    {"the data disk has {} bytes free: a checkpoint of up to {} bytes would leave less than"
     " sessions.min_free_bytes ({})",
     "le disque de données a {1} octets libres : un point de reprise de {2} octets au plus laisserait moins que"
     " sessions.min_free_bytes ({3})"},
    {"too many pauses and resumes of this session or tenant per minute (sessions.pause_per_minute,"
     " sessions.tenant_pause_per_minute)",
     "trop de pauses et de reprises de cette session ou de ce locataire par minute (sessions.pause_per_minute,"
     " sessions.tenant_pause_per_minute)"},
    {"the backend cannot resume sessions", "le backend ne sait pas reprendre les sessions"},
    /* snapshots and forks (core/session/session_snap.c, session_routes.c) */
    {"the backend '{}' of profile '{}' cannot take snapshots",
     "le backend '{1}' du profil '{2}' ne sait pas prendre d'instantanés"},
    {"only a running session can be snapshotted (not paused, starting or in another snapshot)",
     "seule une session qui tourne peut faire l'objet d'un instantané (pas en pause, en démarrage ou dans un autre"
     " instantané)"},
    {"at most {} snapshots per tenant (sessions.snapshots_max_per_tenant)",
     "au plus {1} instantanés par locataire (sessions.snapshots_max_per_tenant)"},
    {"the tenant's snapshots would hold up to {} bytes, over its quota of {} (sessions.snapshot_quota_bytes)",
     "les instantanés du locataire occuperaient jusqu'à {1} octets, au-delà de son quota de {2}"
     " (sessions.snapshot_quota_bytes)"},
    {"the data disk has {} bytes free: a snapshot of up to {} bytes would leave less than"
     " sessions.min_free_bytes ({})",
     "le disque de données a {1} octets libres : un instantané de {2} octets au plus laisserait moins que"
     " sessions.min_free_bytes ({3})"},
    {"unknown field: a snapshot's body takes only ttl_s",
     "champ inconnu : le corps d'un instantané ne prend que ttl_s"},
    {"the snapshot is still being taken", "l'instantané est encore en cours"},
    {"the snapshot is being deleted", "l'instantané est en cours de suppression"},
    {"sessions are being restored from it: retry once they are running",
     "des sessions sont en cours de restauration depuis celui-ci : réessayez quand elles tournent"},
    {"the snapshot's record could not be written", "l'enregistrement de l'instantané n'a pas pu être écrit"},
    {"a fork takes from_snapshot, count, network, idle_timeout_s, ttl_s and the ids; its profile, image, limits and"
     " env are the snapshot's",
     "un fork prend from_snapshot, count, network, idle_timeout_s, ttl_s et les identifiants ; son profil, son"
     " image, ses limites et son environnement sont ceux de l'instantané"},
    {"the snapshot was taken of a session without network: its forks have none",
     "l'instantané a été pris d'une session sans réseau : ses forks n'en ont pas"},
    {"must be a snapshot id (snp_...)", "doit être un identifiant d'instantané (snp_...)"},
    {"must be an integer in 1..{} (sessions.fork_max_count)", "doit être un entier de 1 à {1} (sessions.fork_max_count)"},
    {"the snapshot is still being taken or is being deleted",
     "l'instantané est encore en cours ou en cours de suppression"},
    {"the snapshot's profile is not configured on this node, or has no sessions",
     "le profil de l'instantané n'est pas configuré sur ce nœud, ou n'a pas de sessions"},
    {"the fork could not be restored", "le fork n'a pas pu être restauré"},
    {"the session ended during the snapshot", "la session s'est terminée pendant l'instantané"},
    {"the snapshot is on node {}: delete it through that node",
     "l'instantané est sur le nœud {1} : supprimez-le par ce nœud"},
    {"the snapshot is on node {}: fork it through that node",
     "l'instantané est sur le nœud {1} : forkez-le par ce nœud"},
    /* a body that does not parse: JSON (jansson's words) and YAML
     * (core/schema/yamljson.c); libyaml's own problem texts stay English */
    {"line {}, column {}: {}", "ligne {1}, colonne {2} : {T3}"},
    {"out of memory", "mémoire épuisée"},
    {"duplicate mapping key '{}'", "clé de mapping en double '{1}'"},
    {"document expands to too many nodes (alias bomb?)", "le document se développe en trop de nœuds (bombe d'alias ?)"},
    {"document expands to more than {} bytes (alias bomb?)",
     "le document se développe en plus de {1} octets (bombe d'alias ?)"},
    {"mapping keys are strings; tag '{}' is not supported here",
     "les clés de mapping sont des chaînes ; le tag '{1}' n'est pas pris en charge ici"},
    {"unsupported tag '{}'", "tag non pris en charge '{1}'"},
    {"'{}' is not a valid value for tag '{}'", "'{1}' n'est pas une valeur valide pour le tag '{2}'"},
    {"'{}': integer out of range", "'{1}' : entier hors limites"},
    {"'{}': number out of range", "'{1}' : nombre hors limites"},
    {"'{}': number too long", "'{1}' : nombre trop long"},
    {"'{}': infinity and NaN cannot be represented in JSON",
     "'{1}' : l'infini et NaN ne peuvent pas être représentés en JSON"},
    {"unknown alias '*{}'", "alias inconnu '*{1}'"},
    {"alias '*{}' used as a mapping key is not a string",
     "l'alias '*{1}' employé comme clé de mapping n'est pas une chaîne"},
    {"mapping keys must be scalars", "les clés de mapping doivent être des scalaires"},
    {"nesting deeper than {}", "imbrication plus profonde que {1}"},
    {"only one YAML document is allowed", "un seul document YAML est permis"},
    {"syntax error", "erreur de syntaxe"},
    /* jansson's "<text> near '<token>'": the text by its own template below (before
     * them: "control character 0x{}" would take the "near" part in its hole) */
    {"{} near end of file", "{T1} en fin de fichier"},
    {"{} near '{}'", "{T1} près de '{2}'"},
    {"'[' or '{' expected", "'[' ou '{' attendu"},
    {"end of file expected", "fin de fichier attendue"},
    {"unexpected token", "élément inattendu"},
    {"invalid token", "élément invalide"},
    {"duplicate object key", "clé d'objet en double"},
    {"string or '}' expected", "chaîne ou '}' attendue"},
    {"':' expected", "':' attendu"},
    {"']' expected", "']' attendu"},
    {"premature end of input", "fin prématurée des données"},
    {"unexpected newline", "saut de ligne inattendu"},
    {"control character 0x{}", "caractère de contrôle 0x{1}"},
    {"invalid escape", "échappement invalide"},
    {"invalid Unicode escape '{}'", "échappement Unicode invalide '{1}'"},
    {"invalid Unicode '{}'", "Unicode invalide '{1}'"},
    {"unable to decode byte 0x{}", "impossible de décoder l'octet 0x{1}"},
    {"maximum parsing depth reached", "profondeur d'analyse maximale atteinte"},
    {"too big negative integer", "entier négatif trop grand"},
    {"too big integer", "entier trop grand"},
    {"real number overflow", "nombre réel hors limites"},
    {"\\u0000 is not allowed without JSON_ALLOW_NUL", "\\u0000 n'est pas permis sans JSON_ALLOW_NUL"},
    {"NUL byte in object key not supported", "octet NUL non pris en charge dans une clé d'objet"},
    /* a plugin's error as its host handle attributes it (core/plugin/host.c) */
    {"plugin {}: {}", "plugin {1} : {T2}"},
};

#define MAXCAP 4
/* Bounds of the work one message may cost (eai_details_localize runs on
 * the event loop): longer messages keep their English text in French, and
 * a nested message ({Tn}) is translated at most this deep. */
#define MAX_EN_BYTES 2048 /* the longest of ours: unknown_image with its list of images, ~1.4k */
#define MAX_NEST 3

/* A French hole at f: "{n}" (the n-th English hole) or "{Tn}" (that one,
 * itself translated).  Its length, with *k = n - 1 and *tr; 0 when f is
 * not at one. */
static int fr_hole(const char *f, int *k, int *tr)
{
    if (f[0] == '{' && f[1] >= '1' && f[1] <= '9' && f[2] == '}') {
        *k = f[1] - '1', *tr = 0;
        return 3;
    }
    if (f[0] == '{' && f[1] == 'T' && f[2] >= '1' && f[2] <= '9' && f[3] == '}') {
        *k = f[2] - '1', *tr = 1;
        return 4;
    }
    return 0;
}

/* Match s (its end at end) against template t ("{}" holes, each at least
 * one character), shortest holes first, backtracking; the holes' [start,
 * end) into cs/ce.  A hole is only tried up to where the text after it in
 * t occurs in s (memmem), so the cost follows that text's occurrences, not
 * every byte. */
static int match(const char *t, const char *s, const char *end, const char *cs[MAXCAP], const char *ce[MAXCAP],
                 int *ncap)
{
    while (*t && !(t[0] == '{' && t[1] == '}')) {
        if (*t != *s)
            return 0;
        t++, s++;
    }
    if (!*t)
        return *s == 0;
    if (*ncap >= MAXCAP || s >= end)
        return 0;
    int k = (*ncap)++;
    const char *lit = t + 2;
    size_t ll = 0;
    while (lit[ll] && !(lit[ll] == '{' && lit[ll + 1] == '}'))
        ll++;
    if (ll == 0 && !*lit) { /* the last hole takes the rest */
        cs[k] = s;
        ce[k] = end;
        return 1;
    }
    for (const char *e = s + 1; e <= end; e++) {
        if (ll) {
            e = memmem(e, (size_t)(end - e), lit, ll);
            if (!e)
                break;
        }
        cs[k] = s;
        ce[k] = e;
        if (match(t + 2, e, end, cs, ce, ncap))
            return 1;
        *ncap = k + 1;
    }
    *ncap = k;
    return 0;
}

/* Template i: core's table (T) first, then the plugins' messages
 * (plugin/messages.h, ABI 1.4) in the order they loaded. */
static int tmpl_at(size_t i, struct tmpl *t)
{
    if (i < sizeof T / sizeof T[0]) {
        *t = T[i];
        return 1;
    }
    i -= sizeof T / sizeof T[0];
    if (i >= eai_plugin_messages_count())
        return 0;
    eai_plugin_message_at(i, &t->en, &t->fr);
    return t->en && t->fr;
}

static char *detail_fr(const char *en, int depth)
{
    size_t enl = en ? strlen(en) : 0;
    if (!en || enl > MAX_EN_BYTES || depth > MAX_NEST)
        return NULL;
    struct tmpl t;
    for (size_t i = 0; tmpl_at(i, &t); i++) {
        const char *cs[MAXCAP], *ce[MAXCAP];
        int n = 0;
        if (!match(t.en, en, en + enl, cs, ce, &n))
            continue;
        size_t cap = strlen(t.fr) + enl * 2 + 64;
        char *out = malloc(cap);
        if (!out)
            return NULL;
        size_t o = 0;
        for (const char *f = t.fr; *f && o + 1 < cap;) {
            int k = -1, tr = 0, hl = fr_hole(f, &k, &tr);
            if (hl && k < n) {
                size_t len = (size_t)(ce[k] - cs[k]);
                char *piece = strndup(cs[k], len), *fr = NULL;
                if (tr && piece)
                    fr = detail_fr(piece, depth + 1); /* a nested message */
                const char *put = fr ? fr : piece ? piece : "";
                o += (size_t)snprintf(out + o, cap - o, "%s", put);
                free(fr);
                free(piece);
                f += hl;
                if (o >= cap)
                    o = cap - 1;
                continue;
            }
            out[o++] = *f++;
        }
        out[o] = 0;
        return out;
    }
    return NULL;
}

char *eai_detail_fr(const char *en)
{
    return detail_fr(en, 0);
}

/* Replace each hole of t ("{}" in English; "{n}" and "{Tn}" in French)
 * by "Q<n>" into out; -1 when out is too small, a French hole names no
 * English one (n > holes) or there are more than MAXCAP. */
static int fill(const char *t, int french, int holes, char *out, size_t cap)
{
    size_t o = 0;
    int n = 0;
    while (*t) {
        int k = 0, tr = 0, skip = 0;
        if (!french && t[0] == '{' && t[1] == '}')
            k = ++n, skip = 2;
        else if (french && (skip = fr_hole(t, &k, &tr)) > 0)
            k++; /* fr_hole counts from 0 */
        if (skip) {
            if (k > MAXCAP || (french && k > holes) || o + 3 >= cap)
                return -1;
            out[o++] = 'Q';
            out[o++] = (char)('0' + k);
            t += skip;
            continue;
        }
        if (o + 1 >= cap)
            return -1;
        out[o++] = *t++;
    }
    out[o] = 0;
    return n;
}

int eai_details_table_check(char *why, size_t whylen)
{
    struct tmpl t;
    for (size_t i = 0; tmpl_at(i, &t); i++) {
        char en[512], want[512];
        int holes = fill(t.en, 0, 0, en, sizeof en);
        if (holes < 0 || fill(t.fr, 1, holes, want, sizeof want) < 0) {
            snprintf(why, whylen, "entry %zu '%s': more than %d holes, or a French hole with no English one", i,
                     t.en, MAXCAP);
            return -1;
        }
        char *got = eai_detail_fr(en);
        int ok = got && strcmp(got, want) == 0;
        if (!ok)
            snprintf(why, whylen, "entry %zu '%s': '%s' gives '%s', not '%s' (an earlier template takes it?)", i,
                     t.en, en, got ? got : "(none)", want);
        free(got);
        if (!ok)
            return -1;
    }
    return 0;
}

void eai_details_localize(json_t *details, const char *lang)
{
    size_t i;
    json_t *d;
    json_array_foreach(details, i, d) {
        const char *en = json_string_value(json_object_get(d, "message"));
        if (!en || json_object_get(d, "message_i18n"))
            continue;
        char *fr = eai_detail_fr(en);
        json_t *i18n = json_pack("{s:s, s:s}", "en", en, "fr", fr ? fr : en);
        if (lang && strcmp(lang, "fr") == 0 && fr)
            json_object_set_new(d, "message", json_string(fr));
        if (i18n)
            json_object_set_new(d, "message_i18n", i18n);
        free(fr);
    }
}
